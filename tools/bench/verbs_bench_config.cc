// Copyright dreplay authors.

#include "tools/bench/verbs_bench_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dreplay::tools {

verbs::QueuePairOptions VerbsBenchConfig::QueuePairOptions() const {
  verbs::QueuePairOptions options;
  options.max_send_wr = std::max(depth, options.max_send_wr);
  options.link = link;
  options.rnr_retry = rnr_retry;
  return options;
}

absl::Status VerbsBenchConfig::Validate() const {
  if (size == 0 || size > kBenchMaxSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("--size=", size, ": must be in [1, ", kBenchMaxSize, "]"));
  }
  if (atomic() && size != kBenchAtomicSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("--size=", size, ": atomics act on 8-byte words; use --size=8"));
  }
  if (depth < 1 || depth > kBenchMaxDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("--depth=", depth, ": must be in [1, ", kBenchMaxDepth, "]"));
  }
  if (batch < 1 || batch > depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch=", batch, ": must be in [1, --depth=", depth,
                     "] (a batch is posted only when it fits in the outstanding window)"));
  }
  if (region_bytes() > kBenchMaxRegionBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--size x --depth = ", region_bytes(),
                                                   " bytes: more than the ", kBenchMaxRegionBytes,
                                                   "-byte limit of the benchmark's regions"));
  }
  if (!(duration_s > 0 && duration_s <= kBenchMaxDurationS)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--duration_s=", duration_s, ": must be in (0, ", kBenchMaxDurationS, "]"));
  }
  if (!(warmup_s >= 0 && warmup_s <= kBenchMaxDurationS)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--warmup_s=", warmup_s, ": must be in [0, ", kBenchMaxDurationS, "]"));
  }
  return provider.Validate();
}

absl::StatusOr<verbs::Opcode> ParseBenchOp(const std::string& name) {
  if (name == "write") return verbs::Opcode::kWrite;
  if (name == "read") return verbs::Opcode::kRead;
  if (name == "fetch_add") return verbs::Opcode::kFetchAdd;
  if (name == "compare_swap") return verbs::Opcode::kCompareSwap;
  return absl::InvalidArgumentError(
      absl::StrCat("--op=", name, ": expected write, read, fetch_add or compare_swap"));
}

}  // namespace dreplay::tools
