// Copyright dreplay authors.
//
// sampler.h: pre-samples batches into the staging ring.
//
// StageOne() stages batch n = next_batch() into staging slot n % depth:
//
//   1. one stratified proportional draw per entry from the replay memory,
//      the whole batch at once (ReplayMemory::SampleStrata: the tree
//      descents overlap their cache misses), then every drawn slot and commit
//      word is prefetched;
//   2. an entry the connected learner already holds (transfer-once, see
//      learner_cache.h) is staged as a reference: its slot index with
//      kEntryCachedBit, no copied slot (its commit word must still say the
//      drawn sequence, as for a copy). Every other drawn slot is copied into
//      the staging slot, packed in entry order from StagingPayloadsOffset,
//      with a seqlock check:
//      commit word read (acquire) before the copy and again after it, both
//      equal to CommitValue(sequence), and the copy's header sequence and
//      checksum verified. A slot overwritten around the copy (an actor
//      reusing it: FIFO eviction racing the sample) fails one of these; it is
//      removed from the memory, counted as a copy reject, and the entry is
//      drawn again (up to max_draws_per_entry times, then left out).
//      How often: an actor may write up to ActorWindow sequences past its
//      lease's ingest cursor, and each lands on a slot the memory still
//      holds (its older sequence, evicted only when ingest reaches the new
//      one). With the default window (the whole lease) and actors ahead
//      of ingest, that can be any slot of the lease, and rejects are
//      common (a 1,024-actor bench run with a learner: about 550 k; with
//      --actor_window at half the lease, about 4 k). They cost a redraw,
//      never a wrong transition;
//   3. the entries (each with the p^alpha it was drawn with, from which the
//      learner computes its importance-sampling weight with beta:
//      protocol::StagedWeights), BatchHeader (batch number, epoch, count,
//      N, beta, payload_count, used_bytes) and the batch checksum are
//      written, then the commit line (used_bytes, then BatchCommitValue(n),
//      release store) last, and the control block's batches_staged is
//      published.
//
// Replay ratio: a batch is staged only when the samples-per-insert rate
// limiter (replay/rate_limiter.h, SamplerOptions::rate_limiter) allows it:
// inserted counts the transitions ingest accepted (Inserted()), sampled the
// transitions staged. A step that could stage but for the limiter counts a
// limiter_sample_wait, and the time from the first such step to the batch
// being staged is added to limiter_sample_wait_ns. InsertsBlocked() tells the
// replay core to pause ingest (block_inserts only).
//
// Flow control: batch n may use staging slot n % depth only once batch
// n - depth has been released (ReleaseOldest(), after the learner's priority
// update for it was consumed, see priority_updates.h). So at most
// staging_depth batches are outstanding, and a batch the learner may still be
// READing is never overwritten. The replay core drives this.
//
// Forwarding (options.forward not kForwardOff; the hybrid placement, whose
// learner keeps its own replay): each transition is staged at most once.
// A batch is staged only when batch_size transitions not yet forwarded are
// there, and the rate limiter does not apply. kForwardPriority and
// kForwardUniform draw a batch as above (the memory's mode makes the draw
// proportional or uniform) and remove each copied entry from the memory, so
// it is never drawn again; kForwardFifo takes the oldest of the newest
// forward_queue transitions ingest handled (forward_queue.h), dropping
// older ones, and skips those overwritten meanwhile (both counted in
// forward_dropped()). Their entries carry p^alpha 1 and beta is 0 (weights
// of 1); without frames no entry is a reference.
//
// Frames stored once (config.frame_stack > 0, UseFrames()): after the
// transitions, each record their stacks need (replay::FrameTable::Needs)
// that the batch does not hold yet is staged once, as a reference when the
// learner holds it, else copied with the same seqlock check, with p^alpha 0
// (protocol/staging.h). A record that fails its copy (being overwritten)
// removes the transition that needed it from the memory and the batch is
// drawn again at the next step. Forwarding with frames (the hybrid
// placement) stages records the same way: a forwarded transition's own
// record crosses once, and with a learner that keeps what it receives
// (ResetLearnerCache(true)) every record does: one the learner holds is
// left out, or staged as a reference when it is itself a transition
// forwarded later. A record that fails its copy there leaves its
// transition in the batch without it (the learner cannot assemble it and
// leaves it out; counted in forward_dropped()), since the batch's
// transitions have left the memory already.
//
// Link compression (options.link_codec): the copied slots are gathered in
// a private buffer, then compressed into the staging slot's payload area
// when that makes them smaller (BatchHeader::packed_bytes); the batch
// checksum covers what is staged. packed_in() and packed_out() count the
// bytes before and after.
//
// Crossing percentiles: one staged batch per options.crossing_period has
// the rank keys of its copied entries (taken as each is copied, before a
// forwarded entry leaves the memory) ranked against the memory's
// (crossing_percentiles.h), in every mode, so the placements compare.
//
// Every store into the staging ring is a word-wise atomic store (the learner
// READs it concurrently); every read of the slot ring is an atomic load.
//
// Thread safety: none; one thread (the replay core) owns a Sampler. Nothing
// allocates after construction (the holdings, one word per slot, are
// allocated with it).

#ifndef DREPLAY_REPLAY_SERVER_SAMPLER_H_
#define DREPLAY_REPLAY_SERVER_SAMPLER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/frame_codec.h"
#include "common/verification_log.h"
#include "protocol/layout.h"
#include "replay/frame_table.h"
#include "replay/rate_limiter.h"
#include "replay/replay_memory.h"
#include "replay_server/clock.h"
#include "replay_server/counters.h"
#include "replay_server/crossing_percentiles.h"
#include "replay_server/forward_queue.h"
#include "replay_server/learner_cache.h"

namespace dreplay::server {

enum class SlotCopy : uint8_t {
  kOk,
  kCommitChangedBefore,  // the slot no longer holds the sequence
  kCommitChangedAfter,   // a new commit landed during the copy
  kBadSlot,              // the copy fails its length, sequence or checksum
};

// Copies `slot` (config.slot_size bytes of the slot ring) to `destination`
// (8-byte aligned shared memory only this thread writes, e.g. a staging
// payload position) if the slot holds `sequence` throughout the copy:
// `commit_word` == CommitValue(sequence) before (acquire) and after the copy,
// and the copy verifies (VerifySlot). `during_copy`, if not null, runs after
// the first half of the words are copied: a simulation point for tests
// (an actor overwriting the slot mid-copy); production passes nullptr.
SlotCopy CopySlotConsistent(const protocol::LayoutConfig& config, const uint8_t* slot,
                            const uint64_t* commit_word, uint64_t sequence, uint8_t* destination,
                            const std::function<void()>* during_copy = nullptr);

struct SamplerOptions {
  // Beta as a function of the number of batches staged (over the server's
  // lifetime, checkpoints included).
  replay::BetaSchedule beta;
  // The samples-per-insert rate limiter: samples_per_insert (0: off),
  // min_size_to_sample (no batch is staged until the memory holds this many
  // valid transitions, the DQN "learning starts"; >= 1), error_buffer (must
  // cover one batch when samples_per_insert is set; checked by
  // ReplayCore::Create against the layout's batch_size) and block_inserts.
  replay::RateLimiterOptions rate_limiter;
  // Draws per batch entry before the entry is left out (copy rejects). >= 1.
  uint32_t max_draws_per_entry = 4;
  // Stage each transition once, for a learner that keeps its own replay
  // (see the file comment); kForwardUniform needs a kUniform memory and
  // every mode but kForwardOff a limiter without samples_per_insert or
  // block_inserts (checked by ReplayCore::Create).
  protocol::ForwardMode forward = protocol::ForwardMode::kForwardOff;
  // kForwardFifo: the queue's bound, in transitions (>= 1).
  uint64_t forward_queue = 4096;
  // Compress each staged batch's copied slots into one block on the link
  // (protocol/staging.h, BatchHeader::packed_bytes); a batch that would not
  // shrink is staged as it is. nullopt (or raw): never.
  std::optional<CodecOptions> link_codec;
  // Crossing percentiles (crossing_percentiles.h): at most one staged batch
  // is measured per this period (>= 0; 0 measures every batch).
  absl::Duration crossing_period = absl::Milliseconds(50);
  // Not owned; nullptr: off. An X record for every transition forwarded
  // (common/verification_log.h), for the chaos soak's checker.
  VerificationLog* verification_log = nullptr;

  absl::Status Validate() const;
};

class Sampler {
 public:
  // Pointers are not owned and must outlive the Sampler. `control`, `slots`,
  // `commits`, `staging` are the regions laid out for `config`;
  // `leases_region` too, needed only for kForwardFifo (its journal).
  // REQUIRES: config and options are valid, memory->capacity() ==
  // config.capacity.
  Sampler(const protocol::LayoutConfig& config, const SamplerOptions& options,
          protocol::ControlBlock* control, const uint8_t* slots, const uint64_t* commits,
          uint8_t* staging, replay::ReplayMemory* memory, ReplayCounters* counters, Clock* clock,
          const uint8_t* leases_region = nullptr);

  // Stages batch next_batch() if its staging slot is free and the rate
  // limiter allows a batch (which needs min_size_to_sample transitions in
  // memory). Returns true if a batch was staged. A batch whose every entry
  // was rejected is not staged.
  bool StageOne();

  // Frames stored once: `frames` (ingest's table, not owned, outlives the
  // Sampler) says which records each transition needs. REQUIRES:
  // config.frame_stack > 0, not forwarding.
  void UseFrames(const replay::FrameTable* frames);

  // Ingest accepted `n` more transitions (the limiter's inserted count).
  void Inserted(uint64_t n) { limiter_.Inserted(n); }
  // True while ingest must pause (rate_limiter.block_inserts only).
  bool InsertsBlocked() const { return limiter_.InsertsBlocked(memory_->size()); }
  // Continues the limiter's counts from `inserted` and `sampled` (restored
  // counters).
  void ResetLimiter(uint64_t inserted, uint64_t sampled) { limiter_.Reset(inserted, sampled); }
  const replay::RateLimiter& limiter() const { return limiter_; }

  // Transfer-once. A new learner connected, with (`learner_cache`) or
  // without the cache: forgets every holding (counts learner_cache_resets),
  // and stages references from now on only if `learner_cache`.
  void ResetLearnerCache(bool learner_cache);
  // True when an outstanding batch holds a reference (kEntryCachedBit).
  bool OutstandingReferences() const;
  bool learner_cache() const { return learner_cache_; }
  const LearnerHoldings& holdings() const { return holdings_; }

  bool forwarding() const { return options_.forward != protocol::ForwardMode::kForwardOff; }
  // Transitions the FIFO forwarder left behind (dropped from its queue, or
  // overwritten in it) in this process.
  uint64_t forward_dropped() const { return forward_dropped_; }
  // Where the copied (link-crossing) entries of the batches measured sit
  // in the memory's priority distribution, in this process.
  const CrossingPercentiles& crossing() const { return crossing_; }

  // Link compression: copied-slot bytes of the batches staged, and what
  // the payload areas held (equal without a codec), in this process.
  uint64_t packed_in() const { return packed_in_; }
  uint64_t packed_out() const { return packed_out_; }
  // The CPU time (this thread's) spent compressing.
  uint64_t pack_cpu_ns() const { return pack_cpu_ns_; }

  // Batches staged in this epoch (the next batch number).
  uint64_t next_batch() const { return next_batch_; }
  // Batches released in this epoch (their staging slots are free again).
  uint64_t released() const { return released_; }
  bool HasOutstanding() const { return released_ < next_batch_; }
  // The oldest batch not yet released. REQUIRES: HasOutstanding().
  uint64_t oldest_outstanding() const { return released_; }
  // When the oldest outstanding batch was staged. REQUIRES: HasOutstanding().
  absl::Time oldest_staged_at() const { return staged_at_[released_ % staged_at_.size()]; }
  // Frees the staging slot of the oldest outstanding batch and publishes
  // batches_released. `learner_received`: the batch's priority update was
  // consumed; false when released by timeout or dropped, and then the
  // entries it marked held when it was staged (cache on, staged for this
  // learner) are forgotten. REQUIRES: HasOutstanding().
  void ReleaseOldest(bool learner_received);

  // Starts a new epoch: batch numbers restart at 0, every staging slot is
  // free and the learner's holdings are forgotten (the caller counts the
  // reset). Batches carry `epoch` and `incarnation` (the server process's,
  // see ServerLine). Publishes both in the control block, and the counts.
  void Restart(uint64_t epoch, uint64_t incarnation);
  uint64_t epoch() const { return epoch_; }

 private:
  // The draws of a sampled (or priority/uniform forwarded) batch into
  // items_ and `payloads`; returns the entries kept, *payload_count the
  // slots copied.
  uint32_t DrawBatch(uint8_t* payloads, uint32_t* payload_count);
  // The FIFO forwarder's batch, as DrawBatch.
  uint32_t TakeQueued(uint8_t* payloads);
  // A forwarded entry leaves the memory (and is logged).
  void RemoveForwarded(uint64_t index, uint64_t sequence);
  // Frames stored once: stages the records the `count` transitions in
  // items_ need after them, copying from payload position *payload_count;
  // returns how many, or -1 when a copy failed (the batch is abandoned).
  int64_t StageRecords(uint8_t* payloads, uint32_t count, uint32_t* payload_count);
  // Stages the payload_count copied slots gathered in unpacked_ into the
  // payload area `area`: compressed when that shrinks them (returns the
  // block's bytes), else as they are (returns 0; also without a codec,
  // where they were copied there directly).
  uint32_t Pack(uint8_t* area, uint32_t payload_count);
  // Writes entries, header, checksum and commit line of batch next_batch()
  // with `count` transitions (items_) and `record_count` records
  // (record_items_), and counts it.
  void CommitBatch(uint32_t count, uint32_t record_count, uint32_t payload_count, double beta);

  const protocol::LayoutConfig config_;
  const SamplerOptions options_;
  protocol::ControlBlock* const control_;
  const uint8_t* const slots_;
  const uint64_t* const commits_;
  uint8_t* const staging_;
  replay::ReplayMemory* const memory_;
  ReplayCounters* const counters_;
  Clock* const clock_;

  uint64_t epoch_ = 0;
  uint64_t incarnation_ = 0;
  uint64_t next_batch_ = 0;
  uint64_t released_ = 0;
  bool stalled_ = false;
  uint64_t forward_dropped_ = 0;
  CrossingPercentiles crossing_;
  bool measuring_ = false;               // this batch's copied entries go to crossing_
  std::unique_ptr<ForwardQueue> queue_;  // kForwardFifo only
  replay::RateLimiter limiter_;
  absl::Time limiter_wait_since_ = absl::InfinitePast();  // first limited step
  std::vector<absl::Time> staged_at_;                     // per staging slot
  std::vector<replay::SampledItem> items_;                // batch_size
  std::vector<uint8_t> cached_;                           // entry capacity: entry is a reference
  std::vector<protocol::BatchEntry> entries_;             // entry capacity
  // Frames stored once: ingest's table, the records staged after the
  // transitions, and per slot the attempt that last put it in a batch.
  const replay::FrameTable* frames_ = nullptr;
  // Link compression: the codec, the copied slots gathered for it, the
  // compressed block, and the bytes counted.
  std::unique_ptr<FrameCodec> codec_;
  std::vector<uint8_t> unpacked_;
  std::vector<uint8_t> packed_;
  uint64_t packed_in_ = 0;
  uint64_t packed_out_ = 0;
  uint64_t pack_cpu_ns_ = 0;
  std::vector<replay::SampledItem> record_items_;
  std::vector<uint64_t> in_batch_;
  std::vector<uint64_t> in_batch_sequence_;  // the sequence marked in in_batch_
  uint64_t attempt_ = 0;

  // Transfer-once. cache_generation_ changes with every reset; a batch marks
  // holdings on release only if it was staged in the current generation
  // (a predecessor's late update must not mark what this learner never got).
  LearnerHoldings holdings_;
  bool learner_cache_ = false;
  uint64_t cache_generation_ = 0;
  // Per staging slot: the staged entries (private copy), their count, the
  // generation staged in, whether any entry is a reference.
  std::vector<protocol::BatchEntry> staged_entries_;  // staging_depth * entry capacity
  std::vector<uint32_t> staged_count_;
  std::vector<uint64_t> staged_generation_;
  std::vector<uint8_t> staged_references_;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_SAMPLER_H_
