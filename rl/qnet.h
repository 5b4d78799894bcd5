// Copyright dreplay authors.
//
// qnet.h: the Q-network, a multilayer perceptron from an observation to one
// value per action:
//
//   obs -> Linear -> ReLU -> ... -> Linear -> ReLU -> Linear -> Q values
//
// with one hidden layer per entry of `hidden_sizes`. It runs on libtorch (CPU,
// float32), but this header is free of torch so that code outside rl/ can use
// the network without compiling torch headers.
//
// Parameters: per layer, weight [out, in] then bias [out]; layers in order.
// They are initialised as torch.nn.Linear initialises them by default, each
// value uniform in [-1/sqrt(in), 1/sqrt(in)), but drawn from dreplay's seeded
// generator (rl/random.h), so a seed gives the same network everywhere. The
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
#include "absl/types/span.h"

namespace dreplay::rl {

struct QNetworkOptions {
  // Floats per observation. Required (> 0).
  int observation_size = 0;
  // Number of actions, one output each. Required (> 0).
  int action_count = 0;
  // Width of each hidden layer; may be empty (a linear network).
  std::vector<int> hidden_sizes = {64, 64};

  // INVALID_ARGUMENT naming the first bad value.
  absl::Status Validate() const;
};

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
