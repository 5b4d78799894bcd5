// Copyright dreplay authors.
//
// environment.h: the interface of dreplay's reinforcement learning
// environments, and the base class that implements the episode bookkeeping
// every environment shares.
//
// The environments reproduce the Gymnasium classic-control references as
// created by `gymnasium.make(name)`: the dynamics of the unwrapped
// environment, plus the TimeLimit wrapper (truncation after
// `max_episode_steps` steps) and the order enforcement (no step before a
// reset). State is float64; observations are float32, cast where the reference
// casts.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Environment> env,
//                    MakeEnvironment("CartPole-v1"));
//   std::vector<float> obs = env->Reset(/*seed=*/7);
//   while (true) {
//     ASSIGN_OR_RETURN(StepResult step, env->Step(action));
//     if (step.done()) break;
//   }
//
// MinAtar's games (rl/minatar_games.h) also fit this interface: they
// keep their own state and NumPy generator, reached through the two hooks
// below (SeedOwnGenerator, accepts_set_state).
//
// Differences from the reference, on purpose:
//  - Seeded resets of the classic-control environments draw from the same
//    distributions with dreplay's own generator (rl/random.h), not NumPy's
//    bit stream.
//  - Step() after the end of an episode (terminated or truncated) is an error
//    (FAILED_PRECONDITION) instead of "undefined behaviour" with a warning.
//
// Thread safety: an Environment is not thread-safe; use one per thread.

#ifndef DREPLAY_RL_ENVIRONMENT_H_
#define DREPLAY_RL_ENVIRONMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "protocol/transition_encoding.h"
#include "rl/random.h"

namespace dreplay::rl {

// How an observation's values are arranged; it picks the Q-network
// (rl/qnet.h's NetworkOptionsFor).
enum class ObservationLayout {
  kVector,     // a flat vector (classic control)
  kGrid10x10,  // MinAtar's 10x10xC grid in (row, column, channel) order
  kPixels84,   // C stacked 84x84 frames in (frame, row, column) order
};

// What an environment looks like from outside. Constant for its lifetime.
struct EnvironmentSpec {
  std::string name;           // e.g. "CartPole-v1"
  int observation_size = 0;   // values in an observation (as floats)
  int action_count = 0;       // actions are 0 .. action_count - 1
  int state_size = 0;         // doubles in the full-precision state
  int max_episode_steps = 0;  // the TimeLimit: truncated at this many steps
  ObservationLayout observation_layout = ObservationLayout::kVector;
  // C of a grid or frame stack; 0 for a vector.
  int observation_channels = 0;
  // How a transition's observations are encoded: f32, or u8 when every value
  // is a whole number in [0, 255] (MinAtar's grids and frames).
  protocol::ObservationType observation_type = protocol::ObservationType::kFloat32;
};

// The outcome of one Step().
struct StepResult {
  std::vector<float> observation;  // after the step
  double reward = 0.0;
  bool terminated = false;  // reached a terminal state (do not bootstrap)
  bool truncated = false;   // cut by the time limit (bootstrap)
  // Both can be true at once: a terminal state reached on the last allowed
  // step, as the reference's TimeLimit reports it.
  bool done() const { return terminated || truncated; }
};

class Environment {
 public:
  virtual ~Environment() = default;
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  const EnvironmentSpec& spec() const { return spec_; }

  // Seeds the environment's generator with `seed` and starts an episode from
  // a random initial state. Returns the first observation.
  std::vector<float> Reset(uint64_t seed);

  // Starts an episode, continuing the generator's stream (the generator is
  // seeded with 0 at construction). Returns the first observation.
  std::vector<float> Reset();

  // Takes one step with `action`. Errors: INVALID_ARGUMENT for an action
  // outside [0, action_count); FAILED_PRECONDITION before the first Reset()
  // or SetState(), or after the episode has ended.
  absl::StatusOr<StepResult> Step(int action);

  // Starts an episode from the given full-precision state (for tracing and
  // tests): the elapsed step count restarts at 0. INVALID_ARGUMENT if the size
  // is not spec().state_size or a value is not finite; UNIMPLEMENTED for an
  // environment whose state is not all in state() (MinAtar).
  absl::Status SetState(absl::Span<const double> state);

  // The full-precision state. Empty before the first Reset() or SetState().
  absl::Span<const double> state() const { return state_; }

  // The observation of the current state. REQUIRES: a state is set.
  std::vector<float> Observation() const;

  // Steps taken in the current episode.
  int elapsed_steps() const { return elapsed_steps_; }

  // True between a Reset()/SetState() and the step that ends the episode.
  bool episode_active() const { return episode_active_; }

 protected:
  explicit Environment(EnvironmentSpec spec);

  // Writes a random initial state into `state` (spec().state_size values).
  virtual void SampleInitialState(Random& random, absl::Span<double> state) const = 0;

  // What one step of the dynamics yields besides the new state.
  struct Outcome {
    double reward = 0.0;
    bool terminated = false;
  };

  // Applies the dynamics of `action` (already range-checked) to `state` in
  // place.
  virtual Outcome Advance(int action, absl::Span<double> state) const = 0;

  // Writes the observation of `state` (spec().observation_size values).
  virtual void Observe(absl::Span<const double> state, absl::Span<float> observation) const = 0;

  // Called by Reset(seed) after the shared generator is seeded, for an
  // environment with a generator of its own to seed. Default: nothing.
  virtual void SeedOwnGenerator(uint64_t seed) {}

  // False for an environment with state outside state(): SetState() then
  // fails. Default: true.
  virtual bool accepts_set_state() const { return true; }

 private:
  const EnvironmentSpec spec_;
  Random random_;
  std::vector<double> state_;
  int elapsed_steps_ = 0;
  bool episode_active_ = false;
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_ENVIRONMENT_H_
