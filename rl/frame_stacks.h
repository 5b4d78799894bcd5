// Copyright dreplay authors.
//
// frame_stacks.h: a transition's two frame stacks, assembled from the frame
// records (protocol/frame_record.h) of one stream: the record that carries
// the transition and the records its references name.
//
//   // records: the stream's records by sequence, or empty where a record
//   // is not held (overwritten, or not written yet)
//   ASSIGN_OR_RETURN(StackedTransition t,
//       AssembleStacks(sequence, frame_bytes, lookup,
//                      absl::MakeSpan(observation), absl::MakeSpan(next)));
//
// Thread safety: pure functions (the lookup is called from the caller's
// thread).

#ifndef DREPLAY_RL_FRAME_STACKS_H_
#define DREPLAY_RL_FRAME_STACKS_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "protocol/frame_record.h"

namespace dreplay::rl {

// The record of `sequence`, or an empty span when it is not held.
using RecordLookup = absl::FunctionRef<absl::Span<const uint8_t>(uint64_t sequence)>;

// A transition's fields besides its stacks (rl/transition.h's meanings).
struct StackedTransition {
  int32_t action = 0;
  float reward = 0.0f;
  float discount = 1.0f;
  bool done = false;
  uint8_t steps = 1;
  int depth = 0;
};

// Writes the observation and next observation of the transition at
// `sequence` (depth x frame_bytes bytes each, oldest frame first) and
// returns its fields. NOT_FOUND when the record or one it refers to is not
// held (or would be before sequence 0); FAILED_PRECONDITION when the
// record carries no transition; INVALID_ARGUMENT when a record does not
// decode, a referenced record has no frame, or an output span is not
// depth x frame_bytes.
absl::StatusOr<StackedTransition> AssembleStacks(uint64_t sequence, size_t frame_bytes,
                                                 RecordLookup lookup,
                                                 absl::Span<uint8_t> observation,
                                                 absl::Span<uint8_t> next_observation);

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_FRAME_STACKS_H_
