// Copyright dreplay authors.

#include "rl/policy.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::rl {

int ArgMax(absl::Span<const float> values) {
  CHECK(!values.empty());
  int best = 0;
  for (int i = 1; i < static_cast<int>(values.size()); ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

int EpsilonGreedy(absl::Span<const float> q_values, double epsilon, Random& random) {
  CHECK(!q_values.empty());
  if (random.Bernoulli(epsilon)) {
    return static_cast<int>(random.UniformInt(q_values.size()));
  }
  return ArgMax(q_values);
}

double ApeXEpsilon(int actor_index, int actor_count, double base, double alpha) {
  CHECK_GE(actor_index, 0);
  CHECK_LT(actor_index, actor_count);
  if (actor_count == 1) return base;
  return std::pow(base, 1.0 + alpha * actor_index / (actor_count - 1));
}

absl::StatusOr<EvaluationResult> EvaluatePolicy(Environment& env, const Policy& policy,
                                                int episodes, uint64_t seed) {
  if (episodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("evaluation needs at least 1 episode, got ", episodes));
  }
  EvaluationResult result;
  for (int episode = 0; episode < episodes; ++episode) {
    std::vector<float> observation = env.Reset(seed + episode);
    double total = 0.0;
    bool done = false;
    while (!done) {
      ASSIGN_OR_RETURN(const int action, policy(observation));
      ASSIGN_OR_RETURN(StepResult step, env.Step(action));
      total += step.reward;
      done = step.done();
      observation = std::move(step.observation);
    }
    result.returns.push_back(total);
    result.mean_return += total / episodes;
  }
  return result;
}

}  // namespace dreplay::rl
