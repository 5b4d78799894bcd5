// Copyright dreplay authors.
//
// cartpole.h: CartPole-v1, the cart-pole balancing task of Barto, Sutton and
// Anderson, with the dynamics of Gymnasium's
// `gymnasium/envs/classic_control/cartpole.py` (explicit Euler integration,
// tau = 0.02 s) and its registration: TimeLimit of 500 steps.
//
// State: (x, x_dot, theta, theta_dot), float64. Observation: the state cast
// to float32. Actions: 0 pushes the cart left, 1 right (force 10 N). Reward 1
// for every step, including the terminating one. Terminates when |x| > 2.4 or
// |theta| > 12 degrees. Reset: each state value uniform in [-0.05, 0.05).

#ifndef DREPLAY_RL_CARTPOLE_H_
#define DREPLAY_RL_CARTPOLE_H_

#include "rl/environment.h"

namespace dreplay::rl {

class CartPole : public Environment {
 public:
  static constexpr char kName[] = "CartPole-v1";
  static constexpr int kMaxEpisodeSteps = 500;

  // The reference's constants, with its names.
  static constexpr double kGravity = 9.8;
  static constexpr double kMassCart = 1.0;
  static constexpr double kMassPole = 0.1;
  static constexpr double kLength = 0.5;  // half the pole's length
  static constexpr double kForceMag = 10.0;
  static constexpr double kTau = 0.02;  // seconds between state updates
  static constexpr double kXThreshold = 2.4;
  static constexpr double kResetLow = -0.05;
  static constexpr double kResetHigh = 0.05;

  CartPole();

 protected:
  void SampleInitialState(Random& random, absl::Span<double> state) const override;
  Outcome Advance(int action, absl::Span<double> state) const override;
  void Observe(absl::Span<const double> state, absl::Span<float> observation) const override;

 private:
  // Derived constants, computed as the reference computes them.
  const double total_mass_;
  const double polemass_length_;
  const double theta_threshold_radians_;
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_CARTPOLE_H_
