// Copyright dreplay authors.
//
// environment.h: MinAtar's `Environment` wrapper (v1.0.15
// `minatar/environment.py`) around the five games, with sticky actions,
// difficulty ramping, and NumPy's seeding reproduced exactly.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<minatar::Environment> env,
//                    minatar::Environment::Create("MinAtar/Breakout", {}));
//   env->Seed(3);        // Environment('breakout').seed(3)
//   env->Reset();        // .reset()
//   ASSIGN_OR_RETURN(minatar::Outcome step, env->Act(minatar::kRight));
//   std::vector<uint8_t> state = env->State();  // .state(), 10x10xC
//
// Semantics, as in the reference:
//  - One LegacyRandomState serves the sticky actions and the game. Act()
//    first draws rand() and, if it is below sticky_action_prob, repeats the
//    previous action instead of `action`; then the game draws what it draws.
//    The draw happens on every Act(), even after a terminal frame.
//  - The previous action starts at 0 (no-op) and is not cleared by Reset().
//  - Reset() restarts the game without re-seeding: episodes continue the
//    generator's stream.
//  - Freeway's time limit is the game's own terminal (freeway.h).
// Where we choose: a generator that is never seeded acts as if seeded with
// 0 (the reference seeds it from the operating system).
//
// Thread safety: none; one Environment per thread.

#ifndef DREPLAY_RL_MINATAR_ENVIRONMENT_H_
#define DREPLAY_RL_MINATAR_ENVIRONMENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "rl/minatar/game.h"
#include "rl/minatar/numpy_random.h"

namespace dreplay::rl::minatar {

struct Options {
  // The probability that Act() repeats the previous action. In [0, 1].
  double sticky_action_prob = 0.1;
  // Whether Asterix, Seaquest and Space Invaders speed up as they go (the
  // other two games never do).
  bool difficulty_ramping = true;

  // INVALID_ARGUMENT naming the bad field.
  absl::Status Validate() const;
};

class Environment {
 public:
  // The names Create() accepts, sorted: "MinAtar/Asterix", "MinAtar/Breakout",
  // "MinAtar/Freeway", "MinAtar/Seaquest", "MinAtar/SpaceInvaders".
  static std::vector<std::string> Names();

  // A new environment, seeded with 0 and reset. NOT_FOUND for an unknown
  // name (the message lists the known ones); INVALID_ARGUMENT for bad
  // options.
  static absl::StatusOr<std::unique_ptr<Environment>> Create(absl::string_view name,
                                                             const Options& options);

  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  const std::string& name() const { return name_; }
  const Options& options() const { return options_; }

  // `seed(seed)`: a fresh generator for the sticky actions and the game. The
  // game is not reset. Seeds above LegacyRandomState::kMaxSeed are rejected
  // by NumPy; callers validate them (uint32_t here).
  void Seed(uint32_t seed) { random_.Seed(seed); }

  // `reset()`: starts an episode, continuing the generator's stream.
  void Reset() { game_->Reset(); }

  // `act(action)`. INVALID_ARGUMENT for an action outside [0, 6).
  absl::StatusOr<Outcome> Act(int action);

  // `state()`: 10x10xC bytes, 0 or 1, in C order.
  std::vector<uint8_t> State() const;
  // The same into `state`. REQUIRES: state.size() == state_size().
  void WriteState(absl::Span<uint8_t> state) const { game_->WriteState(state); }

  int channels() const { return game_->channels(); }
  int state_size() const { return kGridSize * kGridSize * channels(); }
  int num_actions() const { return kActionCount; }
  std::vector<int> minimal_action_set() const { return game_->minimal_action_set(); }

 private:
  Environment(std::string name, const Options& options);

  const std::string name_;
  const Options options_;
  LegacyRandomState random_;
  std::unique_ptr<Game> game_;  // uses random_
  int last_action_ = kNoop;
};

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_ENVIRONMENT_H_
