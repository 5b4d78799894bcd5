// Copyright dreplay authors.
//
// forwarded_frames.h: frames stored once in the hybrid placement's own
// replay (local_replay_source.h). The buffer node forwards transitions by
// priority (or at random, or oldest first), each once, with the records
// their stacks need; the forwarded batch reader keeps every record it
// receives by the server's slot (its learner cache), so a record crosses
// once while the learner holds it there, and `lookup(lease, sequence)`
// finds it while that slot holds that sequence.
//
// That store is the server's ring, mirrored: a newer record of a slot
// replaces the one there, while transitions of the learner's replay may
// still need it. So when a transition arrives this index copies every
// record its stacks need that it does not keep yet into its own store,
// counted by the transitions that need each, and frees a record when the
// last of them leaves (its local slot takes another arrival). A transition
// is inserted only when every record it needs is held with its frame
// (otherwise it is counted in missing()); from then on its stacks are
// assembled from the index's own store, whatever the stream replaces.
//
// Records are keyed by (generation, lease, sequence): the stream's
// generation changes when it forgets what it held (a restarted server may
// write other records under the same sequences), so a transition arriving
// after that never uses a record of before, while those of before keep
// theirs.
//
//   ForwardedFrameIndex index(capacity, depth, frame_bytes, lookup);
//   bool insert;
//   RETURN_IF_ERROR(index.Accept(i, generation, lease, lease_sequence, record, &insert));
//   if (insert) memory->Insert(i, q, priority);
//   RETURN_IF_ERROR(index.Assemble(i, &batch));  // a sampled slot
//
// Thread safety: none; the learner loop's thread.

#ifndef DREPLAY_LEARNER_CLIENT_FORWARDED_FRAMES_H_
#define DREPLAY_LEARNER_CLIENT_FORWARDED_FRAMES_H_

#include <cstdint>
#include <functional>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "rl/transition.h"

namespace dreplay::learner {

class ForwardedFrameIndex {
 public:
  // The record of (lease, sequence) as the stream keeps it now; empty when
  // it does not hold that sequence.
  using Lookup = std::function<absl::Span<const uint8_t>(uint32_t lease, uint64_t sequence)>;

  // REQUIRES: capacity >= 1, depth >= 1, frame_bytes >= 1, lookup set.
  ForwardedFrameIndex(uint64_t capacity, int depth, size_t frame_bytes, Lookup lookup);

  // The transition record `record` of (lease, lease_sequence) arrived for
  // local slot `index`, in the stream's `generation`: what the slot held
  // is released. Sets *insert when every record its stacks refer to is
  // held with its frame (kept by the index or found by the lookup), and
  // keeps them. INVALID_ARGUMENT when the record does not decode, has
  // another depth, or carries no transition (the slot then holds nothing).
  absl::Status Accept(uint64_t index, uint64_t generation, uint32_t lease, uint64_t lease_sequence,
                      absl::Span<const uint8_t> record, bool* insert);

  // Appends the stacks of the transition in local slot `index` to `batch`.
  // NOT_FOUND when the slot holds no transition.
  absl::Status Assemble(uint64_t index, rl::TransitionBatch* batch);

  // Transitions that arrived referring to a record not held.
  uint64_t missing() const { return missing_; }
  // Records kept now, and copied in so far (each once while kept).
  uint64_t records_kept() const { return records_.size(); }
  uint64_t records_copied() const { return records_copied_; }

 private:
  using Key = std::tuple<uint64_t, uint32_t, uint64_t>;  // generation, lease, sequence
  struct Record {
    std::vector<uint8_t> bytes;
    uint32_t users = 0;  // local slots whose transition needs it
  };
  struct Slot {
    uint64_t generation = 0;
    uint32_t lease = 0;
    uint64_t sequence = 0;
    bool held = false;
    std::vector<uint64_t> needs;  // sequences of the records kept for it
  };
  // Releases what slot `index` holds.
  void Release(uint64_t index);
  // The record (generation, lease, sequence) kept by the index, else found
  // by the lookup (`generation` is the stream's current one); empty when
  // neither has it with a frame.
  absl::Span<const uint8_t> Find(uint64_t generation, uint32_t lease, uint64_t sequence) const;

  const int depth_;
  const size_t frame_bytes_;
  const Lookup lookup_;
  std::vector<Slot> slots_;
  absl::flat_hash_map<Key, Record> records_;
  std::vector<uint8_t> stack_, next_stack_;
  uint64_t missing_ = 0;
  uint64_t records_copied_ = 0;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_FORWARDED_FRAMES_H_
