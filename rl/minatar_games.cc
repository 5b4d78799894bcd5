// Copyright dreplay authors.

#include "rl/minatar_games.h"

#include <utility>

#include "glog/logging.h"

namespace dreplay::rl {

absl::StatusOr<std::unique_ptr<MinAtar>> MinAtar::Create(absl::string_view name,
                                                         const minatar::Options& options) {
  absl::StatusOr<std::unique_ptr<minatar::Environment>> game =
      minatar::Environment::Create(name, options);
  if (!game.ok()) return game.status();
  const int size = (*game)->state_size();
  EnvironmentSpec spec{std::string(name), /*observation_size=*/size,
                       /*action_count=*/(*game)->num_actions(), /*state_size=*/size,
                       /*max_episode_steps=*/kMaxEpisodeSteps};
  return std::unique_ptr<MinAtar>(new MinAtar(std::move(spec), *std::move(game)));
}

MinAtar::MinAtar(EnvironmentSpec spec, std::unique_ptr<minatar::Environment> game)
    : Environment(std::move(spec)), game_(std::move(game)) {}

void MinAtar::CopyState(absl::Span<double> state) const {
  const std::vector<uint8_t> bytes = game_->State();
  CHECK_EQ(bytes.size(), state.size());
  for (size_t i = 0; i < bytes.size(); ++i) state[i] = bytes[i];
}

void MinAtar::SeedOwnGenerator(uint64_t seed) { game_->Seed(static_cast<uint32_t>(seed)); }

void MinAtar::SampleInitialState(Random& /*random*/, absl::Span<double> state) const {
  game_->Reset();
  CopyState(state);
}

Environment::Outcome MinAtar::Advance(int action, absl::Span<double> state) const {
  const absl::StatusOr<minatar::Outcome> outcome = game_->Act(action);
  CHECK(outcome.ok()) << outcome.status();  // Step() range-checks actions
  CopyState(state);
  return Outcome{static_cast<double>(outcome->reward), outcome->terminal};
}

void MinAtar::Observe(absl::Span<const double> state, absl::Span<float> observation) const {
  for (size_t i = 0; i < state.size(); ++i) observation[i] = static_cast<float>(state[i]);
}

}  // namespace dreplay::rl
