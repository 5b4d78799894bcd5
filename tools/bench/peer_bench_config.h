// Copyright dreplay authors.
//
// peer_bench_config.h: what one run of tools/bench/peer_bench measures (see the
// header of peer_bench.cc for the benchmark itself), the geometry every arm
// of one payload size shares, and what one arm reports.
//
//   PeerBenchOptions options;
//   options.systems = {PeerSystem::kRedis, PeerSystem::kDreplay};
//   options.payload_bytes = {128, 28672};
//   RETURN_IF_ERROR(options.Validate());
//   PeerCase c = CaseFor(options, 128);   // same capacity, prefill, ... in every arm
//
// Plain values; thread-compatible. The CPU functions change the calling
// thread's affinity (threads it starts later inherit it).

#ifndef DREPLAY_TOOLS_BENCH_PEER_BENCH_CONFIG_H_
#define DREPLAY_TOOLS_BENCH_PEER_BENCH_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dreplay::tools {

// kDreplayTcp: dreplay with --soft_transport=tcp (every operation over
// loopback TCP and the peer's NIC thread), for a side-by-side comparison
// with the same-host transport kDreplay uses.
enum class PeerSystem { kRedis, kGrpc, kDreplay, kDreplayTcp };

// "redis", "grpc", "dreplay", "dreplay-tcp".
const char* PeerSystemName(PeerSystem system);
// A comma-separated list of system names, in order, without repeats.
// InvalidArgument naming the bad entry.
absl::StatusOr<std::vector<PeerSystem>> ParsePeerSystems(absl::string_view text);

struct PeerBenchOptions {
  std::vector<PeerSystem> systems;
  std::vector<uint32_t> payload_bytes;  // bytes per transition, >= 8
  int writers = 4;                      // inserting threads
  uint32_t batch_size = 256;            // transitions per sampled batch
  // Transitions per writer insert (one message, one command, one Flush);
  // 0: AutoInsertBatch(payload_bytes).
  uint32_t insert_batch = 0;
  // Capacity of every arm's memory: the largest power of two (at most 2^18)
  // whose slots fit in this many bytes (replay_bench's rule).
  uint64_t ring_bytes = uint64_t{256} << 20;
  absl::Duration warmup = absl::Seconds(1);    // run before measuring
  absl::Duration duration = absl::Seconds(3);  // measured, the same in every arm
  double alpha = 0.6;                          // prioritization exponent
  uint64_t seed = 1;
  std::string redis_server = "redis-server";  // the binary the Redis arm starts

  // OK, or InvalidArgument naming the bad field and value.
  absl::Status Validate() const;
};

// What every arm of one payload size shares.
struct PeerCase {
  uint32_t payload_bytes = 0;
  int writers = 0;
  uint32_t batch_size = 0;
  uint32_t insert_batch = 0;
  uint64_t capacity = 0;  // slots of the prioritized memory, a power of two
  uint64_t prefill = 0;   // transitions in the memory before the clock starts
  absl::Duration warmup;
  absl::Duration duration;
  double alpha = 0;
  uint64_t seed = 0;
};

// min(256, max(1, 1 MiB / payload_bytes)): 256 for 128 B, 36 for 28 KiB.
uint32_t AutoInsertBatch(uint32_t payload_bytes);
// The case of `payload_bytes` under `options`. REQUIRES: options valid.
PeerCase CaseFor(const PeerBenchOptions& options, uint32_t payload_bytes);

// What one arm measured over its window.
struct PeerCaseResult {
  uint32_t payload_bytes = 0;
  PeerSystem system = PeerSystem::kDreplay;
  double seconds = 0;  // the window, as measured
  // CPU time the arm used over the window: this process's, and for Redis
  // also the redis-server's.
  double cpu_seconds = 0;
  double inserted_per_s = 0;  // transitions that entered the prioritized memory
  double sampled_per_s = 0;   // transitions in the batches the reader received
  double total_per_s() const { return inserted_per_s + sampled_per_s; }
  // Inserted plus sampled per CPU second used (0 without CPU time).
  double total_per_cpu_s() const {
    return cpu_seconds > 0 ? total_per_s() * seconds / cpu_seconds : 0;
  }
};

// The CPUs the calling thread may run on, ascending.
std::vector<int> AllowedCpus();
// Restricts the calling thread (and every thread or process it starts from
// now on) to `cpus`. InvalidArgument for an empty list or a CPU out of
// range; the OS's error otherwise.
absl::Status PinToCpus(const std::vector<int>& cpus);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_PEER_BENCH_CONFIG_H_
