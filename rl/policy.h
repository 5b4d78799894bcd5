// Copyright dreplay authors.
//
// policy.h: acting on Q values, torch-free: greedy and epsilon-greedy choice,
// the Ape-X ladder of per-actor epsilons, and the evaluation of a policy over
// whole episodes.
//
// Thread safety: the functions are thread-safe as long as each thread passes
// its own Random and Environment.

#ifndef DREPLAY_RL_POLICY_H_
#define DREPLAY_RL_POLICY_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rl/environment.h"
#include "rl/random.h"

namespace dreplay::rl {

// The index of the largest value, the lowest one among equals.
// REQUIRES: !values.empty().
int ArgMax(absl::Span<const float> values);

// With probability `epsilon` a uniformly random action, else ArgMax(q_values).
// REQUIRES: !q_values.empty().
int EpsilonGreedy(absl::Span<const float> q_values, double epsilon, Random& random);

// Ape-X's exploration ladder: actor i of N explores with
// base^(1 + alpha * i / (N - 1)) (base alone when N == 1). The defaults are
// the paper's (0.4, 7). REQUIRES: 0 <= actor_index < actor_count.
double ApeXEpsilon(int actor_index, int actor_count, double base = 0.4, double alpha = 7.0);

// A policy: observation -> action, or an error that stops the evaluation.
using Policy = std::function<absl::StatusOr<int>(absl::Span<const float>)>;

struct EvaluationResult {
  std::vector<double> returns;  // undiscounted return of each episode
  double mean_return = 0.0;
};

// Runs `episodes` whole episodes of `policy` on `env`, episode i starting
// from Reset(seed + i). Returns the first error of the policy or of a step.
// INVALID_ARGUMENT if episodes < 1.
absl::StatusOr<EvaluationResult> EvaluatePolicy(Environment& env, const Policy& policy,
                                                int episodes, uint64_t seed);

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_POLICY_H_
