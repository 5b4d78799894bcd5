// Copyright dreplay authors.
//
// mountain_car.h: MountainCar-v0, Moore's under-powered car in a valley, with
// the dynamics of Gymnasium's `gymnasium/envs/classic_control/mountain_car.py`
// (goal_velocity = 0) and its registration: TimeLimit of 200 steps.
//
// State: (position, velocity), float64. Observation: the state cast to
// float32. Actions: 0 accelerates left, 1 not at all, 2 right. Reward -1 for
// every step, the terminating one included. Terminates when position >= 0.5
// and velocity >= 0. Reset: position uniform in [-0.6, -0.4), velocity 0.

#ifndef DREPLAY_RL_MOUNTAIN_CAR_H_
#define DREPLAY_RL_MOUNTAIN_CAR_H_

#include "rl/environment.h"

namespace dreplay::rl {

class MountainCar : public Environment {
 public:
  static constexpr char kName[] = "MountainCar-v0";
  static constexpr int kMaxEpisodeSteps = 200;

  // The reference's constants, with its names.
  static constexpr double kMinPosition = -1.2;
  static constexpr double kMaxPosition = 0.6;
  static constexpr double kMaxSpeed = 0.07;
  static constexpr double kGoalPosition = 0.5;
  static constexpr double kGoalVelocity = 0.0;
  static constexpr double kForce = 0.001;
  static constexpr double kGravity = 0.0025;
  static constexpr double kResetLow = -0.6;
  static constexpr double kResetHigh = -0.4;

  MountainCar();

 protected:
  void SampleInitialState(Random& random, absl::Span<double> state) const override;
  Outcome Advance(int action, absl::Span<double> state) const override;
  void Observe(absl::Span<const double> state, absl::Span<float> observation) const override;
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_MOUNTAIN_CAR_H_
