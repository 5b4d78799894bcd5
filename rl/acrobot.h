// Copyright dreplay authors.
//
// acrobot.h: Acrobot-v1, the two-link underactuated pendulum of Sutton, with
// the dynamics of Gymnasium's `gymnasium/envs/classic_control/acrobot.py`:
// the "book" equations of motion (book_or_nips == "book"), one fourth-order
// Runge-Kutta step of dt = 0.2 s per action, angles wrapped to [-pi, pi] and
// velocities bounded, no torque noise; registration: TimeLimit of 500 steps.
//
// State: (theta1, theta2, dtheta1, dtheta2), float64. Observation (float32):
// (cos theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2).
// Actions: torque -1, 0, +1 on the joint between the links. Reward -1 per
// step, 0 on the step that reaches the goal height
// (-cos(theta1) - cos(theta2 + theta1) > 1), which terminates.
// Reset: each state value uniform in [-0.1, 0.1), then rounded to float32, as
// the reference's `.astype(np.float32)` does.
//
// sin and cos come from the C library. The reference calls NumPy's float64
// ufuncs, which use the C library on most builds; a NumPy build that
// dispatches them to its own SIMD kernels may differ in the last bit.

#ifndef DREPLAY_RL_ACROBOT_H_
#define DREPLAY_RL_ACROBOT_H_

#include <array>

#include "rl/environment.h"

namespace dreplay::rl {

class Acrobot : public Environment {
 public:
  static constexpr char kName[] = "Acrobot-v1";
  static constexpr int kMaxEpisodeSteps = 500;

  // The reference's constants, with its names.
  static constexpr double kDt = 0.2;
  static constexpr double kLinkLength1 = 1.0;
  static constexpr double kLinkMass1 = 1.0;
  static constexpr double kLinkMass2 = 1.0;
  static constexpr double kLinkComPos1 = 0.5;
  static constexpr double kLinkComPos2 = 0.5;
  static constexpr double kLinkMoi = 1.0;
  static constexpr double kGravity = 9.8;
  static constexpr double kPi = 3.141592653589793;  // numpy.pi
  static constexpr double kMaxVel1 = 4 * kPi;
  static constexpr double kMaxVel2 = 9 * kPi;
  static constexpr std::array<double, 3> kAvailableTorque = {-1.0, 0.0, 1.0};
  static constexpr double kResetLow = -0.1;
  static constexpr double kResetHigh = 0.1;

  Acrobot();

  // The reference's helper functions, exposed for tests.
  // wrap(x, m, M): shifts x by (M - m) until m <= x <= M.
  static double Wrap(double x, double m, double M);
  // bound(x, m, M): min(max(x, m), M).
  static double Bound(double x, double m, double M);

  // The augmented state (theta1, theta2, dtheta1, dtheta2, torque) that the
  // reference integrates, and its time derivative (_dsdt).
  using Augmented = std::array<double, 5>;
  static Augmented Derivatives(const Augmented& s);

 protected:
  void SampleInitialState(Random& random, absl::Span<double> state) const override;
  Outcome Advance(int action, absl::Span<double> state) const override;
  void Observe(absl::Span<const double> state, absl::Span<float> observation) const override;
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_ACROBOT_H_
