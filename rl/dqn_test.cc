// Copyright dreplay authors.
//
// The DQN loss on hand-computed cases (tensor functions of dqn_loss.h), and
// the learner through its torch-free interface.

#include "rl/dqn.h"

#include <torch/types.h>

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rl/dqn_loss.h"
#include "rl/random.h"

namespace dreplay::rl {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::FloatNear;

std::vector<float> ToVector(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

TEST(DqnLossTest, HuberIsQuadraticInsideDeltaAndLinearOutside) {
  const torch::Tensor x = torch::tensor({-3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 2.0f});
  EXPECT_THAT(ToVector(Huber(x, 1.0)), ElementsAre(2.5f, 0.5f, 0.125f, 0.0f, 0.125f, 1.5f));
  // delta = 2: 0.5 * 1.5^2 inside, 2 * (3 - 1) outside.
  EXPECT_THAT(ToVector(Huber(torch::tensor({1.5f, -3.0f}), 2.0)), ElementsAre(1.125f, 4.0f));
}

TEST(DqnLossTest, DoubleDqnTargetTakesTheOnlineArgmaxAndTheTargetValue) {
  const torch::Tensor rewards = torch::tensor({1.0f, 2.0f, -1.0f});
  const torch::Tensor discounts = torch::tensor({0.5f, 0.25f, 0.5f});
  const torch::Tensor dones = torch::tensor({0.0f, 0.0f, 1.0f});
  const torch::Tensor next_online = torch::tensor({{1.0f, 3.0f}, {5.0f, 2.0f}, {0.0f, 9.0f}});
  const torch::Tensor next_target = torch::tensor({{10.0f, 20.0f}, {30.0f, 40.0f}, {7.0f, 8.0f}});
  // Row 0: argmax online = 1 -> 20: 1 + 0.5 * 20 = 11.
  // Row 1: argmax online = 0 -> 30 (not the target's max 40): 2 + 0.25 * 30.
  // Row 2: done: the reward alone.
  EXPECT_THAT(ToVector(DoubleDqnTargets(rewards, discounts, dones, next_online, next_target)),
              ElementsAre(11.0f, 9.5f, -1.0f));
  // Plain DQN: the target network chooses too, so row 1 takes 40.
  EXPECT_THAT(ToVector(DoubleDqnTargets(rewards, discounts, dones, next_target, next_target)),
              ElementsAre(11.0f, 12.0f, -1.0f));
}

TEST(DqnLossTest, LossIsTheWeightedMeanHuberOfTheTakenActions) {
  const torch::Tensor q = torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}}).requires_grad_(true);
  const torch::Tensor actions = torch::tensor({1, 0}, torch::kInt64);
  const torch::Tensor targets = torch::tensor({2.5f, 0.0f});
  const torch::Tensor weights = torch::tensor({1.0f, 0.5f});
  // td = (2.5 - 2, 0 - 3) = (0.5, -3); huber = (0.125, 2.5);
  // loss = (1 * 0.125 + 0.5 * 2.5) / 2 = 0.6875.
  const DqnLossTerms terms = WeightedHuberLoss(q, actions, targets, weights, 1.0);
  EXPECT_FLOAT_EQ(terms.loss.item<float>(), 0.6875f);
  EXPECT_THAT(ToVector(terms.td_error), ElementsAre(0.5f, -3.0f));
  EXPECT_FALSE(terms.td_error.requires_grad());

  // d loss / d q(0, 1) = -w0 * td0 / B = -0.25 (quadratic part);
  // d loss / d q(1, 0) = -w1 * delta * sign(td1) / B = +0.25 (linear part);
  // the actions not taken get no gradient.
  terms.loss.backward();
  EXPECT_THAT(ToVector(q.grad()), ElementsAre(0.0f, -0.25f, 0.25f, 0.0f));
}

TEST(DqnLossTest, ImportanceWeightsScaleEachSamplesContribution) {
  const torch::Tensor q = torch::tensor({{0.0f}, {0.0f}});
  const torch::Tensor actions = torch::tensor({0, 0}, torch::kInt64);
  const torch::Tensor targets = torch::tensor({0.5f, 0.5f});
  auto loss = [&](std::vector<float> w) {
    return WeightedHuberLoss(q, actions, targets, torch::tensor(w), 1.0).loss.item<float>();
  };
  EXPECT_FLOAT_EQ(loss({1.0f, 1.0f}), 0.125f);
  EXPECT_FLOAT_EQ(loss({2.0f, 2.0f}), 0.25f);
  EXPECT_FLOAT_EQ(loss({1.0f, 0.0f}), 0.0625f);
}

// A network 1 -> 1 -> 2 with Q(s) = (relu(s) * w, -relu(s) * w).
std::unique_ptr<QNetwork> TinyNetwork(float sign) {
  QNetworkOptions options;
  options.observation_size = 1;
  options.action_count = 2;
  options.hidden_sizes = {1};
  std::unique_ptr<QNetwork> net = *QNetwork::Create(options, 1);
  // W1 = [1], b1 = [0], W2 = [[sign], [-sign]], b2 = [0, 0].
  EXPECT_TRUE(net->SetParameters({1, 0, sign, -sign, 0, 0}).ok());
  return net;
}

Transition TinyTransition(bool done) {
  Transition t;
  t.observation = {2.0f};
  t.action = 1;
  t.reward = 1.0f;
  t.discount = 0.5f;
  t.done = done;
  t.steps = 1;
  t.next_observation = {4.0f};
  return t;
}

TEST(ComputeAbsTdErrorsTest, MatchesHandComputedTargetsOfATinyNetwork) {
  std::unique_ptr<QNetwork> online = TinyNetwork(1.0f);   // Q = (s, -s)
  std::unique_ptr<QNetwork> target = TinyNetwork(-1.0f);  // Q = (-s, s)
  TransitionBatch batch(1);
  ASSERT_TRUE(batch.Add(TinyTransition(false)).ok());
  ASSERT_TRUE(batch.Add(TinyTransition(true)).ok());
  std::vector<float> out(2);

  // One network as both: Q(s, 1) = -2; target = 1 + 0.5 * max(4, -4) = 3,
  // |td| = 5; done: target = 1, |td| = 3.
  ASSERT_TRUE(ComputeAbsTdErrors(*online, *online, batch, true, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(5.0f, 3.0f));

  // Double DQN: the online argmax at s' = 4 is action 0, whose target value
  // is -4: target = 1 - 2 = -1, |td| = |-1 - (-2)| = 1.
  ASSERT_TRUE(ComputeAbsTdErrors(*online, *target, batch, true, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(1.0f, 3.0f));

  // Plain DQN: the target's max, 4: target = 3, |td| = 5.
  ASSERT_TRUE(ComputeAbsTdErrors(*online, *target, batch, false, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(5.0f, 3.0f));
}

DqnOptions SmallOptions() {
  DqnOptions options;
  options.network.observation_size = 4;
  options.network.action_count = 2;
  options.network.hidden_sizes = {32, 32};
  options.learning_rate = 1e-3;
  options.seed = 3;
  return options;
}

// A fixed batch of CartPole-like random transitions.
TransitionBatch RandomBatch(int size, uint64_t seed) {
  Random random(seed);
  TransitionBatch batch(4);
  for (int i = 0; i < size; ++i) {
    Transition t;
    for (int j = 0; j < 4; ++j) {
      t.observation.push_back(static_cast<float>(random.Uniform(-1, 1)));
      t.next_observation.push_back(static_cast<float>(random.Uniform(-1, 1)));
    }
    t.action = static_cast<int32_t>(random.UniformInt(2));
    t.reward = 1.0f;
    t.discount = 0.97f;
    t.done = random.Bernoulli(0.1);
    t.steps = 3;
    EXPECT_TRUE(batch.Add(t).ok());
  }
  return batch;
}

TEST(DqnOptionsTest, ValidateNamesTheBadValue) {
  DqnOptions options = SmallOptions();
  EXPECT_TRUE(options.Validate().ok());
  options.learning_rate = 0;
  EXPECT_THAT(std::string(options.Validate().message()), ::testing::HasSubstr("learning_rate"));
  options = SmallOptions();
  options.target_update_period = 0;
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
  options = SmallOptions();
  options.huber_delta = -1;
  EXPECT_EQ(DqnLearner::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DqnLearnerTest, TrainingOnAFixedBatchReducesTheLoss) {
  DqnOptions options = SmallOptions();
  options.target_update_period = 1000000;  // fixed targets
  std::unique_ptr<DqnLearner> learner = *DqnLearner::Create(options);
  const TransitionBatch batch = RandomBatch(32, 1);
  const std::vector<float> weights(32, 1.0f);
  absl::StatusOr<TrainStepResult> first = learner->TrainStep(batch, weights);
  ASSERT_TRUE(first.ok()) << first.status();
  double last = first->loss;
  for (int i = 0; i < 300; ++i) {
    absl::StatusOr<TrainStepResult> r = learner->TrainStep(batch, weights);
    ASSERT_TRUE(r.ok());
    last = r->loss;
  }
  EXPECT_GT(first->loss, 0.1);
  EXPECT_LT(last, 0.05 * first->loss);
  EXPECT_EQ(learner->train_steps(), 301);
}

TEST(DqnLearnerTest, ReportsPrioritiesAndTheWeightedLossBeforeTheUpdate) {
  std::unique_ptr<DqnLearner> learner = *DqnLearner::Create(SmallOptions());
  const TransitionBatch batch = RandomBatch(8, 2);
  std::vector<float> before(8);
  ASSERT_TRUE(learner->AbsTdErrors(batch, absl::MakeSpan(before)).ok());
  const std::vector<float> weights = {1, 0.5f, 0.25f, 1, 1, 0.75f, 0.1f, 1};
  absl::StatusOr<TrainStepResult> r = learner->TrainStep(batch, weights);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->abs_td_errors.size(), 8u);
  double expected_loss = 0;
  for (int i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(r->abs_td_errors[i], before[i]) << i;
    const double d = before[i];
    expected_loss += weights[i] * (d <= 1 ? 0.5 * d * d : d - 0.5);
  }
  EXPECT_NEAR(r->loss, expected_loss / 8, 1e-5);
}

TEST(DqnLearnerTest, ZeroImportanceWeightsLeaveTheNetworkUnchanged) {
  std::unique_ptr<DqnLearner> learner = *DqnLearner::Create(SmallOptions());
  const std::vector<float> before = learner->online().GetParameters();
  ASSERT_TRUE(learner->TrainStep(RandomBatch(8, 3), std::vector<float>(8, 0.0f)).ok());
  EXPECT_EQ(learner->online().GetParameters(), before);
}

TEST(DqnLearnerTest, UpdatesTheTargetEveryPeriodSteps) {
  DqnOptions options = SmallOptions();
  options.target_update_period = 3;
  std::unique_ptr<DqnLearner> learner = *DqnLearner::Create(options);
  EXPECT_EQ(learner->target().GetParameters(), learner->online().GetParameters());
  const TransitionBatch batch = RandomBatch(16, 4);
  const std::vector<float> weights(16, 1.0f);
  for (int step = 1; step <= 6; ++step) {
    absl::StatusOr<TrainStepResult> r = learner->TrainStep(batch, weights);
    ASSERT_TRUE(r.ok());
    const bool synced = step % 3 == 0;
    EXPECT_EQ(r->target_updated, synced) << step;
    EXPECT_EQ(learner->target().GetParameters() == learner->online().GetParameters(), synced)
        << step;
  }
}

TEST(DqnLearnerTest, RejectsBatchesThatDoNotFitTheNetwork) {
  std::unique_ptr<DqnLearner> learner = *DqnLearner::Create(SmallOptions());
  const TransitionBatch batch = RandomBatch(4, 5);
  EXPECT_EQ(learner->TrainStep(batch, std::vector<float>(3, 1.0f)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(learner->TrainStep(TransitionBatch(4), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(learner->TrainStep(batch, {1.0f, -1.0f, 1.0f, 1.0f}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(learner->TrainStep(batch, {1.0f, 1.0f, NAN, 1.0f}).status().code(),
            absl::StatusCode::kInvalidArgument);
  TransitionBatch wide(6);
  Transition t;
  t.observation.assign(6, 0.0f);
  t.next_observation.assign(6, 0.0f);
  ASSERT_TRUE(wide.Add(t).ok());
  EXPECT_EQ(learner->TrainStep(wide, {1.0f}).status().code(), absl::StatusCode::kInvalidArgument);
  TransitionBatch bad_action(4);
  t.observation.assign(4, 0.0f);
  t.next_observation.assign(4, 0.0f);
  t.action = 2;
  ASSERT_TRUE(bad_action.Add(t).ok());
  EXPECT_EQ(learner->TrainStep(bad_action, {1.0f}).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> out(3);
  EXPECT_EQ(learner->AbsTdErrors(batch, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(learner->train_steps(), 0);
}

}  // namespace
}  // namespace dreplay::rl
