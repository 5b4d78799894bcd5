// Copyright dreplay authors.
//
// The convolutional Q-networks for MinAtar (native grid and pixels84 frames):
// the torso an environment gets, shapes, a training step forward and
// backward, and their parameters through the params format.

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rl/dqn.h"
#include "rl/make_environment.h"
#include "rl/params_format.h"
#include "rl/qnet.h"
#include "rl/transition.h"

namespace dreplay::rl {
namespace {

EnvironmentSpec SpecOf(const char* name, ObservationMode mode) {
  absl::StatusOr<std::unique_ptr<Environment>> env = MakeEnvironment(name, mode);
  EXPECT_TRUE(env.ok()) << env.status();
  return (*env)->spec();
}

std::unique_ptr<QNetwork> NetworkFor(const EnvironmentSpec& env, uint64_t seed) {
  absl::StatusOr<std::unique_ptr<QNetwork>> net =
      QNetwork::Create(NetworkOptionsFor(env, DefaultHiddenSizes(env)), seed);
  EXPECT_TRUE(net.ok()) << net.status();
  return net.ok() ? *std::move(net) : nullptr;
}

TEST(ConvNetworksTest, EachObservationLayoutGetsItsTorsoAndDefaultHead) {
  const EnvironmentSpec cartpole = SpecOf("CartPole-v1", ObservationMode::kNative);
  EXPECT_EQ(NetworkOptionsFor(cartpole, DefaultHiddenSizes(cartpole)).torso, QNetworkTorso::kMlp);
  EXPECT_THAT(DefaultHiddenSizes(cartpole), ::testing::ElementsAre(64, 64));

  const EnvironmentSpec native = SpecOf("MinAtar/Breakout", ObservationMode::kNative);
  const QNetworkOptions grid = NetworkOptionsFor(native, DefaultHiddenSizes(native));
  EXPECT_EQ(grid.torso, QNetworkTorso::kMinAtar);
  EXPECT_EQ(grid.input_channels, 4);
  EXPECT_EQ(grid.observation_size, 400);
  EXPECT_THAT(grid.hidden_sizes, ::testing::ElementsAre(128));

  const EnvironmentSpec pixels = SpecOf("MinAtar/Breakout", ObservationMode::kPixels84);
  const QNetworkOptions nature = NetworkOptionsFor(pixels, DefaultHiddenSizes(pixels));
  EXPECT_EQ(nature.torso, QNetworkTorso::kNatureCnn);
  EXPECT_EQ(nature.input_channels, 4);
  EXPECT_EQ(nature.observation_size, 4 * 84 * 84);
  EXPECT_THAT(nature.hidden_sizes, ::testing::ElementsAre(512));
}

TEST(ConvNetworksTest, HaveThePublishedArchitecturesParameterCounts) {
  // MinAtar: conv 4->16 3x3 (16*4*9 + 16), fc 1024->128, fc 128->6.
  std::unique_ptr<QNetwork> grid =
      NetworkFor(SpecOf("MinAtar/Breakout", ObservationMode::kNative), 1);
  EXPECT_EQ(grid->parameter_count(), (16 * 4 * 9 + 16) + (1024 * 128 + 128) + (128 * 6 + 6));
  // Nature: conv 4->32 8x8, 32->64 4x4, 64->64 3x3, fc 3136->512, 512->6.
  std::unique_ptr<QNetwork> nature =
      NetworkFor(SpecOf("MinAtar/Breakout", ObservationMode::kPixels84), 1);
  EXPECT_EQ(nature->parameter_count(), (32 * 4 * 64 + 32) + (64 * 32 * 16 + 64) +
                                           (64 * 64 * 9 + 64) + (3136 * 512 + 512) + (512 * 6 + 6));
}

TEST(ConvNetworksTest, ValidateRefusesAnObservationSizeTheTorsoCannotTake) {
  QNetworkOptions options =
      NetworkOptionsFor(SpecOf("MinAtar/Seaquest", ObservationMode::kNative), {128});
  EXPECT_TRUE(options.Validate().ok());
  options.observation_size = 999;
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
  options.observation_size = 1000;
  options.input_channels = 0;
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConvNetworksTest, PixelsAreScaledSoAllWhiteFramesGiveFiniteValues) {
  std::unique_ptr<QNetwork> nature =
      NetworkFor(SpecOf("MinAtar/Breakout", ObservationMode::kPixels84), 3);
  const std::vector<float> white(2 * 4 * 84 * 84, 255.0f);
  std::vector<float> q(2 * 6);
  ASSERT_TRUE(nature->QValues(white, absl::MakeSpan(q)).ok());
  for (float v : q) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_LT(std::abs(v), 10.0f);  // 1/255 scaling keeps activations small
  }
}

// A batch of real MinAtar transitions (random actions) under `mode`.
TransitionBatch PlayedBatch(ObservationMode mode, int size) {
  std::unique_ptr<Environment> env = *MakeEnvironment("MinAtar/Breakout", mode);
  TransitionBatch batch(env->spec().observation_size, env->spec().observation_type);
  std::vector<float> obs = env->Reset(5);
  for (int i = 0; static_cast<int>(batch.size()) < size; ++i) {
    Transition t;
    t.observation = obs;
    t.action = i % 6;
    absl::StatusOr<StepResult> step = env->Step(t.action);
    EXPECT_TRUE(step.ok()) << step.status();
    t.reward = static_cast<float>(step->reward) + (i % 3 == 0 ? 1.0f : 0.0f);
    t.discount = 0.99f;
    t.done = step->terminated;
    t.next_observation = step->observation;
    // Through the u8 encoding, as transitions reach the learner.
    std::vector<uint8_t> bytes(
        EncodedTransitionSize(t.observation.size(), env->spec().observation_type));
    EXPECT_TRUE(EncodeTransition(t, absl::MakeSpan(bytes), env->spec().observation_type).ok());
    EXPECT_TRUE(batch.AddEncoded(bytes).ok());
    obs = step->done() ? env->Reset() : step->observation;
  }
  return batch;
}

void ExpectTrainingStepsChangeTheNetwork(ObservationMode mode) {
  const EnvironmentSpec spec = SpecOf("MinAtar/Breakout", mode);
  DqnOptions options;
  options.network = NetworkOptionsFor(spec, DefaultHiddenSizes(spec));
  options.optimizer = DqnOptimizer::kRmsprop;
  options.learning_rate = 0.00025;
  options.seed = 7;
  std::unique_ptr<DqnLearner> learner = *DqnLearner::Create(options);
  const TransitionBatch batch = PlayedBatch(mode, 8);
  const std::vector<float> weights(batch.size(), 1.0f);
  const std::vector<float> before = learner->online().GetParameters();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<TrainStepResult> r = learner->TrainStep(batch, weights);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(std::isfinite(r->loss));
    EXPECT_EQ(r->abs_td_errors.size(), batch.size());
  }
  const std::vector<float> after = learner->online().GetParameters();
  ASSERT_EQ(before.size(), after.size());
  EXPECT_NE(before, after);
  // The first layer (a convolution's weights) learned too: gradients reach it.
  EXPECT_NE(std::vector<float>(before.begin(), before.begin() + 64),
            std::vector<float>(after.begin(), after.begin() + 64));
}

TEST(ConvNetworksTest, MinAtarNetworkTrainsForwardAndBackward) {
  ExpectTrainingStepsChangeTheNetwork(ObservationMode::kNative);
}

TEST(ConvNetworksTest, NatureNetworkTrainsForwardAndBackward) {
  ExpectTrainingStepsChangeTheNetwork(ObservationMode::kPixels84);
}

TEST(ConvNetworksTest, ParametersRoundTripThroughTheParamsFormatAndActorsRunTheSameNet) {
  for (ObservationMode mode : {ObservationMode::kNative, ObservationMode::kPixels84}) {
    const EnvironmentSpec spec = SpecOf("MinAtar/Breakout", mode);
    std::unique_ptr<QNetwork> learner = NetworkFor(spec, 11);
    std::unique_ptr<QNetwork> actor = NetworkFor(spec, 12);
    std::vector<uint8_t> buffer(learner->SerializedSize());
    ASSERT_TRUE(learner->Serialize(42, absl::MakeSpan(buffer)).ok());
    absl::StatusOr<uint64_t> version = actor->Load(buffer);
    ASSERT_TRUE(version.ok()) << version.status();
    EXPECT_EQ(*version, 42u);
    EXPECT_EQ(actor->GetParameters(), learner->GetParameters());
    const TransitionBatch batch = PlayedBatch(mode, 2);
    std::vector<float> q_learner(2 * 6), q_actor(2 * 6);
    ASSERT_TRUE(learner->QValues(batch.observations(), absl::MakeSpan(q_learner)).ok());
    ASSERT_TRUE(actor->QValues(batch.observations(), absl::MakeSpan(q_actor)).ok());
    EXPECT_EQ(q_learner, q_actor);
  }
  // Another architecture's parameters are refused.
  std::unique_ptr<QNetwork> grid =
      NetworkFor(SpecOf("MinAtar/Breakout", ObservationMode::kNative), 1);
  std::unique_ptr<QNetwork> mlp = NetworkFor(SpecOf("CartPole-v1", ObservationMode::kNative), 1);
  std::vector<uint8_t> buffer(grid->SerializedSize());
  ASSERT_TRUE(grid->Serialize(1, absl::MakeSpan(buffer)).ok());
  EXPECT_EQ(mlp->Load(buffer).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dreplay::rl
