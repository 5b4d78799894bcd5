// Copyright dreplay authors.
//
// counters.h: the replay core's event counters.
//
// Plain integers owned by the replay core's thread; ReplayCore publishes them
// into the stats region (StatsBlock) and checkpoints them. The field order is
// part of the checkpoint format (append only; bump kCheckpointVersion
// otherwise).

#ifndef DREPLAY_REPLAY_SERVER_COUNTERS_H_
#define DREPLAY_REPLAY_SERVER_COUNTERS_H_

#include <cstdint>

namespace dreplay::server {

struct ReplayCounters {
  // Ingest.
  uint64_t inserted = 0;
  // Word 1 of the checkpoint format, once the slots abandoned by a shared
  // tail; always 0 since actor leases. Kept so that checkpoints keep their
  // format; nothing reads or publishes it.
  uint64_t unused_word1 = 0;
  uint64_t overrun_slots = 0;  // lapped by a later sequence before ingest
  uint64_t torn_slots = 0;     // committed but failed length/sequence/checksum
  // Sampling.
  uint64_t sampled = 0;  // transitions staged
  uint64_t batches_staged = 0;
  uint64_t sample_copy_rejects = 0;  // slot overwritten around the copy
  uint64_t staging_stalls = 0;       // steps where a batch waited for its update
  // Priority updates.
  uint64_t batches_released = 0;  // staging slots freed (update consumed or timed out)
  uint64_t priority_updates_applied = 0;
  uint64_t priority_updates_stale = 0;
  uint64_t priority_updates_invalid = 0;
  uint64_t mailbox_rejects = 0;    // bad checksum / header / count
  uint64_t updates_timed_out = 0;  // staging slots freed without an update
  // Checkpoints.
  uint64_t checkpoints_written = 0;
  uint64_t restore_dropped = 0;  // slots that failed verification on restore
  // --- Checkpoint format version 2 appends the fields below. ---
  // Samples-per-insert rate limiter (SamplerOptions::rate_limiter).
  uint64_t limiter_sample_waits = 0;    // steps a batch could not be staged: limiter
  uint64_t limiter_sample_wait_ns = 0;  // time batches waited for the limiter
  uint64_t limiter_insert_wait_ns = 0;  // time ingest paused (block_inserts)
  // Transfer-once learner cache (learner_cache.h).
  uint64_t staged_payloads = 0;       // entries staged with their copied slot
  uint64_t staged_cached = 0;         // entries staged as references
  uint64_t learner_cache_resets = 0;  // learner holdings forgotten (new learner, new epoch)
  // --- Checkpoint format version 4 appends the fields below. ---
  // Initial priorities ingest clamped to max_priority or took as "no
  // estimate" (NaN, infinite, negative), and priority updates clamped to
  // max_priority.
  uint64_t priorities_bounded = 0;
};
inline constexpr int kNumReplayCounters = 23;
// The counters a version 1 checkpoint holds (the first ones, in order).
inline constexpr int kNumReplayCountersV1 = 16;
static_assert(sizeof(ReplayCounters) == kNumReplayCounters * sizeof(uint64_t),
              "ReplayCounters is checkpointed as an array of u64");

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_COUNTERS_H_
