// Copyright dreplay authors.

#include "tools/bench/peer_bench_config.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/bench/replay_bench_config.h"

namespace dreplay::tools {
namespace {

constexpr uint32_t kMinPayload = 8;             // a transition's tag
constexpr uint32_t kMaxPayload = 1 << 20;       // 1 MiB
constexpr uint32_t kMaxInsertBatch = 256;       // AutoInsertBatch's cap
constexpr uint64_t kAutoInsertBytes = 1 << 20;  // bytes per auto insert
constexpr uint64_t kMaxPrefill = 65536;         // replay_bench's AutoPrefill cap

absl::Status Bad(const char* field, const std::string& value, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, "=", value, ": ", why));
}

}  // namespace

const char* PeerSystemName(PeerSystem system) {
  switch (system) {
    case PeerSystem::kRedis:
      return "redis";
    case PeerSystem::kGrpc:
      return "grpc";
    case PeerSystem::kDreplay:
      return "dreplay";
    case PeerSystem::kDreplayTcp:
      return "dreplay-tcp";
  }
  return "?";
}

absl::StatusOr<std::vector<PeerSystem>> ParsePeerSystems(absl::string_view text) {
  std::vector<PeerSystem> out;
  for (absl::string_view name : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    PeerSystem s;
    if (name == "redis") {
      s = PeerSystem::kRedis;
    } else if (name == "grpc") {
      s = PeerSystem::kGrpc;
    } else if (name == "dreplay") {
      s = PeerSystem::kDreplay;
    } else if (name == "dreplay-tcp") {
      s = PeerSystem::kDreplayTcp;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown system \"", name, "\" (expected redis, grpc, dreplay, dreplay-tcp)"));
    }
    if (std::find(out.begin(), out.end(), s) != out.end()) {
      return absl::InvalidArgumentError(absl::StrCat("system \"", name, "\" given twice"));
    }
    out.push_back(s);
  }
  return out;
}

absl::Status PeerBenchOptions::Validate() const {
  if (systems.empty()) return Bad("systems", "", "needs at least one system");
  if (payload_bytes.empty()) return Bad("payload_bytes", "", "needs at least one size");
  for (uint32_t p : payload_bytes) {
    if (p < kMinPayload || p > kMaxPayload) {
      return Bad("payload_bytes", std::to_string(p),
                 absl::StrCat("must be in [", kMinPayload, ", ", kMaxPayload, "]"));
    }
  }
  if (writers < 1 || writers > 64) {
    return Bad("writers", std::to_string(writers), "must be in [1, 64]");
  }
  if (batch_size < 1 || batch_size > 4096) {
    return Bad("batch_size", std::to_string(batch_size), "must be in [1, 4096]");
  }
  if (insert_batch > 4096) {
    return Bad("insert_batch", std::to_string(insert_batch), "must be in [0, 4096]");
  }
  if (ring_bytes < (uint64_t{1} << 20)) {
    return Bad("ring_bytes", std::to_string(ring_bytes), "must be at least 1 MiB");
  }
  for (uint32_t p : payload_bytes) {
    const PeerCase c = CaseFor(*this, p);
    const uint64_t per_writer = std::min<uint64_t>(c.capacity / 4, c.capacity / c.writers);
    if (c.capacity < 4 * uint64_t{c.batch_size} || per_writer < c.insert_batch) {
      return Bad(
          "ring_bytes", std::to_string(ring_bytes),
          absl::StrCat("gives ", c.capacity, " slots of ", p,
                       " B: too few for 4 batches and, per writer, one insert of ", c.insert_batch,
                       " (a writer may run min(capacity / 4, capacity / "
                       "writers) ahead)"));
    }
  }
  if (!(warmup >= absl::ZeroDuration())) {
    return Bad("warmup", absl::FormatDuration(warmup), "must be >= 0");
  }
  if (!(duration > absl::ZeroDuration())) {
    return Bad("duration", absl::FormatDuration(duration), "must be > 0");
  }
  if (!(alpha >= 0 && alpha <= 1)) return Bad("alpha", std::to_string(alpha), "must be in [0, 1]");
  if (redis_server.empty()) return Bad("redis_server", "", "must name a binary");
  return absl::OkStatus();
}

uint32_t AutoInsertBatch(uint32_t payload_bytes) {
  const uint64_t n = kAutoInsertBytes / std::max<uint32_t>(payload_bytes, 1);
  return static_cast<uint32_t>(std::clamp<uint64_t>(n, 1, kMaxInsertBatch));
}

PeerCase CaseFor(const PeerBenchOptions& o, uint32_t payload_bytes) {
  PeerCase c;
  c.payload_bytes = payload_bytes;
  c.writers = o.writers;
  c.batch_size = o.batch_size;
  c.insert_batch = o.insert_batch != 0 ? o.insert_batch : AutoInsertBatch(payload_bytes);
  c.capacity = AutoCapacity(SlotSizeFor(payload_bytes), o.ring_bytes);
  c.prefill = std::min(c.capacity / 2, kMaxPrefill);
  c.warmup = o.warmup;
  c.duration = o.duration;
  c.alpha = o.alpha;
  c.seed = o.seed;
  return c;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) cpus.push_back(i);
  }
  return cpus;
}

absl::Status PinToCpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::InvalidArgumentError("cpus: the list is empty");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat("cpus: CPU ", cpu, " is out of range"));
    }
    CPU_SET(cpu, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpus=", absl::StrJoin(cpus, ","), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::tools
