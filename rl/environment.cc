// Copyright dreplay authors.

#include "rl/environment.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace dreplay::rl {
namespace {

// The generator's seed until the first Reset(seed).
constexpr uint64_t kDefaultSeed = 0;

}  // namespace

Environment::Environment(EnvironmentSpec spec) : spec_(std::move(spec)), random_(kDefaultSeed) {
  CHECK_GT(spec_.observation_size, 0) << spec_.name;
  CHECK_GT(spec_.action_count, 0) << spec_.name;
  CHECK_GT(spec_.state_size, 0) << spec_.name;
  CHECK_GT(spec_.max_episode_steps, 0) << spec_.name;
}

std::vector<float> Environment::Reset(uint64_t seed) {
  random_.Seed(seed);
  SeedOwnGenerator(seed);
  return Reset();
}

std::vector<float> Environment::Reset() {
  state_.assign(spec_.state_size, 0.0);
  SampleInitialState(random_, absl::MakeSpan(state_));
  elapsed_steps_ = 0;
  episode_active_ = true;
  return Observation();
}

absl::StatusOr<StepResult> Environment::Step(int action) {
  if (action < 0 || action >= spec_.action_count) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec_.name, ": action ", action, " is outside [0, ", spec_.action_count, ")"));
  }
  if (state_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(spec_.name, ": Step() before Reset() or SetState()"));
  }
  if (!episode_active_) {
    return absl::FailedPreconditionError(absl::StrCat(spec_.name,
                                                      ": Step() after the episode ended (at step ",
                                                      elapsed_steps_, "); call Reset()"));
  }
  const Outcome outcome = Advance(action, absl::MakeSpan(state_));
  ++elapsed_steps_;
  StepResult result;
  result.observation = Observation();
  result.reward = outcome.reward;
  result.terminated = outcome.terminated;
  // TimeLimit: truncated once the step count reaches the limit, whether or
  // not the step also terminated.
  result.truncated = elapsed_steps_ >= spec_.max_episode_steps;
  episode_active_ = !result.done();
  return result;
}

absl::Status Environment::SetState(absl::Span<const double> state) {
  if (!accepts_set_state()) {
    return absl::UnimplementedError(
        absl::StrCat(spec_.name, ": the state is not all in state(); SetState() cannot set it"));
  }
  if (static_cast<int>(state.size()) != spec_.state_size) {
    return absl::InvalidArgumentError(absl::StrCat(spec_.name, ": a state has ", spec_.state_size,
                                                   " values, got ", state.size()));
  }
  for (size_t i = 0; i < state.size(); ++i) {
    if (!std::isfinite(state[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec_.name, ": state value ", i, " is not finite: ", state[i]));
    }
  }
  state_.assign(state.begin(), state.end());
  elapsed_steps_ = 0;
  episode_active_ = true;
  return absl::OkStatus();
}

std::vector<float> Environment::Observation() const {
  CHECK(!state_.empty()) << spec_.name << ": no state yet";
  std::vector<float> observation(spec_.observation_size);
  Observe(state_, absl::MakeSpan(observation));
  return observation;
}

}  // namespace dreplay::rl
