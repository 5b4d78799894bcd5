// Copyright dreplay authors.
//
// ingest.h: moves committed transitions from the actors' leases of the slot
// ring into the replay memory.
//
// Every lease (protocol/leases.h) has its own cursor. Each Step() visits the
// leases round-robin, starting after the lease where the previous step
// stopped, and walks each one's sequences in order from its cursor, at most
// max_per_lease of them, and max_per_step in all. For sequence q of lease l
// in ring slot i = LeaseSlotIndex(config, l, q):
//
//   commit word == CommitValue(q), and the slot's header says q, its length
//   fits and its checksum verifies           -> inserted with its bounded
//                                               initial priority (counted
//                                               inserted)
//   commit word == CommitValue(q), but the slot fails a check
//                                             -> read again until
//                                               torn_recheck has passed,
//                                               then torn (counted, skipped)
//   ... and the payload fails the transition check (below)
//                                             -> invalid (counted, skipped)
//   commit word above CommitValue(q)          -> overrun (counted, skipped)
//   anything else (not committed yet)         -> the lease waits at q
//
// A lease waiting at q holds up nobody else: no abandon timeout is needed,
// and a stalled or dead actor stalls only its own lease. Only its actor
// writes a lease's slots and commit words (its keys cover that lease alone),
// so a forged commit word or slot corrupts that lease only: what fails a
// check is counted torn and never inserted, a commit word set far ahead
// skips that lease's sequences (counted overrun).
//
// Whatever the outcome, slot i's previous occupant is evicted from the
// memory: sequence q owns the slot now (FIFO eviction within the lease).
// After each step the lease lines (cursor and counts) and the ServerLine's
// ingest_cursor (their sum) are published (release stores): an actor may
// write q of its lease only while SequenceWritable(config, q, its cursor).
//
// Evict ahead: at each step, for each lease, every slot within the actor
// window ahead of the cursor whose header already names its new sequence
// (the actor has started writing it) has its occupant removed from the
// memory, so the sampler (same thread, after ingest) rarely draws a slot
// under rewrite; its seqlock and checksum catch the rest. A stalled actor's
// half-written slots are so evicted, not sampled and rejected again and
// again.
//
// Transitions: with a LayoutConfig spec that protocol::TransitionSpec::Parse
// accepts, a verified slot's payload must also pass
// protocol::CheckTransition (finite reward and observations, action below
// the spec's count, discount in [0, 1], lengths); one that fails is dropped
// like a torn slot (evicted, never inserted, so never sampled, forwarded as
// data or checkpointed) and counted invalid (per lease and in all). Without
// such a spec (none, or a free-form one) payloads are not checked. An
// invalid sequence is handled like any other, so it stays in its journal
// run: the learner placement READs it and drops it itself (learner_loop.h).
// transitions_invalid() is this process's count (not checkpointed).
//
// Priorities: an initial priority that is NaN, infinite or negative is
// taken as "no estimate" (the memory's current maximum), one above
// max_priority as max_priority; both are counted (priorities_bounded, per
// lease and in all).
//
// Forward journal: each run of sequences a step handled in one lease (split
// at the lease's wrap) is appended to the journal (protocol/leases.h), and
// ServerLine::journal_end is published after the step.
//
// The commit word is read with acquire, so a commit observed makes the slot
// bytes written before it visible; where a NIC or PCIe path places the
// commit WRITE before the slot's last bytes, a failed check is repeated for
// torn_recheck before the slot is declared torn (the lease waits meanwhile).
//
// Insert-to-ingest delay: with an `insert_delays` histogram, every inserted
// slot that carries an insert time records the seconds from it to the
// step's wall clock (read once per step that inserts), negative ones as 0.
//
// Sequence reservations (sequence_reservations.h, with a checkpoint
// directory): a lease's cursor c is published only while the persisted mark
// is >= c + L (L = lease slots); the next mark is asked for ahead of need and
// synced by the reservations' own thread (SequenceReservations::
// Publishable): a lease that reaches its synced mark first is published no
// further until the sync is in place (its actor waits; counted as a stall),
// and every lease is published again when one completes. UseReservations resumes every lease at or
// above the file's floor (whole laps past its committed prefix): sequences the previous server may
// have handed out are skipped.
//
// Frames stored once (config.frame_stack D > 0; protocol/frame_record.h):
// every verified slot must hold a frame record that
// protocol::CheckFrameRecord accepts under the spec (else invalid, as
// above). A record is kept in frames() (whether its slot holds its frame);
// it enters the memory only when it carries a transition whose every
// referenced record (its lease's sequence q - d) is held with its frame
// (else counted in frames_missing() and never sampled), registered under
// the oldest, with its needs (the distinct back distances) for the
// sampler. Whenever a slot is overwritten (evicted ahead, or its new
// sequence handled, whatever the outcome), the records it held are
// released and every transition that needed them leaves the memory
// (counted in frames_evicted()). Only inserted transitions count as
// inserted.
//
// Thread safety: none; one thread (the replay core) calls Step(). Step()
// never allocates and never blocks.

#ifndef DREPLAY_REPLAY_SERVER_INGEST_H_
#define DREPLAY_REPLAY_SERVER_INGEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/bucket_histogram.h"
#include "common/verification_log.h"
#include "protocol/frame_record.h"
#include "protocol/layout.h"
#include "protocol/transition_spec.h"
#include "replay/frame_table.h"
#include "replay/replay_memory.h"
#include "replay_server/checkpoint/sequence_reservations.h"
#include "replay_server/clock.h"
#include "replay_server/counters.h"

namespace dreplay::server {

struct IngestOptions {
  // Most sequences handled per Step() (bounds the latency of the other work
  // of the core loop).
  uint32_t max_per_step = 4096;
  // Most sequences of one lease handled per Step(), so that one busy lease
  // does not take a whole step from the others.
  uint32_t max_per_lease = 256;
  // How long a committed slot that fails its check is read again before it
  // is counted torn (see the file comment); 0: torn at once.
  absl::Duration torn_recheck = absl::Milliseconds(2);
  // Initial priorities above this are clamped to it (counted); > 0, finite.
  float max_priority = 1e6f;
  // Not owned; nullptr: off. Records every slot inserted or declared torn
  // (common/verification_log.h), for the chaos soak's checker.
  VerificationLog* verification_log = nullptr;

  absl::Status Validate() const;
};

class Ingest {
 public:
  // Pointers are not owned and must outlive the Ingest: `control`,
  // `leases` (the leases region: lease lines and journal), `slots`
  // (capacity * slot_size bytes), `commits` (capacity words) laid out for
  // `config`; `memory` (capacity == config.capacity), `counters`, `clock`;
  // `insert_delays` (nullptr: not measured).
  // REQUIRES: options.Validate() and config.Validate() are OK.
  Ingest(const protocol::LayoutConfig& config, const IngestOptions& options,
         protocol::ControlBlock* control, uint8_t* leases, const uint8_t* slots,
         const uint64_t* commits, replay::ReplayMemory* memory, ReplayCounters* counters,
         Clock* clock, BucketHistogram* insert_delays = nullptr);

  // Handles up to max_per_step sequences; returns how many (ingested, torn
  // or overrun). Publishes what moved.
  uint64_t Step();

  // Sequences handled over all leases (the sum of their cursors).
  uint64_t cursor() const { return handled_total_; }
  // The next sequence of `lease` to handle. REQUIRES: lease < leases.
  uint64_t lease_cursor(uint32_t lease) const { return leases_[lease].cursor; }
  uint64_t journal_end() const { return journal_end_; }
  // Verified slots whose payload failed the transition check, over all
  // leases, since this Ingest was made.
  uint64_t transitions_invalid() const { return invalid_total_; }
  // Whether payloads are checked (the config's spec parses).
  bool checks_transitions() const { return spec_.has_value(); }
  // Frames stored once (config.frame_stack > 0): the records held; nullptr
  // otherwise.
  const replay::FrameTable* frames() const { return frames_.get(); }
  // Records held as frames only (no transition), transitions whose
  // records were not all held, and transitions released because a record
  // they needed was overwritten, since this Ingest was made.
  uint64_t frame_only_records() const { return frame_only_records_; }
  uint64_t frames_missing() const { return frames_missing_; }
  uint64_t frames_evicted() const { return frames_evicted_; }

  // Restarts at `cursors` (one per lease; empty: all 0) and journal number
  // `journal_end` after a checkpoint restore, and publishes them. With
  // frames stored once, rebuilds the frame table from the restored slots
  // and keeps each restored transition only if every record it needs is
  // held with its frame (the others leave the memory, counted in
  // frames_evicted()).
  // REQUIRES: cursors is empty or has config.leases entries.
  void Restart(absl::Span<const uint64_t> cursors, uint64_t journal_end);

  // From now on, publishes cursors only under `reservations`' marks (not
  // owned, outlives the Ingest). Call once, after Restart and before any
  // peer sees the regions: ingests each lease's committed prefix (what a
  // restore kept), then moves its cursor up by whole laps of the lease to
  // at least its floor (counted in sequences_skipped(), laps in
  // skipped_laps()), reserves room for every lease (one sync) and
  // publishes. Error: the reservation could not be persisted (nothing is
  // published past it) or a mark is implausible (DataLoss).
  absl::Status UseReservations(SequenceReservations* reservations);
  // Sequences skipped, over all leases, by moving cursors up to the floors.
  uint64_t sequences_skipped() const { return sequences_skipped_; }
  // Laps lease l skipped in UseReservations (0 without it).
  uint32_t skipped_laps(uint32_t l) const { return skipped_laps_.empty() ? 0 : skipped_laps_[l]; }

 private:
  static constexpr uint64_t kNotWaiting = ~uint64_t{0};
  struct Lease {
    uint64_t cursor = 0;
    uint64_t evicted_through = 0;  // occupants of sequences below: evicted
    // The sequence whose failed check is being re-read (kNotWaiting: none)
    // and since when.
    uint64_t rechecking = kNotWaiting;
    absl::Time recheck_since;
    // Sequences below this were committed when the re-check began: they
    // share its window (a batch of bad commits costs one window).
    uint64_t recheck_end = 0;
    uint64_t inserted = 0, torn = 0, overrun = 0, bounded = 0, invalid = 0;
  };

  // Walks lease `l`; returns the sequences handled (at most `budget`).
  uint64_t StepLease(uint32_t l, uint64_t budget, int64_t* wall_now_ns);
  void EvictAhead(uint32_t l);
  // The ring index of the sequence after the one at `index` in lease `l`
  // (LeaseSlotIndex without its divisions, which cost more than the rest of
  // a slot's walk).
  uint64_t NextIndex(uint32_t l, uint64_t index) const {
    return index + 1 == (uint64_t{l} + 1) * lease_slots_ ? index + 1 - lease_slots_ : index + 1;
  }
  // True while committed sequence q, which failed its check, should be read
  // again rather than counted torn.
  bool Recheck(uint32_t l, uint64_t q);
  float BoundPriority(float raw, Lease* lease);
  // True when the verified slot at `slot` holds a transition the spec
  // accepts (always, without a spec).
  bool TransitionValid(const uint8_t* slot, const protocol::SlotHeader& header) const;
  // Frames stored once: the verified record q of lease l at `index`, whose
  // header is `header`. Holds it; true when it carries a transition to
  // insert (its records all held; registered and its needs set).
  bool AcceptRecord(uint32_t l, uint64_t index, uint64_t q, const uint8_t* slot,
                    const protocol::SlotHeader& header);
  // The record in the verified slot at `slot` (nullopt if the spec refuses
  // it).
  std::optional<protocol::FrameRecordView> CheckedRecord(const uint8_t* slot,
                                                         const protocol::SlotHeader& header) const;
  // Registers the transition of record q of lease l at `index` under the
  // records it needs; false (nothing registered) when one is not held with
  // its frame.
  bool DependOnRecords(uint32_t l, uint64_t index, uint64_t q,
                       const protocol::FrameRecordView& record);
  // After a restore: the frame table from the slots each lease holds.
  void RebuildFrames();
  // Slot `index` is being overwritten: releases what it held and removes
  // the transitions that needed it from the memory.
  void ReleaseFrames(uint64_t index);
  void AppendJournal(uint32_t l, uint64_t first, uint64_t count);
  void PublishLease(uint32_t l);
  void RecordInsertDelay(uint64_t insert_time_ns, int64_t* wall_now_ns);
  // Records the delays gathered by RecordInsertDelay (one step's wall time).
  void FlushInsertDelays(int64_t wall_now_ns);

  const protocol::LayoutConfig config_;
  const IngestOptions options_;
  const uint64_t lease_slots_;
  const uint64_t actor_window_;
  protocol::ControlBlock* const control_;
  uint8_t* const leases_region_;
  const uint8_t* const slots_;
  const uint64_t* const commits_;
  replay::ReplayMemory* const memory_;
  ReplayCounters* const counters_;
  Clock* const clock_;
  BucketHistogram* const insert_delays_;
  // The config's spec when it parses: payloads are checked against it.
  const std::optional<protocol::TransitionSpec> spec_;
  uint64_t invalid_total_ = 0;
  std::unique_ptr<replay::FrameTable> frames_;  // frame_stack > 0 only
  uint64_t frame_only_records_ = 0;
  uint64_t frames_missing_ = 0;
  uint64_t frames_evicted_ = 0;

  std::vector<Lease> leases_;
  uint32_t next_lease_ = 0;  // where the next step starts
  uint64_t handled_total_ = 0;
  uint64_t journal_end_ = 0;
  SequenceReservations* reservations_ = nullptr;
  uint64_t sequences_skipped_ = 0;
  std::vector<uint32_t> skipped_laps_;
  uint64_t sync_generation_ = 0;  // the reservations' last seen
  // Verified inserts gather in runs of consecutive indices and sequences,
  // each entering the memory in one InsertRun (the priority tree updated
  // once per level, not once per insert) when it ends or the lease's walk
  // does.
  replay::InsertRunBuffer run_;
  // Inserts of this step stamped delay_stamp_ns_, not yet recorded.
  uint64_t delay_stamp_ns_ = 0;
  uint64_t delay_count_ = 0;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_INGEST_H_
