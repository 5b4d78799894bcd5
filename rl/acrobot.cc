// Copyright dreplay authors.
//
// Every expression below keeps the reference's operation order (Python
// evaluates left to right; NumPy array arithmetic is element by element), and
// the file is compiled without floating-point contraction, so that results
// match the reference to the last bit.

#include "rl/acrobot.h"

#include <algorithm>
#include <cmath>

#include "rl/python_math.h"

namespace dreplay::rl {
namespace {

constexpr int kStateSize = 4;
constexpr int kObservationSize = 6;
constexpr int kActionCount = 3;

}  // namespace

Acrobot::Acrobot()
    : Environment(
          EnvironmentSpec{kName, kObservationSize, kActionCount, kStateSize, kMaxEpisodeSteps}) {}

double Acrobot::Wrap(double x, double m, double M) {
  const double diff = M - m;
  while (x > M) x = x - diff;
  while (x < m) x = x + diff;
  return x;
}

double Acrobot::Bound(double x, double m, double M) {
  // Python's max(x, m) keeps x unless m > x; min(v, M) keeps v unless M < v.
  return std::min(std::max(x, m), M);
}

Acrobot::Augmented Acrobot::Derivatives(const Augmented& s) {
  const double m1 = kLinkMass1;
  const double m2 = kLinkMass2;
  const double l1 = kLinkLength1;
  const double lc1 = kLinkComPos1;
  const double lc2 = kLinkComPos2;
  const double I1 = kLinkMoi;
  const double I2 = kLinkMoi;
  const double g = kGravity;
  const double a = s[4];
  const double theta1 = s[0];
  const double theta2 = s[1];
  const double dtheta1 = s[2];
  const double dtheta2 = s[3];
  const double d1 = m1 * PythonSquare(lc1) +
                    m2 * (PythonSquare(l1) + PythonSquare(lc2) + 2 * l1 * lc2 * std::cos(theta2)) +
                    I1 + I2;
  const double d2 = m2 * (PythonSquare(lc2) + l1 * lc2 * std::cos(theta2)) + I2;
  const double phi2 = m2 * lc2 * g * std::cos(theta1 + theta2 - kPi / 2.0);
  const double phi1 = -m2 * l1 * lc2 * PythonSquare(dtheta2) * std::sin(theta2) -
                      2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                      (m1 * lc1 + m2 * l1) * g * std::cos(theta1 - kPi / 2) + phi2;
  // book_or_nips == "book": the equations of the book and the Java
  // implementation.
  const double ddtheta2 =
      (a + d2 / d1 * phi1 - m2 * l1 * lc2 * PythonSquare(dtheta1) * std::sin(theta2) - phi2) /
      (m2 * PythonSquare(lc2) + I2 - PythonSquare(d2) / d1);
  const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  return {dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0};
}

void Acrobot::SampleInitialState(Random& random, absl::Span<double> state) const {
  for (double& value : state) {
    value = static_cast<float>(random.Uniform(kResetLow, kResetHigh));
  }
}

Environment::Outcome Acrobot::Advance(int action, absl::Span<double> state) const {
  const double torque = kAvailableTorque[action];
  const Augmented y0 = {state[0], state[1], state[2], state[3], torque};

  // rk4(self._dsdt, s_augmented, [0, self.dt]): one step from t = 0 to dt.
  const double dt = kDt - 0;
  const double dt2 = dt / 2.0;
  Augmented y;
  const Augmented k1 = Derivatives(y0);
  for (int i = 0; i < 5; ++i) y[i] = y0[i] + dt2 * k1[i];
  const Augmented k2 = Derivatives(y);
  for (int i = 0; i < 5; ++i) y[i] = y0[i] + dt2 * k2[i];
  const Augmented k3 = Derivatives(y);
  for (int i = 0; i < 5; ++i) y[i] = y0[i] + dt * k3[i];
  const Augmented k4 = Derivatives(y);
  const double step = dt / 6.0;
  double ns[kStateSize];
  for (int i = 0; i < kStateSize; ++i) {
    ns[i] = y0[i] + step * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
  }

  state[0] = Wrap(ns[0], -kPi, kPi);
  state[1] = Wrap(ns[1], -kPi, kPi);
  state[2] = Bound(ns[2], -kMaxVel1, kMaxVel1);
  state[3] = Bound(ns[3], -kMaxVel2, kMaxVel2);

  Outcome outcome;
  outcome.terminated = -std::cos(state[0]) - std::cos(state[1] + state[0]) > 1.0;
  outcome.reward = outcome.terminated ? 0.0 : -1.0;
  return outcome;
}

void Acrobot::Observe(absl::Span<const double> state, absl::Span<float> observation) const {
  observation[0] = static_cast<float>(std::cos(state[0]));
  observation[1] = static_cast<float>(std::sin(state[0]));
  observation[2] = static_cast<float>(std::cos(state[1]));
  observation[3] = static_cast<float>(std::sin(state[1]));
  observation[4] = static_cast<float>(state[2]);
  observation[5] = static_cast<float>(state[3]);
}

}  // namespace dreplay::rl
