// Copyright dreplay authors.
//
// minatar_games.h: MinAtar's five games (rl/minatar/, bit for bit
// with MinAtar v1.0.15) behind the Environment interface, so that every
// binary can create them by name:
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Environment> env,
//                    MakeEnvironment("MinAtar/Breakout"));
//   std::vector<float> obs = env->Reset(/*seed=*/7);  // 10x10x4 floats
//
// Names: MinAtar/Asterix, MinAtar/Breakout, MinAtar/Freeway,
// MinAtar/Seaquest, MinAtar/SpaceInvaders.
//
// How MinAtar maps onto the interface:
//  - Observation, native (ObservationMode::kNative): the 10x10xC boolean
//    state as floats (0 or 1), in C order (row, column, channel): 400 to
//    1000 values. pixels84 (kPixels84): the last 4 frames rendered to 84x84
//    grays (rl/minatar/render.h), oldest first, as floats 0..255: 28,224
//    values. Either way every value is a whole byte, so transitions encode
//    them as u8 (spec().observation_type). state() holds the 10x10xC grid as
//    doubles; the game's hidden state (timers, directions, its generator) is
//    not in it, so SetState() fails with UNIMPLEMENTED.
//  - Actions: all six (the reference's full action set); the game's minimal
//    action set is minimal_action_set().
//  - Reset(seed) is the reference's `reset(seed=...)` (its gym wrapper):
//    seed(seed), then reset(), with the seed's low 32 bits (NumPy accepts
//    seeds below 2**32 only). Reset() continues the generator's stream.
//  - Step(a) is `act(a)`: sticky actions with probability 0.1 and
//    difficulty ramping, MinAtar's defaults, drawn from the game's one
//    generator.
//  - Freeway ends itself, as terminated, on the 2,501st frame of an episode.
//    The reference has no other time limit; we truncate an episode at
//    kMaxEpisodeSteps frames (spec().max_episode_steps), a safety cap so
//    that a greedy evaluation of a near-perfect player still ends. Nothing
//    short of 100,000 frames of play is truncated.
//
// Thread safety: none; one environment per thread.

#ifndef DREPLAY_RL_MINATAR_GAMES_H_
#define DREPLAY_RL_MINATAR_GAMES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rl/environment.h"
#include "rl/minatar/environment.h"
#include "rl/minatar/render.h"

namespace dreplay::rl {

// What a MinAtar environment observes: the native grid or 84x84 frames.
enum class ObservationMode { kNative, kPixels84 };

// "native" or "pixels84".
const char* ObservationModeName(ObservationMode mode);

// The mode named "native" or "pixels84"; INVALID_ARGUMENT naming `name` and
// the choices otherwise.
absl::StatusOr<ObservationMode> ParseObservationMode(absl::string_view name);

class MinAtar final : public Environment {
 public:
  static constexpr int kMaxEpisodeSteps = 100000;

  // The names Create() accepts, sorted.
  static std::vector<std::string> Names() { return minatar::Environment::Names(); }

  // NOT_FOUND for a name not in Names(); INVALID_ARGUMENT for bad options.
  static absl::StatusOr<std::unique_ptr<MinAtar>> Create(
      absl::string_view name, const minatar::Options& options = {},
      ObservationMode mode = ObservationMode::kNative);

  // The game's minimal action set (a subset of 0..5).
  std::vector<int> minimal_action_set() const { return game_->minimal_action_set(); }
  // The number of channels C of the observation.
  int channels() const { return game_->channels(); }

 protected:
  // The game's state lives in game_, which the const hooks below advance:
  // state() only mirrors its observable part.
  void SampleInitialState(Random& random, absl::Span<double> state) const override;
  Outcome Advance(int action, absl::Span<double> state) const override;
  void Observe(absl::Span<const double> state, absl::Span<float> observation) const override;
  void SeedOwnGenerator(uint64_t seed) override;
  bool accepts_set_state() const override { return false; }

 private:
  MinAtar(EnvironmentSpec spec, std::unique_ptr<minatar::Environment> game, ObservationMode mode);

  // Writes the game's state into `state` as doubles; with pixels84 also
  // renders it, starting the frame stack anew when `reset`.
  void CopyState(absl::Span<double> state, bool reset) const;

  const std::unique_ptr<minatar::Environment> game_;
  const ObservationMode mode_;
  // pixels84 only: the frame stack and a render buffer, advanced by the
  // const hooks as game_ is.
  mutable minatar::FrameStack frames_;
  mutable std::vector<uint8_t> image_;
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_MINATAR_GAMES_H_
