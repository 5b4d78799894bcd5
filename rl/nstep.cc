// Copyright dreplay authors.

#include "rl/nstep.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace dreplay::rl {

absl::Status NStepOptions::Validate() const {
  if (n < 1 || n > kMaxTransitionSteps) {
    return absl::InvalidArgumentError(
        absl::StrCat("n-step n=", n, " is outside [1, ", kMaxTransitionSteps, "]"));
  }
  if (!(discount >= 0.0 && discount <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("n-step discount=", discount, " is outside [0, 1]"));
  }
  return absl::OkStatus();
}

NStepAccumulator::NStepAccumulator(const NStepOptions& options, size_t observation_size)
    : options_(options), observation_size_(observation_size) {
  const absl::Status status = options_.Validate();
  CHECK(status.ok()) << status;
  CHECK_GT(observation_size_, 0u);
}

absl::Status NStepAccumulator::BeginEpisode(absl::Span<const float> observation) {
  if (observation.size() != observation_size_) {
    return absl::InvalidArgumentError(absl::StrCat("observation of ", observation.size(),
                                                   " floats, expected ", observation_size_));
  }
  pending_.clear();
  current_observation_.assign(observation.begin(), observation.end());
  in_episode_ = true;
  return absl::OkStatus();
}

absl::Status NStepAccumulator::AddStep(int action, double reward,
                                       absl::Span<const float> next_observation, bool terminated,
                                       bool truncated, std::vector<Transition>* out) {
  if (!in_episode_) {
    return absl::FailedPreconditionError("AddStep() outside an episode; call BeginEpisode()");
  }
  if (next_observation.size() != observation_size_) {
    return absl::InvalidArgumentError(absl::StrCat("next observation of ", next_observation.size(),
                                                   " floats, expected ", observation_size_));
  }
  if (action < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative action ", action));
  }
  pending_.push_back(PendingStep{std::move(current_observation_), action, reward});
  current_observation_.assign(next_observation.begin(), next_observation.end());
  if (terminated || truncated) {
    // A terminal state has no value to bootstrap from; a truncated episode
    // stopped in a state that still has one.
    while (!pending_.empty()) EmitOldest(/*done=*/terminated, out);
    in_episode_ = false;
  } else if (static_cast<int>(pending_.size()) == options_.n) {
    EmitOldest(/*done=*/false, out);
  }
  return absl::OkStatus();
}

void NStepAccumulator::EmitOldest(bool done, std::vector<Transition>* out) {
  CHECK(!pending_.empty());
  NStepReturn sum;
  for (const PendingStep& step : pending_) sum.Add(step.reward, options_.discount);
  Transition transition;
  transition.observation = std::move(pending_.front().observation);
  transition.action = pending_.front().action;
  transition.reward = static_cast<float>(sum.reward);
  transition.discount = static_cast<float>(sum.discount);  // gamma^steps
  transition.done = done;
  transition.steps = static_cast<uint8_t>(pending_.size());
  transition.next_observation = current_observation_;
  out->push_back(std::move(transition));
  pending_.pop_front();
}

}  // namespace dreplay::rl
