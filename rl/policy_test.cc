// Copyright dreplay authors.

#include "rl/policy.h"

#include <cmath>

#include "gtest/gtest.h"
#include "rl/cartpole.h"

namespace dreplay::rl {
namespace {

TEST(PolicyTest, ArgMaxPicksTheLowestIndexAmongEquals) {
  EXPECT_EQ(ArgMax({1.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(ArgMax({5.0f, 5.0f, 1.0f}), 0);
  EXPECT_EQ(ArgMax({-2.0f}), 0);
}

TEST(PolicyTest, EpsilonGreedyIsGreedyAtZeroAndUniformAtOne) {
  Random random(1);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(EpsilonGreedy({0.0f, 1.0f, 0.5f}, 0.0, random), 1);
  }
  int counts[3] = {0, 0, 0};
  constexpr int kDraws = 30000;
  for (int i = 0; i < kDraws; ++i) {
    ++counts[EpsilonGreedy({0.0f, 1.0f, 0.5f}, 1.0, random)];
  }
  for (int count : counts) EXPECT_NEAR(count, kDraws / 3, 600);
}

TEST(PolicyTest, ApeXEpsilonLaddersFromBaseToBaseToTheOnePlusAlpha) {
  EXPECT_DOUBLE_EQ(ApeXEpsilon(0, 1), 0.4);
  EXPECT_DOUBLE_EQ(ApeXEpsilon(0, 8), 0.4);
  EXPECT_DOUBLE_EQ(ApeXEpsilon(7, 8), std::pow(0.4, 8.0));
  EXPECT_DOUBLE_EQ(ApeXEpsilon(1, 3), std::pow(0.4, 4.5));
  EXPECT_GT(ApeXEpsilon(2, 8), ApeXEpsilon(3, 8));
}

TEST(PolicyTest, EvaluatesWholeEpisodesFromConsecutiveSeeds) {
  CartPole env;
  // Always pushing right topples the pole within a few dozen steps.
  absl::StatusOr<EvaluationResult> result = EvaluatePolicy(
      env, [](absl::Span<const float>) -> absl::StatusOr<int> { return 1; }, 3, 10);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->returns.size(), 3u);
  double sum = 0;
  for (int i = 0; i < 3; ++i) {
    // Replaying episode i by hand gives the same return.
    CartPole replay;
    replay.Reset(10 + i);
    double total = 0;
    bool done = false;
    while (!done) {
      absl::StatusOr<StepResult> step = replay.Step(1);
      ASSERT_TRUE(step.ok());
      total += step->reward;
      done = step->done();
    }
    EXPECT_EQ(result->returns[i], total);
    EXPECT_LT(total, 100);
    sum += total;
  }
  EXPECT_DOUBLE_EQ(result->mean_return, sum / 3);
}

TEST(PolicyTest, EvaluationStopsAtThePolicysError) {
  CartPole env;
  absl::StatusOr<EvaluationResult> result = EvaluatePolicy(
      env,
      [](absl::Span<const float>) -> absl::StatusOr<int> {
        return absl::InternalError("no network");
      },
      1, 0);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(EvaluatePolicy(env, nullptr, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dreplay::rl
