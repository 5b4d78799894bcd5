// Copyright dreplay authors.
//
// peer_bench_report.h: what tools/bench/peer_bench prints: a table, or with
// --json one object
//
//   {"config": {"writers", "batch_size", "warmup_s", "duration_s", "rounds",
//               "cpus", "sizes": [{"payload_bytes", "insert_batch",
//               "capacity", "prefill"}]},
//    "cases": [{"payload_bytes", "system", "seconds", "cpu_seconds",
//               "inserted_per_s", "sampled_per_s", "total_per_s",
//               "total_per_cpu_s"}],
//    "ratios": {"<payload_bytes>": {"dreplay_over_redis", "dreplay_over_grpc",
//               "dreplay_over_redis_per_cpu", "dreplay_over_grpc_per_cpu",
//               "dreplay_tcp_over_redis", ...  (the same for dreplay-tcp)}},
//    "copy": {"<payload_bytes>": {"bytes_per_s", "blocks_per_s"}},
//                                               (with copy references)
//    "tcp": {"<payload_bytes>": {"message_bytes", "bytes_per_s",
//            "transitions_per_s"}},             (with socket references)
//    "rounds": [[case, ...], ...]}            (only with more than one round)
//
// With several rounds a case is the round of median total (the lower
// middle) for its size and system. A ratio divides dreplay's (or
// dreplay-tcp's) inserted + sampled per second by the other system's (the _per_cpu ones: per CPU
// second the arm used), per payload size; it is present when both ran and
// the other's figure is above zero.
//
// Pure; thread-safe.

#ifndef DREPLAY_TOOLS_BENCH_PEER_BENCH_REPORT_H_
#define DREPLAY_TOOLS_BENCH_PEER_BENCH_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/peer_bench_config.h"
#include "tools/bench/peer_bench_copy.h"

namespace dreplay::tools {

struct PeerRatios {
  uint32_t payload_bytes = 0;
  PeerSystem system = PeerSystem::kDreplay;  // or kDreplayTcp
  std::optional<double> over_redis;          // its total / redis total
  std::optional<double> over_grpc;           // its total / grpc total
  std::optional<double> over_redis_per_cpu;
  std::optional<double> over_grpc_per_cpu;
};

// Per (payload size, system), in order of first appearance, the result of
// median total over the rounds in `results`.
std::vector<PeerCaseResult> PeerMedianCases(const std::vector<PeerCaseResult>& results);

// One entry per dreplay or dreplay-tcp case, in the order of `cases`
// (one result per size and system, e.g. PeerMedianCases').
std::vector<PeerRatios> PeerRatiosOf(const std::vector<PeerCaseResult>& cases);

// The table (or with `json` the object) of `rounds` (each: the results of
// one round), newline-terminated. `cpus`: the CPUs every arm ran on.
// `copies`: the memory reference per payload size (peer_bench_copy.h), if
// measured; the table then also says what share of it each arm's counted
// transitions were. `tcps`: the socket reference per payload size, if
// measured, likewise.
std::string FormatPeerBenchReport(const PeerBenchOptions& options, const std::vector<int>& cpus,
                                  const std::vector<std::vector<PeerCaseResult>>& rounds, bool json,
                                  const std::vector<PeerCopyReference>& copies = {},
                                  const std::vector<PeerTcpReference>& tcps = {});

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_PEER_BENCH_REPORT_H_
