// Copyright dreplay authors.
//
// replay_bench_config.h: what one run of tools/bench/replay_bench measures (see
// the header of replay_bench.cc for the benchmark itself), and the sizes it
// chooses when a flag leaves them open.
//
// Plain values; thread-compatible.

#ifndef DREPLAY_TOOLS_BENCH_REPLAY_BENCH_CONFIG_H_
#define DREPLAY_TOOLS_BENCH_REPLAY_BENCH_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "protocol/layout.h"
#include "verbs/verbs.h"

namespace dreplay::tools {

struct ReplayBenchConfig {
  verbs::ProviderOptions provider;  // of every participant
  int actors = 0;                   // live actors (writers)
  bool shared_actor_provider = false;
  // Actors that connect, WRITE one batch of slots and never commit it,
  // holding their connection and lease until the run ends (ids after the
  // live actors).
  int stalled_actors = 0;
  // 0: one thread (and session) per actor; else this many threads, each
  // with one provider, driving its share of the actors' writers round-robin.
  int actor_threads = 0;
  // With actor_threads: batches each writer keeps in flight (Submit/Poll);
  // 0: each writer's Flush blocks, the writers taking turns.
  uint32_t writer_in_flight = 0;
  // ... and each thread's writers together at most this many (0: no bound).
  uint32_t thread_in_flight = 0;
  // Connections set up at once during setup: with actor_threads by helper
  // threads of the actor threads (at least one per actor thread), otherwise
  // by the actors' own threads.
  int connect_in_flight = 1;
  uint32_t payload_bytes = 0;  // per transition
  // Extra bytes per transition payload, stored and transferred like the
  // rest (a larger observation at the same logic).
  uint32_t payload_pad_bytes = 0;
  uint32_t max_batch = 0;  // transitions per actor insert
  protocol::LayoutConfig layout;
  bool learner = true;
  bool verify_slots = false;
  // The learner keeps the transitions it receives and asks the server to
  // stage references to those it holds (transfer-once cache).
  bool learner_cache = false;
  // The server's samples-per-insert target (0: no limit) and its slack, in
  // sampled transitions.
  double samples_per_insert = 0;
  double spi_error_buffer = 0;
  // With samples_per_insert: ingest (and so the actors) pauses while
  // inserts run ahead of the ratio.
  bool spi_block_actors = true;
  absl::Duration reader_retry;      // the learner's back-off, first
  absl::Duration reader_retry_max;  // and longest
  absl::Duration core_max_sleep;    // the server's replay core
  uint32_t core_spin_steps = 0;
  std::string link_spec;        // as given, for the report
  verbs::LinkModel link;        // the learner's connection
  verbs::LinkModel actor_link;  // each actor's connection
  uint64_t prefill = 0;         // transitions inserted before the clock starts
  absl::Duration duration;      // measured
  absl::Duration warmup;        // run before measuring
  int read_probes = 0;          // isolated staging-slot READs after the run
  double alpha = 0;
  uint64_t seed = 0;
  // Set: the clients run against the `replay_bench --server` at
  // remote_host:remote_port (same flags) instead of a server in this process.
  std::string remote_host;
  uint16_t remote_port = 0;
  bool tcp_baseline = false;
  bool nolink_baseline = false;
  int rounds = 1;
  bool json = false;  // one JSON object instead of text

  // Bytes of every transition payload: payload_bytes + payload_pad_bytes.
  uint32_t transition_bytes() const { return payload_bytes + payload_pad_bytes; }
};

// The slot that holds a `payload_bytes` transition: header and payload,
// aligned.
uint32_t SlotSizeFor(uint32_t payload_bytes);
// The largest power of two, at most 2^18 and at least 2, whose ring of
// `slot_size`-byte slots fits in `ring_bytes`.
uint64_t AutoCapacity(uint32_t slot_size, uint64_t ring_bytes);
// min(capacity / 2, 65536).
uint64_t AutoPrefill(uint64_t capacity);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_REPLAY_BENCH_CONFIG_H_
