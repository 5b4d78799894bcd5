// Copyright dreplay authors.
//
// dqn.h: the DQN learner: an online and a target QNetwork, double-DQN targets
// with n-step returns, the Huber loss weighted by importance-sampling weights
// (prioritized replay), Adam or RMSprop, and a hard target update every
// `target_update_period` training steps. Torch-free header; rl/dqn_loss.h has
// the loss itself.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<DqnLearner> learner,
//                    DqnLearner::Create(options));
//   ASSIGN_OR_RETURN(TrainStepResult r, learner->TrainStep(batch, weights));
//   // r.abs_td_errors are the batch's new priorities (before exponent alpha).
//
// Thread safety: a DqnLearner is not thread-safe. Its networks may be read
// (const methods) from other threads only while no TrainStep() runs.

#ifndef DREPLAY_RL_DQN_H_
#define DREPLAY_RL_DQN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rl/qnet.h"
#include "rl/transition.h"

namespace dreplay::rl {

// The optimizer of a DqnLearner.
enum class DqnOptimizer {
  kAdam,     // Adam (learning_rate, adam_epsilon)
  kRmsprop,  // RMSprop (learning_rate, rmsprop_*): MinAtar's DQN optimizer
};

struct DqnOptions {
  QNetworkOptions network;
  DqnOptimizer optimizer = DqnOptimizer::kAdam;
  // The optimizer's step size.
  double learning_rate = 1e-3;
  // Adam's epsilon.
  double adam_epsilon = 1e-8;
  // RMSprop's smoothing constant of the squared gradient, epsilon (added to
  // the root of the mean square) and centering; the defaults are MinAtar's
  // (SQUARED_GRAD_MOMENTUM, MIN_SQUARED_GRAD, centered).
  double rmsprop_alpha = 0.95;
  double rmsprop_epsilon = 0.01;
  bool rmsprop_centered = true;
  // Huber threshold (> 0): quadratic below, linear above.
  double huber_delta = 1.0;
  // true: double DQN (argmax by the online network, value by the target);
  // false: plain DQN (max of the target network).
  bool double_dqn = true;
  // Copy the online network into the target every this many TrainStep()s.
  int64_t target_update_period = 1000;
  // Clip the gradient's global norm to this; 0 turns clipping off.
  double max_gradient_norm = 10.0;
  // libtorch intra-op threads, set process-wide by Create() (SetTorchThreads).
  int torch_threads = 1;
  // Seed of the initial parameters (online and target start equal).
  uint64_t seed = 0;

  // INVALID_ARGUMENT naming the first bad value.
  absl::Status Validate() const;
};

// MinAtar's published DQN hyper-parameters (Young & Tian 2019, MinAtar's
// examples/dqn.py) as DqnOptions: RMSprop, centered, with step size 0.00025,
// squared-gradient smoothing 0.95 and epsilon 0.01, and a target update every
// 1,000 training steps. The rest (the network, seed, Huber delta, double
// DQN, gradient clipping) keep DqnOptions' defaults; the batch of 32, the
// replay of 100,000 and the first 5,000 random frames are the replay
// server's and the actors' settings (tools/launch/run_local.py applies them).
DqnOptions MinAtarDqnOptions();

struct TrainStepResult {
  // The importance-weighted mean Huber loss of the batch, before the update.
  double loss = 0.0;
  // |TD error| of each transition, before the update: the new priorities.
  std::vector<float> abs_td_errors;
  // True when this step ended with a target network update.
  bool target_updated = false;
};

class DqnLearner {
 public:
  // INVALID_ARGUMENT for invalid options.
  static absl::StatusOr<std::unique_ptr<DqnLearner>> Create(const DqnOptions& options);

  ~DqnLearner();
  DqnLearner(const DqnLearner&) = delete;
  DqnLearner& operator=(const DqnLearner&) = delete;

  // One gradient step on `batch` with importance-sampling `weights` (one per
  // transition; all 1 for uniform replay). INVALID_ARGUMENT for an empty
  // batch, another observation size, weights of the wrong count, a negative
  // or non-finite weight, or an action outside the network's range. Nothing
  // changes on error.
  absl::StatusOr<TrainStepResult> TrainStep(const TransitionBatch& batch,
                                            absl::Span<const float> weights);

  // |TD error| of each transition under the current networks, without
  // training (e.g. the "transferred priority" of arriving experiences).
  // Same errors as TrainStep(), and INVALID_ARGUMENT if out.size() differs
  // from batch.size().
  absl::Status AbsTdErrors(const TransitionBatch& batch, absl::Span<float> out) const;

  // Copies the online network into the target now.
  void UpdateTarget();

  const QNetwork& online() const { return *online_; }
  const QNetwork& target() const { return *target_; }
  // Mutable access to the online network, e.g. to load a checkpoint. The
  // optimizer's moment estimates are kept.
  QNetwork& mutable_online() { return *online_; }

  int64_t train_steps() const { return train_steps_; }
  const DqnOptions& options() const { return options_; }

 private:
  class Optimizer;
  DqnLearner(const DqnOptions& options, std::unique_ptr<QNetwork> online,
             std::unique_ptr<QNetwork> target);

  const DqnOptions options_;
  const std::unique_ptr<QNetwork> online_;
  const std::unique_ptr<QNetwork> target_;
  std::unique_ptr<Optimizer> optimizer_;
  int64_t train_steps_ = 0;
};

// |TD error| of each transition of `batch` under `online` and `target` (which
// may be the same network, as at an actor that holds one copy), written to
// `out`. INVALID_ARGUMENT as for DqnLearner::AbsTdErrors(), or if the two
// networks differ in shape.
absl::Status ComputeAbsTdErrors(const QNetwork& online, const QNetwork& target,
                                const TransitionBatch& batch, bool double_dqn,
                                absl::Span<float> out);

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_DQN_H_
