// Copyright dreplay authors.

#include "rl/dqn.h"

// torch/types.h first (its own block, so that sorting keeps it first):
// clip_grad.h does not include what it uses.
#include <torch/types.h>

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/optim/rmsprop.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "rl/dqn_loss.h"
#include "rl/qnet_module.h"

namespace dreplay::rl {
namespace {

// Tensors viewing a TransitionBatch's arrays; valid while the batch is
// unchanged, and only read.
struct BatchTensors {
  torch::Tensor observations;       // [B, O]
  torch::Tensor actions;            // [B] int64
  torch::Tensor rewards;            // [B]
  torch::Tensor discounts;          // [B]
  torch::Tensor dones;              // [B]
  torch::Tensor next_observations;  // [B, O]
};

template <typename T>
torch::Tensor View(const std::vector<T>& values, torch::IntArrayRef sizes, torch::Dtype dtype) {
  return torch::from_blob(const_cast<T*>(values.data()), sizes,
                          torch::TensorOptions().dtype(dtype));
}

BatchTensors ViewBatch(const TransitionBatch& batch) {
  const int64_t b = batch.size();
  const int64_t o = batch.observation_size();
  BatchTensors t;
  t.observations = View(batch.observations(), {b, o}, torch::kFloat32);
  t.actions = View(batch.actions(), {b}, torch::kInt64);
  t.rewards = View(batch.rewards(), {b}, torch::kFloat32);
  t.discounts = View(batch.discounts(), {b}, torch::kFloat32);
  t.dones = View(batch.dones(), {b}, torch::kFloat32);
  t.next_observations = View(batch.next_observations(), {b, o}, torch::kFloat32);
  return t;
}

absl::Status CheckBatch(const QNetwork& network, const TransitionBatch& batch) {
  if (batch.size() == 0) {
    return absl::InvalidArgumentError("empty transition batch");
  }
  if (batch.observation_size() != static_cast<size_t>(network.options().observation_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch has observations of ", batch.observation_size(),
                     " floats, network expects ", network.options().observation_size));
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t action = batch.actions()[i];
    if (action < 0 || action >= network.options().action_count) {
      return absl::InvalidArgumentError(absl::StrCat("batch row ", i, " has action ", action,
                                                     ", network has ",
                                                     network.options().action_count));
    }
  }
  return absl::OkStatus();
}

// The (double) DQN targets of a batch, without gradient.
torch::Tensor Targets(const QNetwork& online, const QNetwork& target, const BatchTensors& t,
                      bool double_dqn) {
  torch::NoGradGuard no_grad;
  const torch::Tensor next_q_target = target.module().Forward(t.next_observations);
  const torch::Tensor next_q_online =
      double_dqn ? online.module().Forward(t.next_observations) : next_q_target;
  return DoubleDqnTargets(t.rewards, t.discounts, t.dones, next_q_online, next_q_target);
}

void CopyAbs(const torch::Tensor& td_error, absl::Span<float> out) {
  const torch::Tensor abs = td_error.abs().contiguous();
  CHECK_EQ(static_cast<size_t>(abs.numel()), out.size());
  std::memcpy(out.data(), abs.data_ptr<float>(), out.size() * sizeof(float));
}

}  // namespace

absl::Status DqnOptions::Validate() const {
  RETURN_IF_ERROR(network.Validate());
  if (!(learning_rate > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DQN learning_rate must be > 0, got ", learning_rate));
  }
  if (!(adam_epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DQN adam_epsilon must be > 0, got ", adam_epsilon));
  }
  if (!(rmsprop_alpha >= 0 && rmsprop_alpha < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DQN rmsprop_alpha must be in [0, 1), got ", rmsprop_alpha));
  }
  if (!(rmsprop_epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DQN rmsprop_epsilon must be > 0, got ", rmsprop_epsilon));
  }
  if (!(huber_delta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DQN huber_delta must be > 0, got ", huber_delta));
  }
  if (target_update_period < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DQN target_update_period must be >= 1, got ", target_update_period));
  }
  if (!(max_gradient_norm >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DQN max_gradient_norm must be >= 0, got ", max_gradient_norm));
  }
  if (torch_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DQN torch_threads must be >= 1, got ", torch_threads));
  }
  return absl::OkStatus();
}

DqnOptions MinAtarDqnOptions() {
  DqnOptions options;
  options.optimizer = DqnOptimizer::kRmsprop;
  options.learning_rate = 0.00025;
  options.rmsprop_alpha = 0.95;
  options.rmsprop_epsilon = 0.01;
  options.rmsprop_centered = true;
  options.target_update_period = 1000;
  return options;
}

class DqnLearner::Optimizer {
 public:
  Optimizer(const DqnOptions& options, QNetwork& network) {
    if (options.optimizer == DqnOptimizer::kRmsprop) {
      optimizer = std::make_unique<torch::optim::RMSprop>(
          network.module().parameters(), torch::optim::RMSpropOptions(options.learning_rate)
                                             .alpha(options.rmsprop_alpha)
                                             .eps(options.rmsprop_epsilon)
                                             .centered(options.rmsprop_centered));
    } else {
      optimizer = std::make_unique<torch::optim::Adam>(
          network.module().parameters(),
          torch::optim::AdamOptions(options.learning_rate).eps(options.adam_epsilon));
    }
  }
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

absl::StatusOr<std::unique_ptr<DqnLearner>> DqnLearner::Create(const DqnOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  SetTorchThreads(options.torch_threads);
  ASSIGN_OR_RETURN(std::unique_ptr<QNetwork> online,
                   QNetwork::Create(options.network, options.seed));
  ASSIGN_OR_RETURN(std::unique_ptr<QNetwork> target,
                   QNetwork::Create(options.network, options.seed));
  return std::unique_ptr<DqnLearner>(new DqnLearner(options, std::move(online), std::move(target)));
}

DqnLearner::DqnLearner(const DqnOptions& options, std::unique_ptr<QNetwork> online,
                       std::unique_ptr<QNetwork> target)
    : options_(options),
      online_(std::move(online)),
      target_(std::move(target)),
      optimizer_(std::make_unique<Optimizer>(options_, *online_)) {}

DqnLearner::~DqnLearner() = default;

absl::StatusOr<TrainStepResult> DqnLearner::TrainStep(const TransitionBatch& batch,
                                                      absl::Span<const float> weights) {
  RETURN_IF_ERROR(CheckBatch(*online_, batch));
  if (weights.size() != batch.size()) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", batch.size(), " transitions with ",
                                                   weights.size(), " importance weights"));
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] >= 0.0f && std::isfinite(weights[i]))) {
      return absl::InvalidArgumentError(absl::StrCat("importance weight ", i, " is ", weights[i],
                                                     "; weights must be finite and >= 0"));
    }
  }
  const BatchTensors t = ViewBatch(batch);
  const torch::Tensor w =
      torch::from_blob(const_cast<float*>(weights.data()), {static_cast<int64_t>(weights.size())},
                       torch::TensorOptions().dtype(torch::kFloat32));
  const torch::Tensor targets = Targets(*online_, *target_, t, options_.double_dqn);
  const torch::Tensor q = online_->module().Forward(t.observations);
  const DqnLossTerms terms = WeightedHuberLoss(q, t.actions, targets, w, options_.huber_delta);

  optimizer_->optimizer->zero_grad();
  terms.loss.backward();
  if (options_.max_gradient_norm > 0) {
    torch::nn::utils::clip_grad_norm_(online_->module().parameters(), options_.max_gradient_norm);
  }
  optimizer_->optimizer->step();
  ++train_steps_;

  TrainStepResult result;
  result.loss = terms.loss.item<double>();
  result.abs_td_errors.resize(batch.size());
  CopyAbs(terms.td_error, absl::MakeSpan(result.abs_td_errors));
  if (train_steps_ % options_.target_update_period == 0) {
    UpdateTarget();
    result.target_updated = true;
  }
  return result;
}

absl::Status DqnLearner::AbsTdErrors(const TransitionBatch& batch, absl::Span<float> out) const {
  return ComputeAbsTdErrors(*online_, *target_, batch, options_.double_dqn, out);
}

void DqnLearner::UpdateTarget() {
  const absl::Status status = target_->CopyParametersFrom(*online_);
  CHECK(status.ok()) << status;  // same options, same shape
}

absl::Status ComputeAbsTdErrors(const QNetwork& online, const QNetwork& target,
                                const TransitionBatch& batch, bool double_dqn,
                                absl::Span<float> out) {
  if (online.shape_hash() != target.shape_hash()) {
    return absl::InvalidArgumentError("online and target networks differ in shape");
  }
  RETURN_IF_ERROR(CheckBatch(online, batch));
  if (out.size() != batch.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", batch.size(), " transitions, output of ", out.size()));
  }
  const BatchTensors t = ViewBatch(batch);
  torch::NoGradGuard no_grad;
  const torch::Tensor targets = Targets(online, target, t, double_dqn);
  const torch::Tensor q = online.module().Forward(t.observations);
  const torch::Tensor q_taken = q.gather(1, t.actions.unsqueeze(1)).squeeze(1);
  CopyAbs(targets - q_taken, out);
  return absl::OkStatus();
}

}  // namespace dreplay::rl
