// Copyright dreplay authors.
//
// local_frames.h: frames stored once in a learner's own replay (the
// learner placement, local_replay_source.h). The buffer node forwards every
// frame record in order (protocol/frame_record.h); the store keeps each in
// a slot of the local ring, knows which (lease, sequence) each slot holds,
// and, with a replay::FrameTable over the ring, which transitions depend on
// which records: a transition is inserted only when every record its two
// stacks refer to is held with its frame, and leaves the memory when one of
// them is overwritten. Stacks are assembled from the ring
// (rl::AssembleStacks), the same bytes the buffer placement's learner gets.
//
//   LocalFrameStore store(capacity, depth, frame_bytes);
//   // an arrival into local slot i (the memory's index of its sequence):
//   bool insert;
//   RETURN_IF_ERROR(store.Accept(i, q, generation, lease, lease_sequence, record, memory,
//                                &insert));
//   if (insert) memory->Insert(i, q, priority);
//   RETURN_IF_ERROR(store.Assemble(i, &batch));  // a sampled slot
//
// Records of one lease arrive in their sequence order, and the caller puts
// arrival k into slot k mod capacity (every arrival, so the ring is
// overwritten in arrival order even when records were lost on the way), so
// a transition's oldest record is always overwritten before the others it
// needs (replay::FrameTable's condition). A record's references are looked
// up among the records of its own generation
// (TransitionStream::records_generation()): a restarted server may write
// other records under sequences the store already holds, and a stack never
// mixes the two.
//
// Thread safety: none; the learner loop's thread.

#ifndef DREPLAY_LEARNER_CLIENT_LOCAL_FRAMES_H_
#define DREPLAY_LEARNER_CLIENT_LOCAL_FRAMES_H_

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "replay/frame_table.h"
#include "replay/replay_memory.h"
#include "rl/transition.h"

namespace dreplay::learner {

class LocalFrameStore {
 public:
  // REQUIRES: capacity >= 1, depth >= 1, frame_bytes >= 1.
  LocalFrameStore(uint64_t capacity, int depth, size_t frame_bytes);

  // The record `record` (its bytes), of `lease` and `lease_sequence` in
  // the stream's `generation`, arrived into local slot `index` as the
  // memory's `sequence`: what the slot held is released (the transition
  // there and those that depend on the record leave `memory`, the latter
  // counted in evicted()). Sets
  // *insert when the record carries a transition whose records are all
  // held (the caller inserts it into the memory at `index`); INVALID_ARGUMENT
  // when it does not decode (the slot then holds nothing).
  absl::Status Accept(uint64_t index, uint64_t sequence, uint64_t generation, uint32_t lease,
                      uint64_t lease_sequence, absl::Span<const uint8_t> record,
                      replay::ReplayMemory* memory, bool* insert);

  // Appends the stacks of the transition in local slot `index` to `batch`;
  // NOT_FOUND when a record is not held (it cannot be while the memory
  // holds the transition).
  absl::Status Assemble(uint64_t index, rl::TransitionBatch* batch);

  // Transitions that carried a transition record but referred to a record
  // not held (overwritten, or lost on the way), and transitions that left
  // the memory because a record they need was overwritten.
  uint64_t missing() const { return missing_; }
  uint64_t evicted() const { return evicted_; }

 private:
  struct Slot {
    uint64_t generation = 0;
    uint32_t lease = 0;
    uint64_t sequence = 0;
    bool held = false;
    uint32_t length = 0;
  };
  using Key = std::tuple<uint64_t, uint32_t, uint64_t>;  // (generation, lease, sequence)
  // The local slot holding (generation, lease, sequence), or nullptr.
  const Slot* Find(uint64_t generation, uint32_t lease, uint64_t sequence, uint64_t* index) const;

  const int depth_;
  const size_t frame_bytes_;
  const size_t record_bytes_;  // the largest record
  replay::FrameTable table_;
  std::vector<Slot> slots_;
  std::vector<uint8_t> records_;              // record_bytes_ per slot
  absl::flat_hash_map<Key, uint64_t> where_;  // -> the local slot
  std::vector<uint8_t> stack_, next_stack_;
  uint64_t missing_ = 0, evicted_ = 0;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_LOCAL_FRAMES_H_
