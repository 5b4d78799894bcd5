// Copyright dreplay authors.
//
// forwarded_frames.h: frames stored once in the hybrid placement's own
// replay (local_replay_source.h). The buffer node forwards transitions by
// priority (or at random, or oldest first), each once, with the records
// their stacks need; the forwarded batch reader keeps every record it
// receives by the server's slot (its learner cache), so a record crosses
// once while the learner holds it, and `lookup(lease, sequence)` finds it
// while that slot holds that sequence.
//
// This index keeps, per local slot, which (lease, sequence) the transition
// there is, and assembles its stacks through the lookup. Records arrive in
// no particular order and the reader's store overwrites a slot when a newer
// record of it arrives, so a transition is checked twice: when it arrives
// (every record it needs is held, with its frame; otherwise it is not
// inserted and is counted in missing()), and when it is sampled (Assemble()
// says NOT_FOUND when a record was overwritten since; the caller removes it
// and counts it in evicted()).
//
//   ForwardedFrameIndex index(capacity, depth, frame_bytes, lookup);
//   bool insert;
//   RETURN_IF_ERROR(index.Accept(i, lease, lease_sequence, record, &insert));
//   if (insert) memory->Insert(i, q, priority);
//   absl::Status s = index.Assemble(i, &batch);  // a sampled slot
//
// Thread safety: none; the learner loop's thread.

#ifndef DREPLAY_LEARNER_CLIENT_FORWARDED_FRAMES_H_
#define DREPLAY_LEARNER_CLIENT_FORWARDED_FRAMES_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "rl/transition.h"

namespace dreplay::learner {

class ForwardedFrameIndex {
 public:
  // The record of (lease, sequence) as the stream keeps it; empty when it
  // does not hold that sequence now.
  using Lookup = std::function<absl::Span<const uint8_t>(uint32_t lease, uint64_t sequence)>;

  // REQUIRES: capacity >= 1, depth >= 1, frame_bytes >= 1, lookup set.
  ForwardedFrameIndex(uint64_t capacity, int depth, size_t frame_bytes, Lookup lookup);

  // The transition record `record` of (lease, lease_sequence) arrived for
  // local slot `index` (which holds nothing from now on until *insert).
  // Sets *insert when every record its stacks refer to is held with its
  // frame. INVALID_ARGUMENT when the record does not decode, has another
  // depth, or carries no transition.
  absl::Status Accept(uint64_t index, uint32_t lease, uint64_t lease_sequence,
                      absl::Span<const uint8_t> record, bool* insert);

  // Appends the stacks of the transition in local slot `index` to `batch`.
  // NOT_FOUND when a record it needs is no longer held (or the slot holds
  // no transition); `batch` is then unchanged.
  absl::Status Assemble(uint64_t index, rl::TransitionBatch* batch);

  // Transitions that arrived referring to a record not held.
  uint64_t missing() const { return missing_; }

 private:
  struct Slot {
    uint32_t lease = 0;
    uint64_t sequence = 0;
    bool held = false;
  };
  // True when (lease, sequence) is held with a frame.
  bool HoldsFrame(uint32_t lease, uint64_t sequence) const;

  const int depth_;
  const size_t frame_bytes_;
  const Lookup lookup_;
  std::vector<Slot> slots_;
  std::vector<uint8_t> stack_, next_stack_;
  uint64_t missing_ = 0;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_FORWARDED_FRAMES_H_
