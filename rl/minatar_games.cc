// Copyright dreplay authors.

#include "rl/minatar_games.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace dreplay::rl {

const char* ObservationModeName(ObservationMode mode) {
  return mode == ObservationMode::kPixels84 ? "pixels84" : "native";
}

absl::StatusOr<ObservationMode> ParseObservationMode(absl::string_view name) {
  if (name == "native") return ObservationMode::kNative;
  if (name == "pixels84") return ObservationMode::kPixels84;
  return absl::InvalidArgumentError(
      absl::StrCat("observation \"", name, "\" is not one of native, pixels84"));
}

absl::StatusOr<std::unique_ptr<MinAtar>> MinAtar::Create(absl::string_view name,
                                                         const minatar::Options& options,
                                                         ObservationMode mode) {
  absl::StatusOr<std::unique_ptr<minatar::Environment>> game =
      minatar::Environment::Create(name, options);
  if (!game.ok()) return game.status();
  const int size = (*game)->state_size();
  const bool pixels = mode == ObservationMode::kPixels84;
  EnvironmentSpec spec;
  spec.name = std::string(name);
  spec.observation_size = pixels ? minatar::kFrameStackDepth * minatar::kPixels84Size : size;
  spec.action_count = (*game)->num_actions();
  spec.state_size = size;
  spec.max_episode_steps = kMaxEpisodeSteps;
  spec.observation_layout = pixels ? ObservationLayout::kPixels84 : ObservationLayout::kGrid10x10;
  spec.observation_channels = pixels ? minatar::kFrameStackDepth : (*game)->channels();
  spec.observation_type = protocol::ObservationType::kUint8;
  return std::unique_ptr<MinAtar>(new MinAtar(std::move(spec), *std::move(game), mode));
}

MinAtar::MinAtar(EnvironmentSpec spec, std::unique_ptr<minatar::Environment> game,
                 ObservationMode mode)
    : Environment(std::move(spec)), game_(std::move(game)), mode_(mode) {
  if (mode_ == ObservationMode::kPixels84) image_.assign(minatar::kPixels84Size, 0);
}

void MinAtar::CopyState(absl::Span<double> state, bool reset) const {
  const std::vector<uint8_t> bytes = game_->State();
  CHECK_EQ(bytes.size(), state.size());
  for (size_t i = 0; i < bytes.size(); ++i) state[i] = bytes[i];
  if (mode_ != ObservationMode::kPixels84) return;
  minatar::RenderPixels84(bytes, game_->channels(), absl::MakeSpan(image_));
  if (reset) {
    frames_.Reset(image_);
  } else {
    frames_.Push(image_);
  }
}

void MinAtar::SeedOwnGenerator(uint64_t seed) { game_->Seed(static_cast<uint32_t>(seed)); }

void MinAtar::SampleInitialState(Random& /*random*/, absl::Span<double> state) const {
  game_->Reset();
  CopyState(state, /*reset=*/true);
}

Environment::Outcome MinAtar::Advance(int action, absl::Span<double> state) const {
  const absl::StatusOr<minatar::Outcome> outcome = game_->Act(action);
  CHECK(outcome.ok()) << outcome.status();  // Step() range-checks actions
  CopyState(state, /*reset=*/false);
  return Outcome{static_cast<double>(outcome->reward), outcome->terminal};
}

void MinAtar::Observe(absl::Span<const double> state, absl::Span<float> observation) const {
  if (mode_ == ObservationMode::kPixels84) {
    const absl::Span<const uint8_t> frames = frames_.frames();
    CHECK_EQ(frames.size(), observation.size());
    for (size_t i = 0; i < frames.size(); ++i) observation[i] = frames[i];
    return;
  }
  for (size_t i = 0; i < state.size(); ++i) observation[i] = static_cast<float>(state[i]);
}

}  // namespace dreplay::rl
