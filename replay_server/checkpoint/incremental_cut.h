// Copyright dreplay authors.
//
// incremental_cut.h: a checkpoint's cut (checkpoint.h) taken in bounded
// steps on the replay core's thread, between its normal work, so that no
// step holds ingest and sampling for long.
//
//   IncrementalCut cut(&regions, &memory, /*chunk_slots=*/65536);
//   cut.Begin(state, writer.TakeSpare());     // O(leases): cursors, holders
//   while (!cut.Step()) core.Step();          // one chunk of entries a step
//   writer.Start(cut.Finish());
//
// Begin() records at once what is O(leases): the state the caller passes
// (epoch, incarnation, counters, journal end, every lease's cursor) and
// every lease's holder from the lease lines. Each Step() copies the next
// `chunk_slots` entries (stored priority and sequence) of the memory.
//
// Consistency. Between Begin() and the last Step() the memory changes:
// ingest replaces entries, eviction and the sampler remove them. The cut
// observes the memory (replay::ReplayMemoryObserver): just before an index
// that is not yet copied changes, its entry is saved as it still is (copy
// on write of 16 bytes; a bit per index says it was saved). So the cut's
// sequences are exactly the memory's at Begin(): every one below its
// lease's saved cursor, the restore invariant, and what the verification
// log's K record (written at Begin) describes. Priorities are those of the
// moment each entry was copied (its chunk's step, or the change that saved
// it): updates consumed after Begin() may be in the file. A slot whose data
// is overwritten before the writer streams it is recorded absent by
// WriteCheckpoint, as for any cut. A copied entry found at or above its
// lease's saved cursor (impossible with the observer; a bug) is saved
// absent rather than break the restore invariant.
//
// Thread safety: none; the thread that owns `memory` calls every method.
// While active() the memory holds a pointer to this object; the destructor
// detaches it.

#ifndef DREPLAY_REPLAY_SERVER_CHECKPOINT_INCREMENTAL_CUT_H_
#define DREPLAY_REPLAY_SERVER_CHECKPOINT_INCREMENTAL_CUT_H_

#include <cstdint>
#include <vector>

#include "replay/replay_memory.h"
#include "replay_server/checkpoint/checkpoint.h"
#include "replay_server/regions.h"

namespace dreplay::server {

class IncrementalCut : public replay::ReplayMemoryObserver {
 public:
  // `regions` and `memory` are not owned and must outlive the cut.
  // REQUIRES: chunk_slots >= 1.
  IncrementalCut(const ReplayRegions* regions, replay::ReplayMemory* memory, uint64_t chunk_slots);
  ~IncrementalCut() override;
  IncrementalCut(const IncrementalCut&) = delete;
  IncrementalCut& operator=(const IncrementalCut&) = delete;

  // From Begin() until Finish().
  bool active() const { return active_; }
  // Starts a cut of `state` (its lease_holders are filled here); `spare`'s
  // buffers are reused when they have the memory's capacity. REQUIRES:
  // !active(), state.lease_cursors has one cursor per lease.
  void Begin(CheckpointState state, CheckpointCut spare);
  // Copies the next chunk; true once every entry is copied (then Finish()).
  // REQUIRES: active().
  bool Step();
  // The finished cut; detaches from the memory. REQUIRES: the last Step()
  // returned true.
  CheckpointCut Finish();
  // Entries of the current (or last) cut saved by a change before their
  // chunk was copied.
  uint64_t saved_on_change() const { return saved_on_change_; }

  void BeforeEntryChange(uint64_t index) override;

 private:
  bool Saved(uint64_t i) const { return (saved_[i >> 6] >> (i & 63)) & 1; }
  void Save(uint64_t i);

  const ReplayRegions* const regions_;
  replay::ReplayMemory* const memory_;
  const uint64_t chunk_slots_;
  const uint64_t lease_slots_;
  bool active_ = false;
  uint64_t next_ = 0;  // entries [0, next_) are copied
  CheckpointCut cut_;
  std::vector<uint64_t> saved_;  // a bit per index; all clear between cuts
  uint64_t saved_on_change_ = 0;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHECKPOINT_INCREMENTAL_CUT_H_
