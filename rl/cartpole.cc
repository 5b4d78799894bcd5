// Copyright dreplay authors.
//
// Every expression below keeps the reference's operation order (Python
// evaluates left to right), and the file is compiled without floating-point
// contraction, so that results match the reference to the last bit.

#include "rl/cartpole.h"

#include <cmath>

#include "rl/python_math.h"

namespace dreplay::rl {
namespace {

constexpr int kStateSize = 4;
constexpr int kActionCount = 2;
constexpr double kPi = 3.141592653589793;  // Python's math.pi

}  // namespace

CartPole::CartPole()
    : Environment(EnvironmentSpec{kName, /*observation_size=*/kStateSize, kActionCount, kStateSize,
                                  kMaxEpisodeSteps}),
      total_mass_(kMassPole + kMassCart),
      polemass_length_(kMassPole * kLength),
      theta_threshold_radians_(12 * 2 * kPi / 360) {}

void CartPole::SampleInitialState(Random& random, absl::Span<double> state) const {
  for (double& value : state) value = random.Uniform(kResetLow, kResetHigh);
}

Environment::Outcome CartPole::Advance(int action, absl::Span<double> state) const {
  double x = state[0];
  double x_dot = state[1];
  double theta = state[2];
  double theta_dot = state[3];
  const double force = action == 1 ? kForceMag : -kForceMag;
  const double costheta = std::cos(theta);
  const double sintheta = std::sin(theta);

  const double temp = (force + polemass_length_ * PythonSquare(theta_dot) * sintheta) / total_mass_;
  const double thetaacc =
      (kGravity * sintheta - costheta * temp) /
      (kLength * (4.0 / 3.0 - kMassPole * PythonSquare(costheta) / total_mass_));
  const double xacc = temp - polemass_length_ * thetaacc * costheta / total_mass_;

  // kinematics_integrator == "euler"
  x = x + kTau * x_dot;
  x_dot = x_dot + kTau * xacc;
  theta = theta + kTau * theta_dot;
  theta_dot = theta_dot + kTau * thetaacc;

  state[0] = x;
  state[1] = x_dot;
  state[2] = theta;
  state[3] = theta_dot;

  Outcome outcome;
  outcome.terminated = x < -kXThreshold || x > kXThreshold || theta < -theta_threshold_radians_ ||
                       theta > theta_threshold_radians_;
  // The reference gives 1 for every step, the terminating one included (and
  // 0 only for steps after termination, which Step() refuses).
  outcome.reward = 1.0;
  return outcome;
}

void CartPole::Observe(absl::Span<const double> state, absl::Span<float> observation) const {
  for (int i = 0; i < kStateSize; ++i) {
    observation[i] = static_cast<float>(state[i]);
  }
}

}  // namespace dreplay::rl
