// Copyright dreplay authors.
//
// Acrobot-v1 against the reference's equations. The functions below are a
// separate transcription of `_dsdt` ("book" dynamics), `rk4`, `wrap` and
// `bound` from Gymnasium's acrobot.py; this file is compiled like the
// environment (no contraction, pow() left to the C library), so the two must
// agree to the last bit. The literal values were computed by the same
// equations in Python.

#include "rl/acrobot.h"

#include <array>
#include <cmath>

#include "gtest/gtest.h"

namespace dreplay::rl {
namespace {

using State = std::array<double, 4>;
using Augmented = std::array<double, 5>;

Augmented ReferenceDsdt(const Augmented& s) {
  const double m1 = 1.0, m2 = 1.0, l1 = 1.0, lc1 = 0.5, lc2 = 0.5;
  const double I1 = 1.0, I2 = 1.0, g = 9.8;
  const double a = s[4];
  const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
  const double d1 =
      m1 * std::pow(lc1, 2.0) +
      m2 * (std::pow(l1, 2.0) + std::pow(lc2, 2.0) + 2 * l1 * lc2 * std::cos(theta2)) + I1 + I2;
  const double d2 = m2 * (std::pow(lc2, 2.0) + l1 * lc2 * std::cos(theta2)) + I2;
  const double phi2 = m2 * lc2 * g * std::cos(theta1 + theta2 - M_PI / 2.0);
  const double phi1 = -m2 * l1 * lc2 * std::pow(dtheta2, 2.0) * std::sin(theta2) -
                      2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                      (m1 * lc1 + m2 * l1) * g * std::cos(theta1 - M_PI / 2) + phi2;
  const double ddtheta2 =
      (a + d2 / d1 * phi1 - m2 * l1 * lc2 * std::pow(dtheta1, 2.0) * std::sin(theta2) - phi2) /
      (m2 * std::pow(lc2, 2.0) + I2 - std::pow(d2, 2.0) / d1);
  const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  return {dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0};
}

double ReferenceWrap(double x, double m, double M) {
  const double diff = M - m;
  while (x > M) x = x - diff;
  while (x < m) x = x + diff;
  return x;
}

double ReferenceBound(double x, double m, double M) {
  double v = m > x ? m : x;  // Python's max(x, m)
  return M < v ? M : v;      // Python's min(v, M)
}

struct ReferenceResult {
  State state;
  bool terminated;
};

ReferenceResult ReferenceStep(const State& s, int action) {
  const double torques[] = {-1.0, 0.0, 1.0};
  const Augmented y0 = {s[0], s[1], s[2], s[3], torques[action]};
  const double dt = 0.2;
  const double dt2 = dt / 2.0;
  auto add = [](const Augmented& y, double h, const Augmented& k) {
    Augmented r;
    for (int i = 0; i < 5; ++i) r[i] = y[i] + h * k[i];
    return r;
  };
  const Augmented k1 = ReferenceDsdt(y0);
  const Augmented k2 = ReferenceDsdt(add(y0, dt2, k1));
  const Augmented k3 = ReferenceDsdt(add(y0, dt2, k2));
  const Augmented k4 = ReferenceDsdt(add(y0, dt, k3));
  Augmented ns;
  for (int i = 0; i < 5; ++i) {
    ns[i] = y0[i] + dt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
  }
  ReferenceResult r;
  r.state[0] = ReferenceWrap(ns[0], -M_PI, M_PI);
  r.state[1] = ReferenceWrap(ns[1], -M_PI, M_PI);
  r.state[2] = ReferenceBound(ns[2], -4 * M_PI, 4 * M_PI);
  r.state[3] = ReferenceBound(ns[3], -9 * M_PI, 9 * M_PI);
  r.terminated = -std::cos(r.state[0]) - std::cos(r.state[1] + r.state[0]) > 1.0;
  return r;
}

void ExpectStateIs(const Environment& env, const State& expected) {
  ASSERT_EQ(env.state().size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(env.state()[i], expected[i]) << "state[" << i << "]";
  }
}

TEST(AcrobotTest, SpecMatchesTheRegistration) {
  Acrobot env;
  EXPECT_EQ(env.spec().name, "Acrobot-v1");
  EXPECT_EQ(env.spec().observation_size, 6);
  EXPECT_EQ(env.spec().action_count, 3);
  EXPECT_EQ(env.spec().state_size, 4);
  EXPECT_EQ(env.spec().max_episode_steps, 500);
}

TEST(AcrobotTest, DerivativesFollowTheBookEquations) {
  for (const Augmented& s :
       {Augmented{0.3, -1.2, 2.5, -4.0, 1.0}, Augmented{-2.0, 0.7, -0.1, 8.0, -1.0},
        Augmented{0.0, 0.0, 0.0, 0.0, 0.0}}) {
    const Augmented expected = ReferenceDsdt(s);
    const Augmented actual = Acrobot::Derivatives(s);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(actual[i], expected[i]) << i;
  }
}

TEST(AcrobotTest, StepsFollowTheReferenceRungeKuttaBitForBit) {
  Acrobot env;
  State s = {0.05, -0.03, 0.02, 0.01};
  ASSERT_TRUE(env.SetState(s).ok());
  for (int action : {2, 0, 1, 2, 2, 2, 0, 0, 2, 1}) {
    const ReferenceResult expected = ReferenceStep(s, action);
    absl::StatusOr<StepResult> step = env.Step(action);
    ASSERT_TRUE(step.ok()) << step.status();
    ExpectStateIs(env, expected.state);
    const State& n = expected.state;
    const float obs[] = {static_cast<float>(std::cos(n[0])), static_cast<float>(std::sin(n[0])),
                         static_cast<float>(std::cos(n[1])), static_cast<float>(std::sin(n[1])),
                         static_cast<float>(n[2]),           static_cast<float>(n[3])};
    ASSERT_EQ(step->observation.size(), 6u);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(step->observation[i], obs[i]) << i;
    EXPECT_EQ(step->terminated, expected.terminated);
    EXPECT_EQ(step->reward, expected.terminated ? 0.0 : -1.0);
    s = expected.state;
  }
}

TEST(AcrobotTest, StepsMatchValuesComputedInPython) {
  Acrobot env;
  ASSERT_TRUE(env.SetState({0.05, -0.03, 0.02, 0.01}).ok());
  const State expected[] = {
      {0.03396426807716706, 0.014028356136744108, -0.175464650251537, 0.4197156022652691},
      {0.010256406751987378, 0.061304367014462395, -0.05558414607650376, 0.0417371113112644},
      {-0.00046751124082028417, 0.06363968562706548, -0.04942649940703602, -0.02038908705444733},
      {-0.021993874432321085, 0.08705041228195731, -0.16056045828258655, 0.2467706123313871},
  };
  const int actions[] = {2, 0, 1, 2};
  for (int t = 0; t < 4; ++t) {
    absl::StatusOr<StepResult> step = env.Step(actions[t]);
    ASSERT_TRUE(step.ok());
    ExpectStateIs(env, expected[t]);
    EXPECT_EQ(step->reward, -1.0);
  }
}

TEST(AcrobotTest, WrapShiftsAnglesIntoRangeAndBoundClips) {
  EXPECT_EQ(Acrobot::Wrap(4.0, -M_PI, M_PI), 4.0 - 2 * M_PI);
  EXPECT_EQ(Acrobot::Wrap(-7.0, -M_PI, M_PI), -7.0 + 2 * M_PI);
  EXPECT_EQ(Acrobot::Wrap(20.0, -M_PI, M_PI), 20.0 - 2 * M_PI - 2 * M_PI - 2 * M_PI);
  EXPECT_EQ(Acrobot::Wrap(M_PI, -M_PI, M_PI), M_PI);
  EXPECT_EQ(Acrobot::Bound(50.0, -4 * M_PI, 4 * M_PI), 4 * M_PI);
  EXPECT_EQ(Acrobot::Bound(-50.0, -9 * M_PI, 9 * M_PI), -9 * M_PI);
  EXPECT_EQ(Acrobot::Bound(1.5, -4 * M_PI, 4 * M_PI), 1.5);
}

TEST(AcrobotTest, VelocitiesAreBoundedAfterAStep) {
  Acrobot env;
  ASSERT_TRUE(env.SetState({0.0, 0.0, 30.0, -60.0}).ok());
  ASSERT_TRUE(env.Step(1).ok());
  const ReferenceResult expected = ReferenceStep({0.0, 0.0, 30.0, -60.0}, 1);
  ExpectStateIs(env, expected.state);
  EXPECT_LE(std::abs(env.state()[2]), 4 * M_PI);
  EXPECT_LE(std::abs(env.state()[3]), 9 * M_PI);
}

TEST(AcrobotTest, TerminatesWithRewardZeroWhenTheTipIsAboveTheLine) {
  Acrobot env;
  // Both links pointing up: -cos(pi) - cos(pi) = 2 > 1.
  ASSERT_TRUE(env.SetState({M_PI - 0.01, 0.0, 0.0, 0.0}).ok());
  absl::StatusOr<StepResult> step = env.Step(1);
  ASSERT_TRUE(step.ok());
  EXPECT_TRUE(step->terminated);
  EXPECT_FALSE(step->truncated);
  EXPECT_EQ(step->reward, 0.0);
}

TEST(AcrobotTest, TruncatesAtFiveHundredStepsWithoutTorque) {
  Acrobot env;
  ASSERT_TRUE(env.SetState({0.0, 0.0, 0.0, 0.0}).ok());
  for (int t = 1; t <= 500; ++t) {
    absl::StatusOr<StepResult> step = env.Step(1);
    ASSERT_TRUE(step.ok()) << t;
    ASSERT_FALSE(step->terminated) << t;
    EXPECT_EQ(step->reward, -1.0);
    EXPECT_EQ(step->truncated, t == 500) << t;
  }
  EXPECT_EQ(env.Step(1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AcrobotTest, SeededResetIsReproducibleFloat32AndInRange) {
  Acrobot a;
  Acrobot b;
  const std::vector<float> first = a.Reset(9);
  EXPECT_EQ(b.Reset(9), first);
  EXPECT_NE(b.Reset(10), first);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::vector<float> obs = a.Reset(seed);
    ASSERT_EQ(obs.size(), 6u);
    for (int i = 0; i < 4; ++i) {
      const double v = a.state()[i];
      EXPECT_GE(v, -0.1);
      EXPECT_LE(v, 0.1);  // float32 rounding may reach the bound itself
      EXPECT_EQ(v, static_cast<double>(static_cast<float>(v)));
    }
    EXPECT_EQ(obs[0], static_cast<float>(std::cos(a.state()[0])));
    EXPECT_EQ(obs[3], static_cast<float>(std::sin(a.state()[1])));
    EXPECT_EQ(obs[5], static_cast<float>(a.state()[3]));
  }
}

}  // namespace
}  // namespace dreplay::rl
