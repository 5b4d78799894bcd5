// Copyright dreplay authors.

#include "learner_client/learner_loop.h"

#include <atomic>
#include <cmath>
#include <deque>
#include <vector>

#include "gtest/gtest.h"
#include "rl/make_environment.h"
#include "rl/policy.h"
#include "rl/random.h"

namespace dreplay::learner {
namespace {

constexpr int kObservation = 4;  // CartPole
constexpr int kBatch = 16;

// A valid encoded CartPole transition drawn from `random`.
std::vector<uint8_t> RandomPayload(rl::Random& random) {
  rl::Transition t;
  for (int i = 0; i < kObservation; ++i) {
    t.observation.push_back(static_cast<float>(random.Uniform(-0.2, 0.2)));
    t.next_observation.push_back(static_cast<float>(random.Uniform(-0.2, 0.2)));
  }
  t.action = static_cast<int32_t>(random.UniformInt(2));
  t.reward = 1.0f;
  t.discount = 0.97f;
  t.steps = 3;
  std::vector<uint8_t> out(rl::EncodedTransitionSize(kObservation));
  EXPECT_TRUE(rl::EncodeTransition(t, absl::MakeSpan(out)).ok());
  return out;
}

class FakeBatches : public BatchSource {
 public:
  explicit FakeBatches(int batches) : remaining(batches) {}
  absl::StatusOr<bool> Next(absl::Duration, rl::TransitionBatch* batch,
                            std::vector<float>* weights) override {
    if (remaining == 0) return false;
    --remaining;
    batch->Clear();
    weights->clear();
    for (int i = 0; i < kBatch; ++i) {
      const absl::Status s = batch->AddEncoded(RandomPayload(random));
      if (!s.ok()) return s;
      weights->push_back(0.5f);
    }
    return true;
  }
  absl::Status WritePriorities(absl::Span<const float> priorities) override {
    written.emplace_back(priorities.begin(), priorities.end());
    return absl::OkStatus();
  }
  int remaining;
  rl::Random random{5};
  std::vector<std::vector<float>> written;
};

class FakeStream : public TransitionStream {
 public:
  FakeStream(int total, int chunk) : remaining(total), chunk(chunk) {}
  absl::Status Next(absl::Duration, std::vector<ForwardedItem>* out) override {
    out->clear();
    payloads.clear();
    const int n = std::min(remaining, chunk);
    for (int i = 0; i < n; ++i) payloads.push_back(RandomPayload(random));
    for (int i = 0; i < n; ++i) {
      ForwardedItem item;
      item.sequence = next_sequence++;
      item.initial_priority = 1.0f;
      item.payload = payloads[i];
      out->push_back(item);
    }
    remaining -= n;
    return absl::OkStatus();
  }
  int remaining;
  const int chunk;
  uint64_t next_sequence = 0;
  std::vector<std::vector<uint8_t>> payloads;
  rl::Random random{6};
};

class FakeParams : public ParamsSink {
 public:
  absl::Status Publish(absl::Span<const uint8_t> params) override {
    published.emplace_back(params.begin(), params.end());
    return absl::OkStatus();
  }
  std::vector<std::vector<uint8_t>> published;
};

class FakeActors : public ActorStatsSource {
 public:
  absl::StatusOr<ActorTotals> Read() override {
    ++reads;
    return totals;
  }
  ActorTotals totals;
  int reads = 0;
};

LearnerLoopOptions SmallOptions(ReplayPlacement placement) {
  LearnerLoopOptions o;
  o.placement = placement;
  o.env = "CartPole-v1";
  o.dqn.network.hidden_sizes = {16};
  o.dqn.seed = 3;
  o.memory.capacity = 1024;
  o.batch_size = kBatch;
  o.min_replay_size = 100;
  o.eval_episodes = 5;
  o.eval_interval = absl::Hours(1);
  o.progress_interval = absl::Hours(1);
  o.wait_timeout = absl::Milliseconds(1);
  o.publish_every = 0;
  return o;
}

TEST(EvaluateGreedyTest, GivesTheReturnsOfEvaluatePolicyWithTheGreedyAction) {
  rl::QNetworkOptions options;
  options.observation_size = kObservation;
  options.action_count = 2;
  options.hidden_sizes = {8};
  for (uint64_t seed : {1, 2, 3}) {
    auto network = rl::QNetwork::Create(options, seed);
    ASSERT_TRUE(network.ok());
    auto batched = EvaluateGreedy(**network, "CartPole-v1", 8, 100);
    ASSERT_TRUE(batched.ok()) << batched.status();
    auto env = rl::MakeEnvironment("CartPole-v1");
    ASSERT_TRUE(env.ok());
    const rl::QNetwork& net = **network;
    auto single = rl::EvaluatePolicy(
        **env, [&net](absl::Span<const float> obs) { return net.GreedyAction(obs); }, 8, 100);
    ASSERT_TRUE(single.ok()) << single.status();
    EXPECT_EQ(batched->returns, single->returns) << "network seed " << seed;
    EXPECT_DOUBLE_EQ(batched->mean_return, single->mean_return);
  }
}

TEST(EvaluateGreedyTest, RefusesANetworkOfAnotherShapeAndZeroEpisodes) {
  rl::QNetworkOptions options;
  options.observation_size = 6;
  options.action_count = 3;
  auto network = rl::QNetwork::Create(options, 1);
  ASSERT_TRUE(network.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(EvaluateGreedy(**network, "CartPole-v1", 2, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(EvaluateGreedy(**network, "Acrobot-v1", 0, 0).status()));
}

TEST(LearnerLoopTest, BufferPlacementTrainsOnEveryBatchAndWritesBackItsPriorities) {
  FakeBatches batches(30);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 30;
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 30);
  ASSERT_EQ(batches.written.size(), 30u);
  double sum = 0;
  for (const auto& priorities : batches.written) {
    ASSERT_EQ(priorities.size(), static_cast<size_t>(kBatch));
    for (float p : priorities) {
      EXPECT_GE(p, 0.0f);
      sum += p;
    }
  }
  const SummaryRecord s = (*loop)->Summary();
  EXPECT_EQ(s.mode, "buffer");
  EXPECT_EQ(s.train_steps, 30u);
  EXPECT_EQ(s.link_transitions_total, 30u * kBatch);
  ASSERT_TRUE(s.loss_mean_last_half.has_value());
  ASSERT_TRUE(s.transferred_priority_mean_last_half.has_value());
  EXPECT_GT(*s.transferred_priority_mean_last_half, 0.0);
  // One final evaluation, as the run did not end solved.
  EXPECT_EQ(s.evaluations, 1u);
}

TEST(LearnerLoopTest, LearnerPlacementStoresEveryArrivalAndTrainsOnceEnoughAreStored) {
  FakeStream stream(300, 40);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kLearner);
  o.max_train_steps = 50;
  auto loop = LearnerLoop::Create(o, {nullptr, &stream, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 50);
  EXPECT_EQ((*loop)->local_replay_size(), 300u);
  const SummaryRecord s = (*loop)->Summary();
  EXPECT_EQ(s.mode, "learner");
  EXPECT_EQ(s.link_transitions_total, 300u);
  EXPECT_TRUE(s.loss_mean_last_half.has_value());
}

TEST(LearnerLoopTest, LearnerPlacementDoesNotTrainBeforeTheMinimumReplaySize) {
  FakeStream stream(60, 20);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kLearner);
  o.duration = absl::Milliseconds(100);
  auto loop = LearnerLoop::Create(o, {nullptr, &stream, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 0);
  EXPECT_EQ((*loop)->local_replay_size(), 60u);
}

TEST(LearnerLoopTest, PublishesTheNetworkAtTheStartAndEveryPublishPeriod) {
  FakeBatches batches(25);
  FakeParams params;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.max_train_steps = 25;
  o.publish_every = 10;
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, &params, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  ASSERT_EQ(params.published.size(), 3u);  // start, step 10, step 20
  rl::QNetworkOptions shape;
  shape.observation_size = kObservation;
  shape.action_count = 2;
  shape.hidden_sizes = {16};
  auto network = rl::QNetwork::Create(shape, 99);
  ASSERT_TRUE(network.ok());
  auto version = (*network)->Load(params.published.back());
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 3u);
}

TEST(LearnerLoopTest, StopsAtTheFirstEvaluationThatSolves) {
  FakeBatches batches(0);  // nothing to train on: the evaluation decides
  FakeActors actors;
  actors.totals.env_steps = 1234;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.stop_when_solved = true;
  o.solve_return = 1.0;  // any episode reaches it
  o.eval_interval = absl::Milliseconds(20);
  o.duration = absl::Seconds(60);
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, nullptr, &actors, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  const absl::Time start = absl::Now();
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  const SummaryRecord s = (*loop)->Summary();
  EXPECT_TRUE(s.solved);
  ASSERT_TRUE(s.time_to_solve_s.has_value());
  EXPECT_GE(*s.time_to_solve_s, 0.02);
  EXPECT_EQ(*s.env_steps_to_solve, 1234u);
  EXPECT_EQ(s.evaluations, 1u);
}

TEST(LearnerLoopTest, ReportsProgressEveryIntervalAndOnceAtTheEnd) {
  FakeBatches batches(0);
  FakeActors actors;
  actors.totals.env_steps = 77;
  std::vector<ProgressRecord> records;
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  o.progress_interval = absl::Milliseconds(30);
  o.duration = absl::Milliseconds(200);
  o.seed = 11;
  auto loop =
      LearnerLoop::Create(o, {&batches, nullptr, nullptr, &actors, [] { return uint64_t{4096}; },
                              [&records](const ProgressRecord& r) { records.push_back(r); }});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  ASSERT_GE(records.size(), 3u);
  for (size_t i = 1; i < records.size(); ++i) {
    EXPECT_GT(records[i].wall_s, records[i - 1].wall_s);
  }
  const ProgressRecord& last = records.back();
  EXPECT_EQ(last.seed, 11u);
  EXPECT_EQ(last.env_steps, 77u);
  EXPECT_EQ(last.link_bytes_total, 4096u);
  EXPECT_TRUE(last.eval_return_mean.has_value());  // the final evaluation
  EXPECT_GE(last.wall_s, 0.2);
}

TEST(LearnerLoopTest, StopFlagEndsTheRun) {
  FakeBatches batches(0);
  LearnerLoopOptions o = SmallOptions(ReplayPlacement::kBuffer);
  auto loop = LearnerLoop::Create(o, {&batches, nullptr, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{true};
  ASSERT_TRUE((*loop)->Run(stop).ok());
  EXPECT_EQ((*loop)->learner().train_steps(), 0);
}

TEST(LearnerLoopTest, LearnerPlacementRefusesAPayloadOfTheWrongSize) {
  class ShortStream : public TransitionStream {
   public:
    absl::Status Next(absl::Duration, std::vector<ForwardedItem>* out) override {
      out->assign(1, ForwardedItem{0, 1.0f, absl::MakeConstSpan(bytes, sizeof(bytes))});
      return absl::OkStatus();
    }
    uint8_t bytes[8] = {};
  } stream;
  auto loop = LearnerLoop::Create(SmallOptions(ReplayPlacement::kLearner),
                                  {nullptr, &stream, nullptr, nullptr, {}, {}});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::atomic<bool> stop{false};
  EXPECT_TRUE(absl::IsDataLoss((*loop)->Run(stop)));
}

TEST(LearnerLoopTest, RejectsAPlacementWithoutItsSource) {
  EXPECT_TRUE(absl::IsInvalidArgument(
      LearnerLoop::Create(SmallOptions(ReplayPlacement::kBuffer), {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      LearnerLoop::Create(SmallOptions(ReplayPlacement::kLearner), {}).status()));
}

TEST(LearnerLoopTest, ParsesPlacementNames) {
  EXPECT_EQ(*ParseReplayPlacement("buffer"), ReplayPlacement::kBuffer);
  EXPECT_EQ(*ParseReplayPlacement("learner"), ReplayPlacement::kLearner);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseReplayPlacement("cloud").status()));
}

}  // namespace
}  // namespace dreplay::learner
