// Copyright dreplay authors.

#include "rl/nstep.h"

#include <vector>

#include "gtest/gtest.h"

namespace dreplay::rl {
namespace {

constexpr double kGamma = 0.5;  // powers of 1/2 are exact in float

// Observation i of a one-float-per-step episode: {i}.
std::vector<float> Obs(int i) { return {static_cast<float>(i)}; }

NStepAccumulator MakeAccumulator(int n) {
  NStepOptions options;
  options.n = n;
  options.discount = kGamma;
  return NStepAccumulator(options, /*observation_size=*/1);
}

// Steps t = 0, 1, ... with action t % 2 and reward t + 1.
absl::Status Step(NStepAccumulator& acc, int t, bool terminated, bool truncated,
                  std::vector<Transition>* out) {
  return acc.AddStep(t % 2, t + 1.0, Obs(t + 1), terminated, truncated, out);
}

TEST(NStepOptionsTest, ValidateNamesTheBadValue) {
  NStepOptions options;
  EXPECT_TRUE(options.Validate().ok());
  options.n = 0;
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
  options.n = 256;
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
  options.n = 3;
  options.discount = 1.5;
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NStepAccumulatorTest, EmitsOneTransitionPerStepOnceNStepsArePending) {
  NStepAccumulator acc = MakeAccumulator(3);
  ASSERT_TRUE(acc.BeginEpisode(Obs(0)).ok());
  std::vector<Transition> out;
  ASSERT_TRUE(Step(acc, 0, false, false, &out).ok());
  ASSERT_TRUE(Step(acc, 1, false, false, &out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(acc.pending(), 2u);
  ASSERT_TRUE(Step(acc, 2, false, false, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  // From s0 with a0: r = 1 + 0.5 * 2 + 0.25 * 3, bootstrap from s3.
  EXPECT_EQ(out[0].observation, Obs(0));
  EXPECT_EQ(out[0].action, 0);
  EXPECT_EQ(out[0].reward, 1.0f + 0.5f * 2.0f + 0.25f * 3.0f);
  EXPECT_EQ(out[0].discount, 0.125f);
  EXPECT_EQ(out[0].steps, 3);
  EXPECT_FALSE(out[0].done);
  EXPECT_EQ(out[0].next_observation, Obs(3));
  ASSERT_TRUE(Step(acc, 3, false, false, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].observation, Obs(1));
  EXPECT_EQ(out[1].action, 1);
  EXPECT_EQ(out[1].reward, 2.0f + 0.5f * 3.0f + 0.25f * 4.0f);
  EXPECT_EQ(out[1].next_observation, Obs(4));
}

TEST(NStepAccumulatorTest, TerminationFlushesEveryStepWithoutBootstrap) {
  NStepAccumulator acc = MakeAccumulator(3);
  ASSERT_TRUE(acc.BeginEpisode(Obs(0)).ok());
  std::vector<Transition> out;
  for (int t = 0; t < 3; ++t) ASSERT_TRUE(Step(acc, t, false, false, &out).ok());
  out.clear();
  // Step 3 terminates: transitions from s1 (3 steps), s2 (2), s3 (1).
  ASSERT_TRUE(Step(acc, 3, /*terminated=*/true, false, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].observation, Obs(1));
  EXPECT_EQ(out[0].reward, 2.0f + 0.5f * 3.0f + 0.25f * 4.0f);
  EXPECT_EQ(out[0].steps, 3);
  EXPECT_EQ(out[1].observation, Obs(2));
  EXPECT_EQ(out[1].reward, 3.0f + 0.5f * 4.0f);
  EXPECT_EQ(out[1].steps, 2);
  EXPECT_EQ(out[1].discount, 0.25f);
  EXPECT_EQ(out[2].observation, Obs(3));
  EXPECT_EQ(out[2].reward, 4.0f);
  EXPECT_EQ(out[2].steps, 1);
  EXPECT_EQ(out[2].discount, 0.5f);
  for (const Transition& t : out) {
    EXPECT_TRUE(t.done);
    EXPECT_EQ(t.next_observation, Obs(4));
  }
  EXPECT_FALSE(acc.in_episode());
  EXPECT_EQ(acc.pending(), 0u);
}

TEST(NStepAccumulatorTest, TruncationFlushesEveryStepWithBootstrap) {
  NStepAccumulator acc = MakeAccumulator(3);
  ASSERT_TRUE(acc.BeginEpisode(Obs(0)).ok());
  std::vector<Transition> out;
  ASSERT_TRUE(Step(acc, 0, false, false, &out).ok());
  ASSERT_TRUE(Step(acc, 1, false, /*truncated=*/true, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].observation, Obs(0));
  EXPECT_EQ(out[0].reward, 1.0f + 0.5f * 2.0f);
  EXPECT_EQ(out[0].discount, 0.25f);
  EXPECT_EQ(out[0].steps, 2);
  EXPECT_EQ(out[1].observation, Obs(1));
  EXPECT_EQ(out[1].reward, 2.0f);
  EXPECT_EQ(out[1].discount, 0.5f);
  for (const Transition& t : out) {
    EXPECT_FALSE(t.done);
    EXPECT_EQ(t.next_observation, Obs(2));
  }
}

TEST(NStepAccumulatorTest, TerminationOnTheLastAllowedStepDoesNotBootstrap) {
  NStepAccumulator acc = MakeAccumulator(2);
  ASSERT_TRUE(acc.BeginEpisode(Obs(0)).ok());
  std::vector<Transition> out;
  ASSERT_TRUE(Step(acc, 0, /*terminated=*/true, /*truncated=*/true, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].done);
}

TEST(NStepAccumulatorTest, OneStepTransitionsAreEmittedImmediately) {
  NStepAccumulator acc = MakeAccumulator(1);
  ASSERT_TRUE(acc.BeginEpisode(Obs(0)).ok());
  std::vector<Transition> out;
  ASSERT_TRUE(Step(acc, 0, false, false, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].reward, 1.0f);
  EXPECT_EQ(out[0].discount, 0.5f);
  EXPECT_EQ(out[0].next_observation, Obs(1));
  EXPECT_EQ(acc.pending(), 0u);
}

TEST(NStepAccumulatorTest, ANewEpisodeDropsStepsOfAnUnfinishedOne) {
  NStepAccumulator acc = MakeAccumulator(3);
  ASSERT_TRUE(acc.BeginEpisode(Obs(0)).ok());
  std::vector<Transition> out;
  ASSERT_TRUE(Step(acc, 0, false, false, &out).ok());
  ASSERT_TRUE(acc.BeginEpisode(Obs(10)).ok());
  EXPECT_EQ(acc.pending(), 0u);
  ASSERT_TRUE(acc.AddStep(1, 5.0, Obs(11), true, false, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].observation, Obs(10));
  EXPECT_EQ(out[0].reward, 5.0f);
}

TEST(NStepAccumulatorTest, RejectsStepsOutsideAnEpisodeAndBadSizes) {
  NStepAccumulator acc = MakeAccumulator(3);
  std::vector<Transition> out;
  EXPECT_EQ(Step(acc, 0, false, false, &out).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(acc.BeginEpisode({1.0f, 2.0f}).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(acc.BeginEpisode(Obs(0)).ok());
  EXPECT_EQ(acc.AddStep(0, 1.0, {1.0f, 2.0f}, false, false, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(acc.AddStep(-1, 1.0, Obs(1), false, false, &out).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Step(acc, 0, true, false, &out).ok());
  EXPECT_EQ(Step(acc, 1, false, false, &out).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dreplay::rl
