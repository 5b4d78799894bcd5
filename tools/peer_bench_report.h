// Copyright dreplay authors.
//
// peer_bench_report.h: what tools/peer_bench prints: a table, or with
// --json one object
//
//   {"config": {"writers", "batch_size", "warmup_s", "duration_s", "cpus",
//               "sizes": [{"payload_bytes", "insert_batch", "capacity",
//                          "prefill"}]},
//    "cases": [{"payload_bytes", "system", "seconds", "inserted_per_s",
//               "sampled_per_s", "total_per_s"}],
//    "ratios": {"<payload_bytes>": {"dreplay_over_redis", "dreplay_over_grpc"}}}
//
// A ratio divides dreplay's inserted + sampled per second by the other
// system's, per payload size; it is present when both ran and the other's
// total is above zero.
//
// Pure; thread-safe.

#ifndef DREPLAY_TOOLS_PEER_BENCH_REPORT_H_
#define DREPLAY_TOOLS_PEER_BENCH_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/peer_bench_config.h"

namespace dreplay::tools {

struct PeerRatios {
  uint32_t payload_bytes = 0;
  std::optional<double> over_redis;  // dreplay total / redis total
  std::optional<double> over_grpc;   // dreplay total / grpc total
};

// One entry per payload size with a dreplay case, in the order of `cases`.
std::vector<PeerRatios> PeerRatiosOf(const std::vector<PeerCaseResult>& cases);

// The table (or with `json` the object), newline-terminated. `cpus`: the
// CPUs every arm ran on.
std::string FormatPeerBenchReport(const PeerBenchOptions& options, const std::vector<int>& cpus,
                                  const std::vector<PeerCaseResult>& cases, bool json);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_PEER_BENCH_REPORT_H_
