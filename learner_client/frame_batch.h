// Copyright dreplay authors.
//
// frame_batch.h: the transitions of a staged batch of frame records
// (frames stored once, LayoutConfig::frame_stack > 0; protocol/
// frame_record.h and protocol/staging.h), each with its two stacks
// assembled from the records the batch carries or the learner cache served.
//
//   FrameBatchAssembler assembler(session->config());
//   assembler.Index(staged);
//   for (uint32_t i = 0; i < staged.size(); ++i) {
//     absl::Status s = assembler.Add(staged, i, &transitions);  // a row, or why not
//   }
//
// A reference names a record of the transition's own lease by sequence
// (q - d); the record is looked up by its slot index in the batch, and
// used only if its slot header says that sequence.
//
// Thread safety: none; one learner thread. The buffers are allocated once.

#ifndef DREPLAY_LEARNER_CLIENT_FRAME_BATCH_H_
#define DREPLAY_LEARNER_CLIENT_FRAME_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "learner_client/batch_reader.h"
#include "protocol/layout.h"
#include "rl/transition.h"

namespace dreplay::learner {

class FrameBatchAssembler {
 public:
  // REQUIRES: config.frame_stack > 0 and config.Validate() is OK.
  explicit FrameBatchAssembler(const protocol::LayoutConfig& config);

  // Bytes of one frame and of one stack.
  size_t frame_bytes() const { return frame_bytes_; }
  size_t stack_bytes() const { return stack_.size(); }

  // Indexes the slots of `batch` (its transitions and records) for Add().
  // The batch's views must stay valid until the last Add() of it.
  void Index(const StagedBatch& batch);

  // Appends transition i of the batch last indexed, with its stacks, to
  // `out` (u8 observations of stack_bytes()). NOT_FOUND when a record it
  // refers to is not in the batch (a learner-cache miss); INVALID_ARGUMENT
  // when a record does not decode or `out` has another observation shape.
  absl::Status Add(const StagedBatch& batch, uint32_t i, rl::TransitionBatch* out);

 private:
  const protocol::LayoutConfig config_;
  const uint64_t lease_slots_;
  const size_t frame_bytes_;
  absl::flat_hash_map<uint64_t, const uint8_t*> slots_;  // slot index -> copied slot
  std::vector<uint8_t> stack_;
  std::vector<uint8_t> next_stack_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_FRAME_BATCH_H_
