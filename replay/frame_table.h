// Copyright dreplay authors.
//
// frame_table.h: which frame record each slot of a ring holds, and which
// transitions depend on it, for a replay memory whose transitions refer to
// frames stored once in other slots (protocol/frame_record.h). When a
// record is overwritten, every transition that needs it must stop being
// sampled; the table says which, without scanning the ring.
//
// Each transition is registered under one record: the oldest it refers to.
// That is enough when each lease's records are overwritten in sequence
// order (a ring lap after lap, as ingest does): the oldest record a
// transition needs goes first, and the transition itself (newer still)
// goes after it, so a transition is never reused while still registered.
//
//   FrameTable table(capacity);
//   // ingest of record q into slot i, which held an older record:
//   table.Release(i, [&](uint64_t j, uint64_t q_j) { remove j if it still holds q_j; });
//   table.Hold(i, q, has_frame);
//   // a transition at (j, q) whose oldest record is in slot o:
//   if (every needed (slot, sequence) HoldsFrame) table.AddDependent(o, j, q);
//
// Thread safety: none; one thread (the replay core) owns a table. Nothing
// allocates after construction.

#ifndef DREPLAY_REPLAY_FRAME_TABLE_H_
#define DREPLAY_REPLAY_FRAME_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"

namespace dreplay::replay {

class FrameTable {
 public:
  // A table of `capacity` slots, holding nothing, with room for
  // `max_needs` needs per slot (SetNeeds()). REQUIRES: capacity >= 1.
  explicit FrameTable(uint64_t capacity, uint32_t max_needs = 0);

  uint64_t capacity() const { return held_.size(); }

  // Slot `index` holds record `sequence`, with a frame or without.
  // REQUIRES: index < capacity(); nothing depends on the slot (Release()
  // first when it held a record).
  void Hold(uint64_t index, uint64_t sequence, bool has_frame);

  // True when slot `index` holds record `sequence` with its frame.
  bool HoldsFrame(uint64_t index, uint64_t sequence) const;

  // True when slot `index` holds record `sequence`, with a frame or without.
  bool Holds(uint64_t index, uint64_t sequence) const;

  // The transition at slot `transition_index`, of sequence
  // `transition_sequence`, needs the record slot `oldest_index` holds: when
  // that record is released, so is the transition. REQUIRES: both indices
  // < capacity(); the transition is not registered already.
  void AddDependent(uint64_t oldest_index, uint64_t transition_index, uint64_t transition_sequence);

  // Slot `index` holds nothing any more (it is being overwritten): calls
  // `release(j, q)` for every transition (slot j, sequence q) registered
  // under it, newest first, and forgets them. The caller removes each from
  // its memory if the memory still has that sequence there. Returns how
  // many it released.
  uint64_t Release(
      uint64_t index,
      absl::FunctionRef<void(uint64_t transition_index, uint64_t transition_sequence)> release);

  // The back distances (>= 1, distinct) from the transition in slot
  // `index` to the other records its stacks refer to, for a sampler that
  // stages them with it. Kept until the slot's next SetNeeds().
  // REQUIRES: index < capacity(); distances.size() <= max_needs.
  void SetNeeds(uint64_t index, absl::Span<const uint16_t> distances);
  absl::Span<const uint16_t> Needs(uint64_t index) const {
    return absl::MakeConstSpan(&needs_[index * max_needs_], need_count_[index]);
  }

  // Holds nothing (a new epoch).
  void Clear();

 private:
  static constexpr uint64_t kNone = ~uint64_t{0};
  static constexpr uint64_t kFrameBit = uint64_t{1} << 63;

  // held_[i]: (sequence + 1) | kFrameBit when it has a frame; 0 when empty.
  std::vector<uint64_t> held_;
  // The transitions registered under a record slot, as a list threaded
  // through the transitions' own slots: head_[record slot], next_[slot].
  std::vector<uint64_t> head_;
  std::vector<uint64_t> next_;
  std::vector<uint64_t> dependent_sequence_;  // the registered transition's sequence
  const uint32_t max_needs_;
  std::vector<uint16_t> needs_;      // max_needs_ per slot
  std::vector<uint8_t> need_count_;  // per slot
};

}  // namespace dreplay::replay

#endif  // DREPLAY_REPLAY_FRAME_TABLE_H_
