// Copyright dreplay authors.
//
// qnet.h: the Q-network, from an observation to one value per action: a
// torso, then a multilayer perceptron head
//
//   torso(obs) -> Linear -> ReLU -> ... -> Linear -> ReLU -> Linear -> Q values
//
// with one hidden layer per entry of `hidden_sizes`. The torsos
// (QNetworkTorso):
//
//   kMlp         none: the observation itself (a vector)
//   kMinAtar     MinAtar's DQN network: the 10x10xC grid (row, column,
//                channel order) -> Conv 16 3x3 stride 1 -> ReLU -> flatten
//                (1,024); with hidden_sizes {128} it is MinAtar's network
//   kNatureCnn   the Nature DQN CNN: C 84x84 frames of bytes (frame, row,
//                column order), scaled by 1/255 -> Conv 32 8x8/4 -> ReLU ->
//                Conv 64 4x4/2 -> ReLU -> Conv 64 3x3/1 -> ReLU -> flatten
//                (3,136); with hidden_sizes {512} it is the Nature network
//
// An observation is always a flat row of observation_size floats;
// NetworkOptionsFor() picks the torso an environment's observation layout
// needs. It runs on libtorch (CPU, float32), but this header is free of torch
// so that code outside rl/ can use the network without compiling torch
// headers.
//
// Parameters: per layer, weight ([out, in] or [out, in, kh, kw]) then bias
// [out]; the torso's convolutions first, then the head's layers, in order.
// They are initialised as torch.nn.Linear and Conv2d initialise them by
// default, each value uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)) (fan_in =
// in * kh * kw), but drawn from dreplay's seeded generator (rl/random.h), so
// a seed gives the same network everywhere. The
// flat parameter vector (GetParameters(), Serialize()) concatenates the
// tensors in that order, each row-major; the serialised form is
// rl/params_format.h's buffer with this network's shape hash.
//
// Thread safety: const methods may run concurrently with each other; methods
// that change the parameters (SetParameters, CopyParametersFrom, Load, and a
// DqnLearner training it) must not run concurrently with anything else on the
// same network.

#ifndef DREPLAY_RL_QNET_H_
#define DREPLAY_RL_QNET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "rl/environment.h"
#include "rl/minatar_games.h"

namespace dreplay::rl {

// The part of the network before its MLP head (see the top of this file).
enum class QNetworkTorso { kMlp, kMinAtar, kNatureCnn };

// "mlp", "minatar" or "nature_cnn".
const char* QNetworkTorsoName(QNetworkTorso torso);

struct QNetworkOptions {
  // Floats per observation. Required (> 0).
  int observation_size = 0;
  // Number of actions, one output each. Required (> 0).
  int action_count = 0;
  // Width of each hidden layer of the head; may be empty (linear).
  std::vector<int> hidden_sizes = {64, 64};
  // The torso; kMinAtar and kNatureCnn need input_channels (C), with
  // observation_size 100 * C and C * 84 * 84 respectively.
  QNetworkTorso torso = QNetworkTorso::kMlp;
  int input_channels = 0;

  // INVALID_ARGUMENT naming the first bad value.
  absl::Status Validate() const;
};

// The hidden sizes a network for `env` has unless told otherwise: {64, 64}
// for a vector, {128} for MinAtar's grid (MinAtar's DQN), {512} for 84x84
// frames (Nature DQN).
std::vector<int> DefaultHiddenSizes(const EnvironmentSpec& env);

// DefaultHiddenSizes() of the environment MakeEnvironment(env, mode) makes;
// its errors for an unknown name or mode.
absl::StatusOr<std::vector<int>> DefaultHiddenSizesFor(absl::string_view env, ObservationMode mode);

// The options of a network for `env`: its observation size, actions, the
// torso its observation layout needs, and `hidden_sizes`.
QNetworkOptions NetworkOptionsFor(const EnvironmentSpec& env, std::vector<int> hidden_sizes);

// Sets the number of threads libtorch uses inside one operation, for the whole
// process. Small networks run best on 1 (the default that DqnOptions applies).
// REQUIRES: threads >= 1.
void SetTorchThreads(int threads);

class QNetwork {
 public:
  // A new network with parameters drawn from `seed`. INVALID_ARGUMENT if the
  // options are invalid.
  static absl::StatusOr<std::unique_ptr<QNetwork>> Create(const QNetworkOptions& options,
                                                          uint64_t seed);

  ~QNetwork();
  QNetwork(const QNetwork&) = delete;
  QNetwork& operator=(const QNetwork&) = delete;

  const QNetworkOptions& options() const { return options_; }

  // Number of float parameters.
  size_t parameter_count() const { return parameter_count_; }

  // ParamsShapeHash() of the parameter shapes: equal for two networks exactly
  // when their architectures are.
  uint64_t shape_hash() const { return shape_hash_; }

  // Q values of a batch: `observations` holds B rows of observation_size
  // floats, `q_values` receives B rows of action_count floats. No gradient
  // is recorded. INVALID_ARGUMENT if the sizes do not fit together.
  absl::Status QValues(absl::Span<const float> observations, absl::Span<float> q_values) const;

  // The action with the highest Q value for one observation (the lowest index
  // among equal values). INVALID_ARGUMENT for a wrong observation size.
  absl::StatusOr<int> GreedyAction(absl::Span<const float> observation) const;

  // The flat parameter vector (see the top of this file).
  std::vector<float> GetParameters() const;

  // Replaces all parameters. INVALID_ARGUMENT unless values.size() ==
  // parameter_count().
  absl::Status SetParameters(absl::Span<const float> values);

  // Copies `other`'s parameters into this network (a hard target update).
  // FAILED_PRECONDITION if the architectures differ.
  absl::Status CopyParametersFrom(const QNetwork& other);

  // Bytes Serialize() writes.
  size_t SerializedSize() const;

  // Writes the parameters with `version` as a params buffer at the start of
  // `out`; returns the bytes written. INVALID_ARGUMENT if `out` is too small.
  absl::StatusOr<size_t> Serialize(uint64_t version, absl::Span<uint8_t> out) const;

  // Loads parameters from a params buffer; returns its version. Refuses
  // (see ReadParams()) a buffer of another architecture or format version;
  // the network is unchanged on error.
  absl::StatusOr<uint64_t> Load(absl::Span<const uint8_t> in);

  // The libtorch module, for rl/ internals (rl/qnet_module.h defines it).
  class Module;
  Module& module() const { return *module_; }

 private:
  QNetwork(const QNetworkOptions& options, std::unique_ptr<Module> module);

  const QNetworkOptions options_;
  const std::unique_ptr<Module> module_;
  const size_t parameter_count_;
  const uint64_t shape_hash_;
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_QNET_H_
