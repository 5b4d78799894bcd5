// Copyright dreplay authors.
//
// dqn_loss.h: the double-DQN target and the importance-weighted Huber loss,
// as tensor functions. Includes torch headers: only rl/ may include this file
// (code outside uses rl/dqn.h).
//
// For a batch of n-step transitions (B rows):
//
//   a*_i     = argmax_a Q_online(s'_i, a)
//   target_i = r_i + discount_i * Q_target(s'_i, a*_i) * (1 - done_i)
//   td_i     = target_i - Q_online(s_i, a_i)
//   loss     = mean_i( w_i * huber(td_i) )
//
// with discount_i = gamma^(steps_i) and huber(x) = x^2 / 2 for |x| <= delta,
// delta * (|x| - delta / 2) beyond. Plain DQN is the special case
// next_q_online == next_q_target (the argmax is then the max).

#ifndef DREPLAY_RL_DQN_LOSS_H_
#define DREPLAY_RL_DQN_LOSS_H_

#include <torch/types.h>

namespace dreplay::rl {

// Elementwise Huber function of `x` with threshold `delta` > 0.
torch::Tensor Huber(const torch::Tensor& x, double delta);

// The double-DQN targets [B] (no gradient flows through them).
// rewards, discounts, dones: [B] float; next_q_online, next_q_target: [B, A].
torch::Tensor DoubleDqnTargets(const torch::Tensor& rewards, const torch::Tensor& discounts,
                               const torch::Tensor& dones, const torch::Tensor& next_q_online,
                               const torch::Tensor& next_q_target);

struct DqnLossTerms {
  torch::Tensor loss;      // scalar, differentiable w.r.t. `q`
  torch::Tensor td_error;  // [B] target - Q(s, a), detached
};

// The weighted Huber loss of `q` ([B, A], online Q values of the observations)
// at `actions` ([B] int64) against `targets` ([B]), with importance-sampling
// `weights` ([B]).
DqnLossTerms WeightedHuberLoss(const torch::Tensor& q, const torch::Tensor& actions,
                               const torch::Tensor& targets, const torch::Tensor& weights,
                               double delta);

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_DQN_LOSS_H_
