// Copyright dreplay authors.
//
// verbs_bench_runner.h: tools/bench/verbs_bench's client loop, the measurement
// itself.
//
// The client keeps config.depth requests in flight, posting config.batch of
// them per PostSend (one doorbell), all signalled, and times each request
// from post to completion. It busy-polls, as perftest does. After
// config.warmup_s it counts the completions of config.duration_s; then it
// stops posting and waits for what is still in flight.
//
//   ASSIGN_OR_RETURN(RdmaResult r, RunBenchOps(qp, *mr, remote, config));
//   printf("%.0f ops/s, p99 %s\n", r.ops_per_s, FormatDuration(r.latency.Percentile(0.99)));
//
// Blocking; uses `qp` alone for the whole run (no other thread may).

#ifndef DREPLAY_TOOLS_BENCH_VERBS_BENCH_RUNNER_H_
#define DREPLAY_TOOLS_BENCH_VERBS_BENCH_RUNNER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/latency_histogram.h"
#include "tools/bench/verbs_bench_config.h"
#include "verbs/verbs.h"

namespace dreplay::tools {

// How long the client waits for its last requests after the measurement.
constexpr absl::Duration kBenchDrainTimeout = absl::Seconds(10);

struct RdmaResult {
  uint64_t ops = 0;    // requests completed within the measured window
  double seconds = 0;  // the window
  double ops_per_s = 0;
  double gbps = 0;           // ops_per_s x size bits / 1e9
  LatencyHistogram latency;  // post to completion, of those requests
  // The whole host's busy CPU seconds in the window (host_cpu.h); < 0:
  // not measured.
  double host_cpu_s = -1;
};

// Runs config.op between `local` (registered on qp's provider, at least
// config.region_bytes()) and `remote`. Request i uses slot i % depth of
// both regions. The first failed completion's status; DeadlineExceeded
// when requests are still in flight kBenchDrainTimeout after the window.
absl::StatusOr<RdmaResult> RunBenchOps(verbs::QueuePair* qp, const verbs::MemoryRegion& local,
                                       const verbs::RemoteRegion& remote,
                                       const VerbsBenchConfig& config);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_VERBS_BENCH_RUNNER_H_
