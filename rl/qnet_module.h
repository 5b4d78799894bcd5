// Copyright dreplay authors.
//
// qnet_module.h: the libtorch side of QNetwork, for the code in rl/ that
// trains it. Includes torch headers: only rl/ may include this file.

#ifndef DREPLAY_RL_QNET_MODULE_H_
#define DREPLAY_RL_QNET_MODULE_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <vector>

#include "rl/qnet.h"

namespace dreplay::rl {

class QNetwork::Module : public torch::nn::Module {
 public:
  // The torso and head `options` describe. REQUIRES: options.Validate().
  explicit Module(const QNetworkOptions& options);

  // [B, observation_size] -> [B, action_count]. Records gradients unless a
  // torch::NoGradGuard is active.
  torch::Tensor Forward(const torch::Tensor& observations);

 private:
  const QNetworkOptions options_;
  std::vector<torch::nn::Conv2d> convs_;
  std::vector<torch::nn::Linear> layers_;
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_QNET_MODULE_H_
