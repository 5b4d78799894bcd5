// Copyright dreplay authors.
//
// nstep.h: turns an episode's stream of steps into n-step transitions.
//
// After each step, the accumulator emits the transition of the step n steps
// back, with the discounted sum of the n rewards since and the bootstrap
// discount gamma^n. When the episode ends it flushes every pending step:
//  - terminated: done = true (no bootstrap: the terminal state has value 0);
//  - truncated by the time limit: done = false (the target bootstraps from
//    the last observation), with discount gamma^k for the k steps that
//    remained.
//
//   NStepAccumulator acc(options, env.spec().observation_size);
//   RETURN_IF_ERROR(acc.BeginEpisode(env.Reset()));
//   ... ASSIGN_OR_RETURN(StepResult step, env.Step(action));
//   RETURN_IF_ERROR(acc.AddStep(action, step.reward, step.observation,
//                               step.terminated, step.truncated, &out));
//
// Thread safety: none; one accumulator per actor thread.

#ifndef DREPLAY_RL_NSTEP_H_
#define DREPLAY_RL_NSTEP_H_

#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "rl/transition.h"

namespace dreplay::rl {

struct NStepOptions {
  // Steps per transition, 1..kMaxTransitionSteps. Default: Ape-X's 3.
  int n = 3;
  // gamma, in [0, 1].
  double discount = 0.99;

  // INVALID_ARGUMENT naming the first bad value.
  absl::Status Validate() const;
};

// An n-step return, accumulated oldest reward first: reward is the sum of
// gamma^i r_i, discount gamma^k after k rewards (the factor owed to the
// bootstrap value). The one definition of that arithmetic, so that every
// producer of n-step transitions gives the same floats.
struct NStepReturn {
  double reward = 0.0;
  double discount = 1.0;
  void Add(double r, double gamma) {
    reward += discount * r;
    discount *= gamma;
  }
};

class NStepAccumulator {
 public:
  // REQUIRES: options.Validate().ok() and observation_size > 0 (checked).
  NStepAccumulator(const NStepOptions& options, size_t observation_size);

  // Starts an episode at `observation` (the reset observation). Steps still
  // pending from an episode that did not end are dropped. INVALID_ARGUMENT
  // if the observation has the wrong size.
  absl::Status BeginEpisode(absl::Span<const float> observation);

  // Records one step: `action`, taken at the current observation, gave
  // `reward` and led to `next_observation`; `terminated` and `truncated` are
  // the environment's. Appends the transitions this completes to `*out`
  // (none, one, or all pending ones at the end of the episode).
  // FAILED_PRECONDITION outside an episode (before BeginEpisode(), or after
  // the step that ended it); INVALID_ARGUMENT for a wrong observation size or
  // a negative action.
  absl::Status AddStep(int action, double reward, absl::Span<const float> next_observation,
                       bool terminated, bool truncated, std::vector<Transition>* out);

  // True between BeginEpisode() and the step that ends the episode.
  bool in_episode() const { return in_episode_; }

  // Steps recorded but not yet emitted (at most n - 1 between calls).
  size_t pending() const { return pending_.size(); }

  const NStepOptions& options() const { return options_; }

 private:
  struct PendingStep {
    std::vector<float> observation;
    int action;
    double reward;
  };

  // Emits the transition of the oldest pending step, bootstrapping from the
  // current observation, and drops that step.
  void EmitOldest(bool done, std::vector<Transition>* out);

  const NStepOptions options_;
  const size_t observation_size_;
  std::deque<PendingStep> pending_;
  std::vector<float> current_observation_;
  bool in_episode_ = false;
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_NSTEP_H_
