// Copyright dreplay authors.
//
// verbs_bench_config.h: what one run of tools/bench/verbs_bench measures, checked
// once (see the header of verbs_bench.cc for the benchmark itself).
//
//   VerbsBenchConfig config;
//   ASSIGN_OR_RETURN(config.op, ParseBenchOp("read"));
//   RETURN_IF_ERROR(config.Validate());
//
// Plain values; thread-compatible.

#ifndef DREPLAY_TOOLS_BENCH_VERBS_BENCH_CONFIG_H_
#define DREPLAY_TOOLS_BENCH_VERBS_BENCH_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verbs/verbs.h"

namespace dreplay::tools {

// Atomics act on one 8-byte word.
constexpr uint64_t kBenchAtomicSize = 8;
// Limits of the flags, so that one run stays within a host's means.
constexpr int kBenchMaxDepth = 4096;
constexpr uint64_t kBenchMaxSize = uint64_t{64} << 20;
constexpr uint64_t kBenchMaxRegionBytes = uint64_t{1} << 30;
constexpr double kBenchMaxDurationS = 3600;

struct VerbsBenchConfig {
  verbs::Opcode op = verbs::Opcode::kWrite;
  uint64_t size = 65536;           // bytes per request (atomics: kBenchAtomicSize)
  int depth = 16;                  // requests kept outstanding
  int batch = 1;                   // requests per PostSend (one doorbell)
  double duration_s = 5;           // measured
  double warmup_s = 0.5;           // run before measuring
  std::string link_spec = "none";  // as given, for the report
  verbs::LinkModel link;           // parsed from link_spec
  verbs::ProviderOptions provider;
  int rnr_retry = verbs::kDefaultRnrRetry;  // of both queue pairs (--rnr_retry)
  bool json = false;                        // one JSON object instead of text
  bool tcp_baseline = false;                // also measure a TCP stream

  bool atomic() const {
    return op == verbs::Opcode::kFetchAdd || op == verbs::Opcode::kCompareSwap;
  }
  // Each side's region: one request's bytes per slot of the window.
  uint64_t region_bytes() const { return size * depth; }
  // The queue pair of either side: room for the whole window.
  verbs::QueuePairOptions QueuePairOptions() const;

  // InvalidArgument naming the flag and its bad value.
  absl::Status Validate() const;
};

// "write", "read", "fetch_add" or "compare_swap"; InvalidArgument otherwise.
absl::StatusOr<verbs::Opcode> ParseBenchOp(const std::string& name);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_VERBS_BENCH_CONFIG_H_
