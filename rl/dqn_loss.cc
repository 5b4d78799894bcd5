// Copyright dreplay authors.

#include "rl/dqn_loss.h"

#include <torch/types.h>

namespace dreplay::rl {

torch::Tensor Huber(const torch::Tensor& x, double delta) {
  const torch::Tensor abs = x.abs();
  return torch::where(abs <= delta, 0.5 * x * x, delta * (abs - 0.5 * delta));
}

torch::Tensor DoubleDqnTargets(const torch::Tensor& rewards, const torch::Tensor& discounts,
                               const torch::Tensor& dones, const torch::Tensor& next_q_online,
                               const torch::Tensor& next_q_target) {
  torch::NoGradGuard no_grad;
  const torch::Tensor best_actions = next_q_online.argmax(1, /*keepdim=*/true);
  const torch::Tensor next_values = next_q_target.gather(1, best_actions).squeeze(1);
  return rewards + discounts * next_values * (1.0 - dones);
}

DqnLossTerms WeightedHuberLoss(const torch::Tensor& q, const torch::Tensor& actions,
                               const torch::Tensor& targets, const torch::Tensor& weights,
                               double delta) {
  const torch::Tensor q_taken = q.gather(1, actions.unsqueeze(1)).squeeze(1);
  const torch::Tensor td = targets.detach() - q_taken;
  DqnLossTerms terms;
  terms.loss = (weights * Huber(td, delta)).mean();
  terms.td_error = td.detach();
  return terms;
}

}  // namespace dreplay::rl
