// Copyright dreplay authors.
//
// MountainCar-v0 against the reference's equations. ReferenceStep() below is a
// separate transcription of `MountainCarEnv.step` from Gymnasium's
// mountain_car.py; this file is compiled like the environment (no
// contraction), so the two must agree to the last bit. The literal values were
// computed by the same equations in Python.

#include "rl/mountain_car.h"

#include <array>
#include <cmath>

#include "gtest/gtest.h"

namespace dreplay::rl {
namespace {

using State = std::array<double, 2>;

struct ReferenceResult {
  State state;
  bool terminated;
};

ReferenceResult ReferenceStep(const State& s, int action) {
  const double force = 0.001, gravity = 0.0025, max_speed = 0.07;
  const double min_position = -1.2, max_position = 0.6, goal_position = 0.5;
  double position = s[0], velocity = s[1];
  velocity += (action - 1) * force + std::cos(3 * position) * (-gravity);
  velocity = std::fmin(std::fmax(velocity, -max_speed), max_speed);
  position += velocity;
  position = std::fmin(std::fmax(position, min_position), max_position);
  if (position == min_position && velocity < 0) velocity = 0;
  return {{position, velocity}, position >= goal_position && velocity >= 0};
}

void ExpectStateIs(const Environment& env, const State& expected) {
  ASSERT_EQ(env.state().size(), 2u);
  EXPECT_EQ(env.state()[0], expected[0]) << "position";
  EXPECT_EQ(env.state()[1], expected[1]) << "velocity";
}

TEST(MountainCarTest, SpecMatchesTheRegistration) {
  MountainCar env;
  EXPECT_EQ(env.spec().name, "MountainCar-v0");
  EXPECT_EQ(env.spec().observation_size, 2);
  EXPECT_EQ(env.spec().action_count, 3);
  EXPECT_EQ(env.spec().state_size, 2);
  EXPECT_EQ(env.spec().max_episode_steps, 200);
}

TEST(MountainCarTest, StepsFollowTheReferenceEquationsBitForBit) {
  MountainCar env;
  State s = {-0.5, 0.0};
  ASSERT_TRUE(env.SetState(s).ok());
  for (int action : {2, 2, 0, 1, 0, 0, 2, 1, 2, 0}) {
    const ReferenceResult expected = ReferenceStep(s, action);
    absl::StatusOr<StepResult> step = env.Step(action);
    ASSERT_TRUE(step.ok()) << step.status();
    ExpectStateIs(env, expected.state);
    EXPECT_EQ(step->observation[0], static_cast<float>(expected.state[0]));
    EXPECT_EQ(step->observation[1], static_cast<float>(expected.state[1]));
    EXPECT_EQ(step->reward, -1.0);
    EXPECT_EQ(step->terminated, expected.terminated);
    s = expected.state;
  }
}

TEST(MountainCarTest, StepsMatchValuesComputedInPython) {
  MountainCar env;
  ASSERT_TRUE(env.SetState({-0.5, 0.0}).ok());
  const State expected[] = {
      {-0.49917684300416926, 0.0008231569958307428},
      {-0.49753668667935325, 0.0016401563248160246},
      {-0.4970917969323474, 0.00044488974700586273},
      {-0.49684550006784745, 0.0002462968644999427},
  };
  const int actions[] = {2, 2, 0, 1};
  for (int t = 0; t < 4; ++t) {
    ASSERT_TRUE(env.Step(actions[t]).ok());
    ExpectStateIs(env, expected[t]);
  }
}

TEST(MountainCarTest, LeftWallStopsTheCar) {
  MountainCar env;
  ASSERT_TRUE(env.SetState({-1.19, -0.05}).ok());
  ASSERT_TRUE(env.Step(0).ok());
  ExpectStateIs(env, {-1.2, 0.0});
  ASSERT_TRUE(env.Step(0).ok());
  ExpectStateIs(env, {-1.1987581039591646, 0.0012418960408353682});
}

TEST(MountainCarTest, VelocityIsClippedToMaxSpeed) {
  MountainCar env;
  // 0.0699 + 0.001 - cos(-1.8) * 0.0025 > 0.07.
  ASSERT_TRUE(env.SetState({-0.6, 0.0699}).ok());
  ASSERT_TRUE(env.Step(2).ok());
  EXPECT_EQ(env.state()[1], 0.07);
  EXPECT_EQ(env.state()[0], -0.6 + 0.07);
}

TEST(MountainCarTest, TerminatesAtTheGoalWithRewardMinusOne) {
  MountainCar env;
  ASSERT_TRUE(env.SetState({0.49, 0.02}).ok());
  absl::StatusOr<StepResult> step = env.Step(2);
  ASSERT_TRUE(step.ok());
  EXPECT_TRUE(step->terminated);
  EXPECT_FALSE(step->truncated);
  EXPECT_EQ(step->reward, -1.0);
}

TEST(MountainCarTest, TruncatesAtTwoHundredSteps) {
  MountainCar env;
  ASSERT_TRUE(env.SetState({-0.5, 0.0}).ok());
  for (int t = 1; t <= 200; ++t) {
    absl::StatusOr<StepResult> step = env.Step(1);
    ASSERT_TRUE(step.ok()) << t;
    ASSERT_FALSE(step->terminated) << t;
    EXPECT_EQ(step->truncated, t == 200) << t;
  }
  EXPECT_EQ(env.Step(1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MountainCarTest, SeededResetIsReproducibleAndInRange) {
  MountainCar a;
  MountainCar b;
  EXPECT_EQ(a.Reset(5), b.Reset(5));
  EXPECT_NE(a.Reset(6), b.Reset(5));
  for (uint64_t seed = 0; seed < 200; ++seed) {
    a.Reset(seed);
    EXPECT_GE(a.state()[0], -0.6);
    EXPECT_LT(a.state()[0], -0.4);
    EXPECT_EQ(a.state()[1], 0.0);
  }
}

}  // namespace
}  // namespace dreplay::rl
