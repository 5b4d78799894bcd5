// Copyright dreplay authors.
//
// replay_bench_run.h: one tools/bench/replay_bench run (an in-process server, the
// actor and learner threads of replay_bench_clients.h, a measured window)
// and one round (the run, then its baselines, back to back).
//
//   ASSIGN_OR_RETURN(ReplayBenchRound round, RunReplayBenchRound(config));
//   printf("%.0f inserted/s\n", round.main.inserted_per_s);
//
// Blocking; a run owns its server and threads and joins them before it
// returns.

#ifndef DREPLAY_TOOLS_BENCH_REPLAY_BENCH_RUN_H_
#define DREPLAY_TOOLS_BENCH_REPLAY_BENCH_RUN_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "client/link_bytes.h"
#include "common/latency_histogram.h"
#include "protocol/layout.h"
#include "tools/bench/replay_bench_config.h"
#include "tools/bench/tcp_baseline.h"

namespace dreplay::tools {

// What one run measured over its window.
struct ReplayRunResult {
  // From the clients' start until every one is connected and running.
  double connect_seconds = 0;
  double seconds = 0;
  double cpu_seconds = 0;      // this process's CPU time over the window
  double inserted_per_s = 0;   // server ingest
  double committed_per_s = 0;  // actors
  double bytes_in_per_s = 0;   // actors' WRITEs (slots + commit words)
  double insert_gbps = 0;      // committed slot bytes, Gb/s
  double sampled_per_s = 0;    // transitions the learner received
  double batches_per_s = 0;
  double bytes_out_per_s = 0;       // the learner's READs
  LatencyHistogram insert_latency;  // one Flush of max_batch transitions
  LatencyHistogram batch_wait;      // the learner's Next()
  LatencyHistogram batch_read;      // one staging-slot READ, alone
  protocol::StatsBlock server{};    // at the end of the window
  uint64_t writer_reconnects = 0;
  uint64_t reader_torn = 0;
  uint64_t reader_not_staged = 0;
  double samples_per_insert = 0;  // achieved over the window: sampled / inserted
  // The learner's session over the window (as the learner saw it open and
  // close, between two batches), and what its reader fetched in it;
  // "distinct" counts transitions fetched for the first time.
  client::LinkBytes link_bytes;
  uint64_t transitions_fetched = 0;
  uint64_t distinct_transitions_fetched = 0;
};

// InvalidArgument when a link is emulated on a provider other than "soft";
// the first failure of the server or of a client (named), otherwise.
absl::StatusOr<ReplayRunResult> RunReplayBenchOnce(const ReplayBenchConfig& config);

// One round: the configured run, then its baselines, so that each ratio
// compares measurements taken under the same background load.
struct ReplayBenchRound {
  ReplayRunResult main;
  std::optional<ReplayRunResult> nolink;  // config.nolink_baseline
  std::optional<TcpStreamResult> tcp;     // config.tcp_baseline: slot-sized messages
};

absl::StatusOr<ReplayBenchRound> RunReplayBenchRound(const ReplayBenchConfig& config);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_REPLAY_BENCH_RUN_H_
