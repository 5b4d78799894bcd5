// Copyright dreplay authors.
//
// CartPole-v1 against the reference's equations. ReferenceStep() below is a
// separate transcription of `CartPoleEnv.step` from Gymnasium's cartpole.py;
// this file is compiled like the environment (no contraction, pow() left to
// the C library), so the two must agree to the last bit. The literal values
// were computed by the same equations in Python.

#include "rl/cartpole.h"

#include <array>
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dreplay::rl {
namespace {

using State = std::array<double, 4>;

struct ReferenceResult {
  State state;
  bool terminated;
};

ReferenceResult ReferenceStep(const State& s, int action) {
  const double gravity = 9.8;
  const double masscart = 1.0;
  const double masspole = 0.1;
  const double total_mass = masspole + masscart;
  const double length = 0.5;
  const double polemass_length = masspole * length;
  const double force_mag = 10.0;
  const double tau = 0.02;
  const double theta_threshold_radians = 12 * 2 * M_PI / 360;
  const double x_threshold = 2.4;

  double x = s[0], x_dot = s[1], theta = s[2], theta_dot = s[3];
  const double force = action == 1 ? force_mag : -force_mag;
  const double costheta = std::cos(theta);
  const double sintheta = std::sin(theta);
  const double temp = (force + polemass_length * std::pow(theta_dot, 2.0) * sintheta) / total_mass;
  const double thetaacc = (gravity * sintheta - costheta * temp) /
                          (length * (4.0 / 3.0 - masspole * std::pow(costheta, 2.0) / total_mass));
  const double xacc = temp - polemass_length * thetaacc * costheta / total_mass;
  x = x + tau * x_dot;
  x_dot = x_dot + tau * xacc;
  theta = theta + tau * theta_dot;
  theta_dot = theta_dot + tau * thetaacc;
  const bool terminated = x < -x_threshold || x > x_threshold || theta < -theta_threshold_radians ||
                          theta > theta_threshold_radians;
  return {{x, x_dot, theta, theta_dot}, terminated};
}

void ExpectStateIs(const Environment& env, const State& expected) {
  ASSERT_EQ(env.state().size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(env.state()[i], expected[i]) << "state[" << i << "]";
  }
}

TEST(CartPoleTest, SpecMatchesTheRegistration) {
  CartPole env;
  EXPECT_EQ(env.spec().name, "CartPole-v1");
  EXPECT_EQ(env.spec().observation_size, 4);
  EXPECT_EQ(env.spec().action_count, 2);
  EXPECT_EQ(env.spec().state_size, 4);
  EXPECT_EQ(env.spec().max_episode_steps, 500);
}

TEST(CartPoleTest, StepsFollowTheReferenceEquationsBitForBit) {
  CartPole env;
  State s = {0.01, -0.02, 0.03, -0.04};
  ASSERT_TRUE(env.SetState(s).ok());
  for (int action : {1, 0, 0, 1, 1, 1, 0, 1, 0, 0}) {
    const ReferenceResult expected = ReferenceStep(s, action);
    absl::StatusOr<StepResult> step = env.Step(action);
    ASSERT_TRUE(step.ok()) << step.status();
    ExpectStateIs(env, expected.state);
    ASSERT_EQ(step->observation.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(step->observation[i], static_cast<float>(expected.state[i]));
    }
    EXPECT_EQ(step->reward, 1.0);
    EXPECT_EQ(step->terminated, expected.terminated);
    EXPECT_FALSE(step->truncated);
    s = expected.state;
  }
}

TEST(CartPoleTest, StepsMatchValuesComputedInPython) {
  CartPole env;
  ASSERT_TRUE(env.SetState({0.01, -0.02, 0.03, -0.04}).ok());
  const State expected[] = {
      {0.009600000000000001, 0.17467919574755525, 0.0292, -0.3230687179600081},
      {0.013093583914951107, -0.020846120233304483, 0.02273862564079984, -0.021322189539218106},
      {0.012676661510285018, -0.21628666139669434, 0.022312181850015475, 0.2784474166567325},
      {0.00835092828235113, -0.021490000379440544, 0.027881130183150124, -0.007115608467152645},
      {0.00792112827476232, 0.17322123092863484, 0.027738818013807072, -0.29087295230897875},
  };
  const int actions[] = {1, 0, 0, 1, 1};
  for (int t = 0; t < 5; ++t) {
    ASSERT_TRUE(env.Step(actions[t]).ok());
    ExpectStateIs(env, expected[t]);
  }
}

TEST(CartPoleTest, TerminatesWithRewardOneWhenThePoleFallsPastTwelveDegrees) {
  CartPole env;
  // theta + tau * theta_dot = 0.2094 + 0.02 > 12 degrees (0.20944 rad).
  ASSERT_TRUE(env.SetState({0.0, 0.0, 0.2094, 1.0}).ok());
  absl::StatusOr<StepResult> step = env.Step(1);
  ASSERT_TRUE(step.ok());
  EXPECT_TRUE(step->terminated);
  EXPECT_FALSE(step->truncated);
  EXPECT_EQ(step->reward, 1.0);
  EXPECT_FALSE(env.episode_active());
  EXPECT_EQ(env.Step(0).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CartPoleTest, TerminatesWhenTheCartLeavesTheTrack) {
  CartPole env;
  ASSERT_TRUE(env.SetState({-2.39, -1.0, 0.0, 0.0}).ok());
  absl::StatusOr<StepResult> step = env.Step(0);
  ASSERT_TRUE(step.ok());
  EXPECT_TRUE(step->terminated);
  EXPECT_LT(env.state()[0], -2.4);
}

TEST(CartPoleTest, TruncatesAtFiveHundredStepsWhenBalanced) {
  CartPole env;
  ASSERT_TRUE(env.SetState({0.01, -0.02, 0.03, -0.04}).ok());
  // A linear controller that keeps the pole up for the whole episode.
  auto controller = [](absl::Span<const double> s) {
    return s[2] + 0.5 * s[3] + 0.01 * s[0] + 0.1 * s[1] > 0 ? 1 : 0;
  };
  for (int t = 1; t <= 500; ++t) {
    absl::StatusOr<StepResult> step = env.Step(controller(env.state()));
    ASSERT_TRUE(step.ok()) << "step " << t << ": " << step.status();
    ASSERT_FALSE(step->terminated) << "step " << t;
    EXPECT_EQ(step->truncated, t == 500) << "step " << t;
    EXPECT_EQ(env.elapsed_steps(), t);
  }
  EXPECT_FALSE(env.episode_active());
}

TEST(CartPoleTest, SeededResetIsReproducibleAndInRange) {
  CartPole a;
  CartPole b;
  const std::vector<float> first = a.Reset(42);
  EXPECT_EQ(b.Reset(42), first);
  EXPECT_NE(b.Reset(43), first);
  // An unseeded reset continues the stream: a new state.
  EXPECT_NE(a.Reset(), first);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::vector<float> obs = a.Reset(seed);
    for (int i = 0; i < 4; ++i) {
      EXPECT_GE(a.state()[i], -0.05);
      EXPECT_LT(a.state()[i], 0.05);
      EXPECT_EQ(obs[i], static_cast<float>(a.state()[i]));
    }
    EXPECT_EQ(a.elapsed_steps(), 0);
    EXPECT_TRUE(a.episode_active());
  }
}

}  // namespace
}  // namespace dreplay::rl
