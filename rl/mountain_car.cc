// Copyright dreplay authors.
//
// Every expression below keeps the reference's operation order, and the file
// is compiled without floating-point contraction, so that results match the
// reference to the last bit.

#include "rl/mountain_car.h"

#include <algorithm>
#include <cmath>

namespace dreplay::rl {
namespace {

constexpr int kStateSize = 2;
constexpr int kActionCount = 3;

// np.clip(x, low, high) on a scalar: minimum(maximum(x, low), high).
double Clip(double x, double low, double high) { return std::min(std::max(x, low), high); }

}  // namespace

MountainCar::MountainCar()
    : Environment(EnvironmentSpec{kName, /*observation_size=*/kStateSize, kActionCount, kStateSize,
                                  kMaxEpisodeSteps}) {}

void MountainCar::SampleInitialState(Random& random, absl::Span<double> state) const {
  state[0] = random.Uniform(kResetLow, kResetHigh);
  state[1] = 0.0;
}

Environment::Outcome MountainCar::Advance(int action, absl::Span<double> state) const {
  double position = state[0];
  double velocity = state[1];
  velocity += (action - 1) * kForce + std::cos(3 * position) * (-kGravity);
  velocity = Clip(velocity, -kMaxSpeed, kMaxSpeed);
  position += velocity;
  position = Clip(position, kMinPosition, kMaxPosition);
  if (position == kMinPosition && velocity < 0) velocity = 0;

  state[0] = position;
  state[1] = velocity;

  Outcome outcome;
  outcome.terminated = position >= kGoalPosition && velocity >= kGoalVelocity;
  outcome.reward = -1.0;
  return outcome;
}

void MountainCar::Observe(absl::Span<const double> state, absl::Span<float> observation) const {
  observation[0] = static_cast<float>(state[0]);
  observation[1] = static_cast<float>(state[1]);
}

}  // namespace dreplay::rl
