// Copyright dreplay authors.
//
// replay_core.h: the buffer node's replay loop.
//
// ReplayCore owns the replay memory (the sum tree), Ingest, PriorityUpdates
// and Sampler over a ReplayRegions it does not own, and does their work one
// step at a time:
//
//   Step():  0. apply a learner connection the accept thread posted
//               (NoteLearnerConnected): forget the learner's holdings,
//               dropping outstanding batches that reference them
//            1. ingest committed slots (Ingest::Step), unless the
//               samples-per-insert limiter blocks inserts (block_inserts)
//            2. consume the learner's priority updates, oldest batch first,
//               releasing their staging slots (or releasing a batch without
//               an update after update_timeout, if one is set)
//            3. stage batches while staging slots are free and the rate
//               limiter allows
//            4. publish the stats region (after work, or every
//               stats_interval)
//
// Run(stop) repeats Step() until `stop` is set, backing off when idle:
// spin_steps empty steps, then sleeps doubling from min_sleep to max_sleep,
// but no longer than max_sleep_awaiting_updates while staged batches wait
// for the learner's priority updates (the next one is due within a round
// trip of the learner's link, and each microsecond slept after it arrives
// delays the batch staged in its place).
// ReplayCore owns no thread: the server binary runs Run() on a thread it owns
// and joins; tests call Step() directly.
//
//   ASSIGN_OR_RETURN(auto regions, ReplayRegions::Create(config));
//   ASSIGN_OR_RETURN(auto core, ReplayCore::Create(regions.get(), options));
//   std::atomic<bool> stop{false};
//   std::thread loop([&] { core->Run(stop); });
//   ...
//   stop = true;
//   loop.join();
//
// The learner placement (the buffer node only forwards) can reuse all
// of this locally: keep a ReplayRegions of the same layout as a mirror, copy
// each forwarded slot range and its commit words into it at the same indices,
// advance the mirror's tail (FetchAdd in shared_words.h) past them, and run a
// ReplayCore over the mirror: ingest verifies and inserts, the sampler stages
// batches in the local staging ring, and the local mailbox takes the new
// priorities. Or use a ReplayMemory directly (replay_memory.h).
//
// Epochs: a fresh core is epoch 1; RestoreCheckpoint() makes it the saved
// epoch + 1, StartEpochAfter() skips epochs a crashed server may have run.
// Batch numbers restart at 0 in every epoch. Each core also has an
// incarnation, random unless the options fix it, published in the
// ServerLine and carried by every staged batch: epoch numbers can repeat
// (every core without a checkpoint starts at 1), the incarnation does not,
// and a priority update written for a batch of another incarnation is
// rejected. Checkpoints save the incarnation that wrote them.
//
// The policy (the rate limiter's options) is written into the control
// block's PolicyLine when the core is created, before any peer sees it.
//
// Delays (delays.h): ingest records each slot's insert-to-ingest delay, and
// step 2 the staging delay of each batch whose update it consumed.
//
// Checkpoints (checkpoint.h) do not stop the core: BeginCheckpoint() records
// the O(leases) part of a cut, each ContinueCheckpoint() copies a chunk of
// checkpoint_chunk_slots entries between steps (incremental_cut.h), and
// another thread writes the slots while the core goes on (the server's
// CheckpointWriter). Each of these steps is timed into checkpoint_pauses().
//
// Thread safety: not thread-safe, except NoteLearnerConnected(),
// WaitLearnerNoted() and delays() (their snapshots), which any thread may
// call, and checkpoint_pauses()' Take(). Step(), Run(), the checkpoint
// calls, SaveCheckpoint() and
// RestoreCheckpoint() must not run concurrently. Accessors are for the same
// thread.

#ifndef DREPLAY_REPLAY_SERVER_REPLAY_CORE_H_
#define DREPLAY_REPLAY_SERVER_REPLAY_CORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "replay/replay_memory.h"
#include "replay_server/checkpoint/checkpoint.h"
#include "replay_server/checkpoint/checkpoint_pauses.h"
#include "replay_server/checkpoint/file_system.h"
#include "replay_server/checkpoint/incremental_cut.h"
#include "replay_server/clock.h"
#include "replay_server/counters.h"
#include "replay_server/delays.h"
#include "replay_server/ingest.h"
#include "replay_server/learner_cache.h"
#include "replay_server/priority_updates.h"
#include "replay_server/regions.h"
#include "replay_server/sampler.h"

namespace dreplay::server {

struct ReplayCoreOptions {
  // memory.capacity: 0 (taken from the layout) or equal to config.capacity.
  replay::ReplayMemoryOptions memory;
  IngestOptions ingest;
  SamplerOptions sampler;
  // Release a staged batch without a priority update after this long
  // (infinite: wait for the learner forever, the pure mailbox flow control).
  absl::Duration update_timeout = absl::InfiniteDuration();
  // Most batches staged per Step(). >= 1.
  uint32_t max_batches_per_step = 4;
  // The stats region is refreshed after every step that did work, and at
  // least this often otherwise.
  absl::Duration stats_interval = absl::Milliseconds(100);
  // This server process's incarnation (protocol::ServerLine::incarnation);
  // 0: drawn at random (never 0) when the core is created.
  uint64_t incarnation = 0;
  // Entries a checkpoint cut copies per ContinueCheckpoint() (>= 1): 64 Ki
  // entries are 1 MiB of the cut, well under a millisecond of copying.
  uint64_t checkpoint_chunk_slots = uint64_t{1} << 16;
  // Idle back-off of Run().
  uint32_t spin_steps = 64;
  absl::Duration min_sleep = absl::Microseconds(20);
  absl::Duration max_sleep = absl::Milliseconds(1);
  // The idle sleep while staged batches await their updates: at most
  // max_sleep, at least min_sleep. 100 us, a 10 km round trip: with 1 ms
  // the learner over such a link sampled at 0.85 of its rate without it.
  absl::Duration max_sleep_awaiting_updates = absl::Microseconds(100);

  // OK, or InvalidArgument naming the bad field (memory.capacity is checked
  // against the layout by Create).
  absl::Status Validate() const;
};

struct StepResult {
  uint64_t ingested = 0;          // sequences handled by ingest
  uint64_t batches_released = 0;  // updates consumed (or timed out)
  uint64_t batches_staged = 0;
  bool did_work() const { return ingested + batches_released + batches_staged > 0; }
};

class ReplayCore {
 public:
  // `regions` is not owned and must outlive the core; `clock` likewise
  // (nullptr: Clock::Real()). InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<ReplayCore>> Create(ReplayRegions* regions,
                                                            const ReplayCoreOptions& options,
                                                            Clock* clock = nullptr);

  // One pass of the loop. Never blocks.
  StepResult Step();
  // Steps until `stop` is true (checked between steps). Blocks.
  void Run(const std::atomic<bool>& stop);

  // The cut of a checkpoint (checkpoint.h, incremental_cut.h), in steps
  // between Step()s. BeginCheckpoint records the lease cursors and holders,
  // the counters, epoch, incarnation and journal end; each
  // ContinueCheckpoint copies the next checkpoint_chunk_slots entries and
  // returns the cut after the last chunk (CheckpointCut::pause: its longest
  // step). Hand the cut to WriteCheckpoint on another thread
  // (CheckpointWriter), then call CheckpointWritten() here when it
  // succeeded. `spare`: buffers to reuse (CheckpointWriter::TakeSpare).
  // With a verification log, BeginCheckpoint writes its K record and the
  // cut carries the log to the write (D and C records). Each call is timed
  // into checkpoint_pauses() as one step.
  // REQUIRES: BeginCheckpoint only when !checkpoint_cut_in_progress(),
  // ContinueCheckpoint only when it is.
  void BeginCheckpoint(CheckpointCut spare = CheckpointCut());
  std::optional<CheckpointCut> ContinueCheckpoint();
  bool checkpoint_cut_in_progress() const { return cut_.active(); }
  // The whole cut at once (tests, the final checkpoint of a stopped server).
  CheckpointCut CutCheckpoint(CheckpointCut spare = CheckpointCut());
  // Counts a checkpoint written from a cut (checkpoints_written) and
  // publishes the stats.
  void CheckpointWritten();
  // Cut, write and count in one call, on this thread (tests, the final
  // checkpoint of a stopped server). `stats` may be null.
  absl::Status SaveCheckpoint(const std::string& path, CheckpointWriteStats* stats = nullptr);
  // Loads a checkpoint, then starts epoch saved + 1: every lease's ingest
  // cursor, holder (actor id, grants; a lease held then is published as
  // released, for LeaseTable to adopt) and the journal's end are restored,
  // the params region holds the saved parameters, staging ring and mailbox
  // are cleared, counters are restored. REQUIRES: no peer uses the regions yet. On error
  // (see ReadCheckpoint) the memory is empty and the epoch unchanged. `fs`:
  // the file system to read it from (null: the process's POSIX one).
  absl::Status RestoreCheckpoint(const std::string& path, FileSystem* fs = nullptr);
  // Makes the epoch at least `epoch` + 1: a server that started after the
  // restored checkpoint (and crashed before the next) may have run `epoch`,
  // and no epoch runs twice. REQUIRES: no peer uses the regions yet.
  void StartEpochAfter(uint64_t epoch);

  // With a checkpoint directory, after RestoreCheckpoint and before any peer
  // sees the regions: publishes lease cursors only under `reservations`'
  // marks (not owned, outlives the core; Ingest::UseReservations), moving
  // each up to its floor first. Error: the marks could not be persisted.
  absl::Status UseSequenceReservations(SequenceReservations* reservations);
  // Sequences skipped by moving restored cursors up to the floors, and the
  // laps lease l skipped (RegionDirectory::resume_skipped_laps).
  uint64_t sequences_skipped_after_restart() const { return ingest_->sequences_skipped(); }
  uint32_t resume_skipped_laps(uint32_t l) const { return ingest_->skipped_laps(l); }
  // Every lease's ingest cursor (the exact marks of a clean stop).
  std::vector<uint64_t> lease_cursors() const;

  // Writes the stats region now.
  void PublishStats();

  // Thread-safe (the server's accept thread). A learner is connecting, with
  // or without the transfer-once cache (Hello::learner_cache). The next
  // Step() forgets the previous learner's holdings (learner_cache_resets),
  // releases outstanding batches without an update if any of them holds a
  // reference (counted as updates_timed_out: the new learner could not
  // resolve them), and stages references from then on only if
  // `learner_cache`. Returns the event's generation, for WaitLearnerNoted.
  uint64_t NoteLearnerConnected(bool learner_cache) { return learner_events_.Post(learner_cache); }
  // Thread-safe. Waits until a Step() has applied event `generation`, or
  // `timeout`; true if applied. Answer the learner's handshake only then.
  bool WaitLearnerNoted(uint64_t generation, absl::Duration timeout) const {
    return learner_events_.WaitAcked(generation, timeout);
  }

  const ReplayCounters& counters() const { return counters_; }
  // Any thread may take Snapshot()s of these while the core runs.
  const ReplayDelays& delays() const { return delays_; }
  // Checkpoint steps and core loop gaps during checkpoints; the loop's owner
  // records the gaps and its own checkpoint steps here.
  const CheckpointPauses& checkpoint_pauses() const { return pauses_; }
  CheckpointPauses* mutable_checkpoint_pauses() { return &pauses_; }
  replay::ReplayMemory& memory() { return *memory_; }
  const replay::ReplayMemory& memory() const { return *memory_; }
  uint64_t epoch() const { return epoch_; }
  uint64_t incarnation() const { return incarnation_; }
  // The incarnation that wrote the checkpoint restored last (0: none, or a
  // file older than format version 3).
  uint64_t restored_incarnation() const { return restored_incarnation_; }
  uint64_t ingest_cursor() const { return ingest_->cursor(); }
  const Sampler& sampler() const { return *sampler_; }

 private:
  ReplayCore(ReplayRegions* regions, const ReplayCoreOptions& options, Clock* clock,
             std::unique_ptr<replay::ReplayMemory> memory);
  uint64_t ReleaseBatches(absl::Time now);
  // Step 0: applies a posted learner connection; returns batches released.
  uint64_t ApplyLearnerEvent();
  // Step 1: ingest unless inserts are blocked; returns sequences handled.
  uint64_t IngestStep();

  ReplayRegions* const regions_;
  const ReplayCoreOptions options_;
  Clock* const clock_;
  const uint64_t incarnation_;
  std::unique_ptr<replay::ReplayMemory> memory_;
  ReplayCounters counters_;
  ReplayDelays delays_;
  CheckpointPauses pauses_;
  std::unique_ptr<Ingest> ingest_;
  std::unique_ptr<PriorityUpdates> updates_;
  std::unique_ptr<Sampler> sampler_;
  uint64_t epoch_ = 1;
  uint64_t restored_incarnation_ = 0;
  uint64_t cuts_ = 0;   // cuts taken: the verification log's cut ids
  IncrementalCut cut_;  // after memory_
  absl::Time cut_began_;
  absl::Duration cut_pause_;  // the longest step of the cut in progress
  uint32_t cut_steps_ = 0;
  uint64_t stats_generation_ = 0;
  absl::Time last_stats_ = absl::InfinitePast();
  absl::Time inserts_blocked_since_ = absl::InfinitePast();  // accounted up to
  LearnerEvents learner_events_;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_REPLAY_CORE_H_
