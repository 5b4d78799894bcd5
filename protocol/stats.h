// Copyright dreplay authors.
//
// stats.h: the stats region (the server's counters, READ by monitors and
// the learner) and the actors region (one line of episode statistics per
// actor).
//
// Part of the replay service's wire contract (protocol/README.md): shared by
// the server and its clients through RDMA-registered memory. Nothing here
// depends on verbs/. All integers are little-endian; floats are IEEE 754.

#ifndef DREPLAY_PROTOCOL_STATS_H_
#define DREPLAY_PROTOCOL_STATS_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "protocol/config.h"

namespace dreplay::protocol {

// ---------------------------------------------------------------------------
// Stats region. Counters are totals since the start of the epoch's process
// (restored from a checkpoint); a monitor computes rates from two READs and
// server_time_ns. The replay core writes lines [0, 384) with a generation
// pair: generation_begin is stored first and generation_end last, so a
// snapshot READ with begin == end is consistent. The connection line is
// written by the server's connection handling, outside that protocol.

struct alignas(kCacheLine) StatsBlock {
  // Replay core.
  uint64_t generation_begin;
  uint64_t server_time_ns;  // steady clock of the server
  uint64_t epoch;
  uint64_t ingest_cursor;
  uint64_t size;  // valid transitions in memory
  uint64_t capacity;
  uint64_t inserted;       // transitions accepted by ingest
  uint64_t overrun_slots;  // lapped before ingest
  uint64_t torn_slots;     // committed but failed sequence/checksum
  uint64_t sampled;        // transitions staged
  uint64_t batches_staged;
  uint64_t batches_released;     // priority updates consumed
  uint64_t sample_copy_rejects;  // overwritten during the staging copy
  uint64_t priority_updates_applied;
  uint64_t priority_updates_stale;    // slot no longer holds that sequence
  uint64_t priority_updates_invalid;  // bad index or priority value
  uint64_t mailbox_rejects;           // bad checksum / header in an update
  uint64_t staging_stalls;            // steps a batch waited for its update
  double priority_sum;                // sum of p^alpha over memory
  double priority_max;                // max of p^alpha over memory
  uint64_t checkpoints_written;
  uint64_t updates_timed_out;  // staging slots freed without an update
  uint64_t restore_dropped;    // slots failing verification on restore
  // Samples-per-insert rate limiter (PolicyLine).
  uint64_t limiter_sample_waits;    // steps the sampler could not stage: limiter
  uint64_t limiter_sample_wait_ns;  // time batches waited for the limiter
  uint64_t limiter_insert_wait_ns;  // time ingest paused (spi_block_actors)
  // Transfer-once learner cache.
  uint64_t staged_payloads;       // entries staged with their copied slot
  uint64_t staged_cached;         // entries staged as references (cached)
  uint64_t learner_cache_resets;  // the learner's holdings forgotten (reconnect)
  // Initial priorities ingest clamped or took as "no estimate" (layout 4).
  uint64_t priorities_bounded;
  // Committed, verified slots whose payload failed the transition check
  // (transition_check.h), dropped; this process's count.
  uint64_t transitions_invalid;
  // Forwarding (PolicyLine::forward, layout 13): transitions left behind
  // unforwarded, dropped from the front of the FIFO queue or overwritten
  // in it before their turn.
  uint64_t forward_dropped;
  // Crossing percentiles (layout 14; replay_server/crossing_percentiles.h):
  // the sum of the percentiles, within the memory's priority distribution,
  // of the copied entries of the batches measured, and their count. This
  // process's totals (not checkpointed).
  double crossing_percentile_sum;
  uint64_t crossing_percentile_count;
  // Frames stored once (layout 15, LayoutConfig::frame_stack): records
  // held as frames only (no transition), transitions not inserted because
  // a record they refer to was not held, and transitions that left the
  // memory because a record they needed was overwritten. This process's.
  uint64_t frame_only_records;
  uint64_t frames_missing;
  uint64_t frames_evicted;
  // Link compression (replay_server --link_codec): copied-slot bytes of the
  // staged batches, what their payload areas held (less when packed), and
  // the core thread's CPU time compressing. This process's.
  uint64_t link_packed_in_bytes;
  uint64_t link_packed_out_bytes;
  uint64_t link_pack_cpu_ns;
  uint64_t reserved[7];
  uint64_t generation_end;
  // Connection handling (own line, other writer).
  uint64_t actors_connected;
  uint64_t learners_connected;
  uint64_t monitors_connected;
  uint64_t connections_total;
  uint64_t connections_rejected;
  uint64_t reserved_conn[3];
};
static_assert(sizeof(StatsBlock) == 448, "StatsBlock is a wire structure");
static_assert(offsetof(StatsBlock, generation_end) == 376, "");
static_assert(offsetof(StatsBlock, actors_connected) == 384, "");
static_assert(offsetof(StatsBlock, priority_sum) == 144, "");
static_assert(offsetof(StatsBlock, limiter_sample_waits) == 184, "");
static_assert(offsetof(StatsBlock, transitions_invalid) == 240, "");
static_assert(offsetof(StatsBlock, forward_dropped) == 248, "");
static_assert(offsetof(StatsBlock, crossing_percentile_sum) == 256, "");
static_assert(offsetof(StatsBlock, crossing_percentile_count) == 264, "");
static_assert(offsetof(StatsBlock, frames_evicted) == 288, "");
static_assert(offsetof(StatsBlock, link_pack_cpu_ns) == 312, "");

// The mean of the measured crossing percentiles (0 to 100) of `stats`;
// nullopt before any was measured.
std::optional<double> CrossingPercentileMean(const StatsBlock& stats);

// ---------------------------------------------------------------------------
// Actors region: config.max_actors ActorLine, line a for actor id a. Each
// actor publishes its episode statistics by WRITEing its whole line (one
// 64-byte WRITE; the server registers every line on its own, so an actor's
// key covers its line only); the learner and monitors READ the region. A
// WRITE is not placed in order, so a reader accepts a line only when
// CheckActorLine() verifies its checksum, and READs again otherwise. The
// server never writes the region (it is zero-filled at start and not
// checkpointed).

struct ActorLine {
  // XXH3-64 (kChecksumSeed) of bytes [8, 64) of the line; see SealActorLine.
  uint64_t checksum;
  uint32_t actor_id;
  uint32_t returns_count;  // episode returns summed in returns_sum
  uint64_t env_steps;      // environment steps since the actor started
  uint64_t episodes;       // episodes finished since the actor started
  double returns_sum;      // sum of the last returns_count episode returns
  double last_return;      // return of the last finished episode
  uint64_t updated_ns;     // actor's wall clock (ns since the Unix epoch)
  uint64_t transitions;    // transitions the actor has committed
};
static_assert(sizeof(ActorLine) == kCacheLine, "ActorLine is a wire structure");
static_assert(offsetof(ActorLine, actor_id) == 8, "");
static_assert(offsetof(ActorLine, env_steps) == 16, "");
static_assert(offsetof(ActorLine, returns_sum) == 32, "");
static_assert(offsetof(ActorLine, updated_ns) == 48, "");
static_assert(offsetof(ActorLine, transitions) == 56, "");

inline uint64_t ActorLineOffset(uint32_t actor_id) {
  return uint64_t{actor_id} * sizeof(ActorLine);
}
// Sets line->checksum from the other fields.
void SealActorLine(ActorLine* line);
// OK when `line` (a READ image) is a whole line of actor `actor_id`;
// NotFound when it was never written (all zero); DataLoss when the checksum
// or the actor id does not match (a torn READ: READ again).
absl::Status CheckActorLine(const ActorLine& line, uint32_t actor_id);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_STATS_H_
