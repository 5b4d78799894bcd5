// Copyright dreplay authors.
//
// verbs_bench_report.h: what tools/bench/verbs_bench prints, as text or as one
// JSON object (--json).
//
// JSON keys: provider, mode, op, size, depth, batch, link, duration_s,
// max_rd_atomic, max_inline_data, ops, ops_per_s, gbps, lat_p50_us,
// lat_p99_us, lat_mean_us; with a TCP baseline also tcp {ops_per_s, gbps}
// and ratio_vs_tcp (RDMA Gb/s / TCP Gb/s), and on an emulated link with a
// bandwidth ratio_vs_min_link_tcp (RDMA Gb/s / min(link, TCP) Gb/s: the
// fair reference, since neither can beat the link).
//
// Pure; thread-safe.

#ifndef DREPLAY_TOOLS_BENCH_VERBS_BENCH_REPORT_H_
#define DREPLAY_TOOLS_BENCH_VERBS_BENCH_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "tools/bench/tcp_baseline.h"
#include "tools/bench/verbs_bench_config.h"
#include "tools/bench/verbs_bench_runner.h"

namespace dreplay::tools {

struct VerbsBenchReport {
  std::string provider;
  std::string mode;  // "loopback" or "remote HOST:PORT"
  RdmaResult rdma;
  int max_rd_atomic = 0;
  uint32_t max_inline_data = 0;
  std::optional<TcpStreamResult> tcp;  // with --baseline=tcp
};

// The report in config.json's form, newline-terminated.
std::string FormatVerbsBenchReport(const VerbsBenchConfig& config, const VerbsBenchReport& report);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_VERBS_BENCH_REPORT_H_
