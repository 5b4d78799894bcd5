// Copyright dreplay authors.
//
// ingest.h: moves committed transitions from the slot ring into the replay
// memory.
//
// Ingest walks sequence numbers in order from its cursor up to the actors'
// `tail` (read with an atomic load). For sequence q in slot i = q & mask:
//
//   commit word == CommitValue(q), and the slot's header says q, its length
//   fits and its checksum verifies           -> inserted with its initial
//                                               priority (counted inserted)
//   commit word == CommitValue(q), but the slot fails a check
//                                             -> read again until
//                                               torn_recheck has passed,
//                                               then torn (counted, skipped)
//   commit word names a later sequence        -> overrun (counted, skipped)
//   not committed yet                         -> wait; after abandon_timeout
//                                               without progress at q, or at
//                                               once for a sequence reserved
//                                               before a restore, abandoned
//                                               (counted, skipped)
//
// Whatever the outcome, slot i's previous occupant is evicted from the
// memory: sequence q owns the slot now (FIFO eviction). Nothing that fails a
// check is ever inserted. After each step the cursor is published in the
// control block (ServerLine::ingest_cursor, release store): actors may write
// sequence q only while SequenceWritable(config, q, ingest_cursor).
//
// Evict ahead: at the start of each step, the occupant of every slot an
// actor may be writing now (sequences reserved, below tail, and writable,
// below ingest_cursor + ActorWindow) is removed from the memory: its slot
// is being, or is about to be, rewritten. The sampler (same thread, after
// ingest) then only draws a slot under rewrite when its sequence was reserved
// after the step began; its seqlock and checksum catch those.
//
// The commit word is read with acquire, so a commit observed makes the slot
// bytes written before it (the actor's earlier WRITE on the same queue pair,
// or a thread's stores before its release) visible; the slot is verified in
// place. Where that order does not hold end to end (a NIC or PCIe path that
// places the commit WRITE before the slot's last bytes), a commit can be seen
// before its data: such a slot passes its check a moment later, so a failed
// check is repeated for torn_recheck before the slot is declared torn. One
// re-check window covers every sequence reserved when it began, so a batch
// of corrupt commits stalls ingest once, not once per slot. A misbehaving actor that laps a slot
// under verification cannot get it inserted: the sequence or the checksum fails.
//
// Insert-to-ingest delay: with an `insert_delays` histogram, every inserted
// slot that carries an insert time (SlotHeader::insert_time_ns, the actor's
// wall clock) records the seconds from it to the step's wall clock
// (Clock::WallNow, read once per step that inserts), negative ones as 0.
//
// Thread safety: none; one thread (the replay core) calls Step(). Step()
// never blocks and never allocates.

#ifndef DREPLAY_REPLAY_SERVER_INGEST_H_
#define DREPLAY_REPLAY_SERVER_INGEST_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/bucket_histogram.h"
#include "protocol/layout.h"
#include "replay/replay_memory.h"
#include "replay_server/clock.h"
#include "replay_server/counters.h"

namespace dreplay::server {

struct IngestOptions {
  // How long a reserved sequence may stay uncommitted, while ingest waits at
  // it, before it is skipped as abandoned (its actor died). Ingest is in
  // order, so this is also the longest stall one dead actor can cause.
  absl::Duration abandon_timeout = absl::Milliseconds(500);
  // Most sequences handled per Step() (bounds the latency of the other work
  // of the core loop).
  uint32_t max_per_step = 4096;
  // How long a committed slot that fails its check is read again before it
  // is counted torn (see the file comment); 0: torn at once. Ingest waits at
  // that sequence meanwhile.
  absl::Duration torn_recheck = absl::Milliseconds(2);

  absl::Status Validate() const;
};

class Ingest {
 public:
  // Pointers are not owned and must outlive the Ingest: `control`, `slots`
  // (capacity * slot_size bytes), `commits` (capacity words) laid out for
  // `config`; `memory` (capacity == config.capacity), `counters`, `clock`;
  // `insert_delays` (nullptr: not measured).
  // REQUIRES: options.Validate() and config.Validate() are OK.
  Ingest(const protocol::LayoutConfig& config, const IngestOptions& options,
         protocol::ControlBlock* control, const uint8_t* slots, const uint64_t* commits,
         replay::ReplayMemory* memory, ReplayCounters* counters, Clock* clock,
         BucketHistogram* insert_delays = nullptr);

  // Handles up to max_per_step sequences; returns how many (ingested,
  // torn, overrun or abandoned). Publishes the cursor when it moved.
  uint64_t Step();

  // The next sequence to handle; every sequence below it is done.
  uint64_t cursor() const { return cursor_; }
  // The tail read by the last Step().
  uint64_t tail_seen() const { return tail_seen_; }

  // Restarts at `cursor` after a checkpoint restore: sequences in
  // [cursor, reserved_before) were reserved by actors of the previous
  // process, so those not committed are abandoned without waiting.
  // Publishes the cursor.
  void Restart(uint64_t cursor, uint64_t reserved_before);

 private:
  void Publish();
  // True while committed sequence q, which failed its check, should be read
  // again rather than counted torn (starts q's re-check window if needed).
  bool Recheck(uint64_t q, uint64_t tail);
  // Records the delay of a slot stamped `insert_time_ns` (0: unknown).
  // `wall_now_ns`: the step's wall clock, read on first use (0: not yet).
  void RecordInsertDelay(uint64_t insert_time_ns, int64_t* wall_now_ns);

  const protocol::LayoutConfig config_;
  const IngestOptions options_;
  protocol::ControlBlock* const control_;
  const uint8_t* const slots_;
  const uint64_t* const commits_;
  replay::ReplayMemory* const memory_;
  ReplayCounters* const counters_;
  Clock* const clock_;
  BucketHistogram* const insert_delays_;

  uint64_t cursor_ = 0;
  uint64_t tail_seen_ = 0;
  uint64_t reserved_before_ = 0;  // see Restart()
  uint64_t evicted_through_ = 0;  // slots of sequences below this: evicted
  // The sequence ingest began waiting at (kNotWaiting: none), since when,
  // and the tail then: sequences below waiting_tail_ were all reserved when
  // the wait began, so they share its timer.
  static constexpr uint64_t kNotWaiting = ~uint64_t{0};
  uint64_t waiting_for_ = kNotWaiting;
  absl::Time waiting_since_;
  uint64_t waiting_tail_ = 0;
  // The same for the re-check of a committed slot that failed its check.
  uint64_t rechecking_ = kNotWaiting;
  absl::Time recheck_since_;
  uint64_t recheck_tail_ = 0;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_INGEST_H_
