// Copyright dreplay authors.
//
// transition.h: an n-step transition, its compact byte encoding (the payload
// of a replay slot), and a batch of transitions laid out as flat arrays for
// the learner.
//
// A transition says: from `observation`, `action` was taken; over the next
// `steps` (1..n) steps the discounted rewards summed to `reward`; the episode
// then was at `next_observation`. Its learning target is
//
//   reward + discount * max-ish Q(next_observation) * (1 - done)
//
// where `discount` is gamma^steps, the factor actually owed to the bootstrap
// value (steps < n at the end of an episode), and `done` is true only when the
// episode terminated within those steps. An episode cut by the time limit
// (truncated) is not done: its target still bootstraps.
//
// Encoding: protocol/transition_encoding.h's layout, a 20-byte header and the
// two observations as f32 (4 bytes a value) or u8 (1 byte a value: images and
// boolean grids, whose values are whole numbers in [0, 255]). In memory a
// Transition holds floats either way; encoding as u8 refuses a value that is
// not such a whole number, so decoding gives back exactly what was encoded.
//
// Nothing here is thread-safe; use one object per thread.

#ifndef DREPLAY_RL_TRANSITION_H_
#define DREPLAY_RL_TRANSITION_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "protocol/transition_encoding.h"

namespace dreplay::rl {

// The largest n of an n-step transition (steps is stored in one byte).
inline constexpr int kMaxTransitionSteps = 255;

// The fixed part of the encoding, before the two observations.
inline constexpr size_t kTransitionHeaderBytes = protocol::kEncodedTransitionHeaderBytes;

using protocol::ObservationType;

struct Transition {
  std::vector<float> observation;
  int32_t action = 0;
  float reward = 0.0f;    // sum over i < steps of gamma^i * r_i
  float discount = 1.0f;  // gamma^steps: the factor on the bootstrap value
  bool done = false;      // terminated within the steps: no bootstrap
  uint8_t steps = 1;      // steps actually accumulated, 1..n
  std::vector<float> next_observation;

  bool operator==(const Transition& other) const;
  bool operator!=(const Transition& other) const { return !(*this == other); }
};

// Bytes that a transition with `observation_size` values of `type` per
// observation encodes to.
constexpr size_t EncodedTransitionSize(size_t observation_size,
                                       ObservationType type = ObservationType::kFloat32) {
  return protocol::EncodedTransitionBytes(observation_size, type);
}

// Encodes `transition` with observations of `type` at the start of `out` and
// returns the bytes written (EncodedTransitionSize(observation size, type)).
// INVALID_ARGUMENT when `out` is too small, when the two observations differ
// in size, when steps is 0, when action is negative, or (u8) when an
// observation value is not a whole number in [0, 255].
absl::StatusOr<size_t> EncodeTransition(const Transition& transition, absl::Span<uint8_t> out,
                                        ObservationType type = ObservationType::kFloat32);

// The encoded transition at the start of `payload`: its first
// EncodedTransitionSize(observation_size, type) bytes, with both read from
// the encoding itself. Whatever follows (an actor's padding, see
// actor --payload_pad_bytes) is dropped. INVALID_ARGUMENT when `payload` is
// shorter than the header or than the size the header states.
absl::StatusOr<absl::Span<const uint8_t>> EncodedTransitionPrefix(
    absl::Span<const uint8_t> payload);

// Decodes a transition from exactly `in` (its size must be the encoded size),
// expecting `observation_size` values of `type` per observation; reuses the
// capacity of `out`'s vectors. INVALID_ARGUMENT for a size that does not match
// (too short, trailing bytes, another observation size), another observation
// type, or field values that no encoder writes (done not 0/1, steps 0,
// negative action, discount outside [0, 1], reserved byte not zero). `out` is
// unspecified after an error.
absl::Status DecodeTransition(absl::Span<const uint8_t> in, size_t observation_size,
                              Transition* out, ObservationType type = ObservationType::kFloat32);

// As above, returning a new Transition.
absl::StatusOr<Transition> DecodeTransition(absl::Span<const uint8_t> in, size_t observation_size,
                                            ObservationType type = ObservationType::kFloat32);

// OK when a learner can train on `transition`: its reward and every float
// of both observations are finite, 0 <= action < action_count, and discount
// is in [0, 1]. InvalidArgument naming the first field that is not.
// DecodeTransition() accepts finite and non-finite values alike and knows
// no action count: a learner checks this after decoding.
absl::Status CheckTrainable(const Transition& transition, int action_count);

// A batch of transitions as flat arrays, row i of each belonging to the i-th
// added transition, ready to become tensors.
class TransitionBatch {
 public:
  // Rows of `observation_size` floats; AddEncoded() decodes observations of
  // `type`. REQUIRES: observation_size > 0.
  explicit TransitionBatch(size_t observation_size,
                           ObservationType type = ObservationType::kFloat32);

  // Empties the batch, keeping capacity.
  void Clear();

  // Appends one transition. INVALID_ARGUMENT if an observation's size is not
  // observation_size().
  absl::Status Add(const Transition& transition);

  // Decodes and appends one encoded transition (see DecodeTransition()). On
  // error the batch is unchanged.
  absl::Status AddEncoded(absl::Span<const uint8_t> encoded);

  // Appends one transition whose observations are bytes (a frame stack
  // assembled from frame records, rl/frame_stacks.h), each byte a value.
  // INVALID_ARGUMENT if an observation's size is not observation_size(); on
  // error the batch is unchanged.
  absl::Status AddBytes(int32_t action, float reward, float discount, bool done,
                        absl::Span<const uint8_t> observation,
                        absl::Span<const uint8_t> next_observation);

  // CheckTrainable() for row i. REQUIRES: i < size().
  absl::Status CheckRow(size_t i, int action_count) const;
  // Keeps only the rows `rows` names (ascending, each < size()), in that
  // order; the others are removed.
  void KeepRows(absl::Span<const uint32_t> rows);
  // Appends a copy of row `row` of `from`. REQUIRES: row < from.size() and
  // both batches have the same observation_size().
  void AppendRow(const TransitionBatch& from, size_t row);

  size_t size() const { return actions_.size(); }
  size_t observation_size() const { return observation_size_; }
  ObservationType observation_type() const { return observation_type_; }

  const std::vector<float>& observations() const { return observations_; }
  const std::vector<int64_t>& actions() const { return actions_; }
  const std::vector<float>& rewards() const { return rewards_; }
  const std::vector<float>& discounts() const { return discounts_; }
  // 1.0 for done, 0.0 otherwise.
  const std::vector<float>& dones() const { return dones_; }
  const std::vector<float>& next_observations() const { return next_observations_; }

 private:
  size_t observation_size_;
  ObservationType observation_type_;
  std::vector<float> observations_;  // size() x observation_size_
  std::vector<int64_t> actions_;
  std::vector<float> rewards_;
  std::vector<float> discounts_;
  std::vector<float> dones_;
  std::vector<float> next_observations_;  // size() x observation_size_
  Transition scratch_;                    // decode buffer for AddEncoded()
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_TRANSITION_H_
