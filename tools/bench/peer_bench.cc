// Copyright dreplay authors.
//
// peer_bench: the actor-to-buffer-to-learner workload of distributed
// prioritized replay through three systems, in one run on one machine:
//
//   redis    Redis with hiredis, the transport of open-source Ape-X
//            implementations; the tool starts redis-server on loopback (a
//            free port, a temporary directory, no persistence) and stops it
//            at the end. See peer_bench_redis.h for the exact design.
//   grpc     gRPC streaming (libgrpc++) in the style of Reverb: a server
//            holding a replay::ReplayMemory, writers streaming inserts, the
//            reader streaming sample requests with priority updates. See
//            peer_bench_grpc.h.
//   dreplay  replay_server in this process on the soft provider over
//            loopback, actors with ExperienceWriter, the learner with
//            BatchReader and PriorityWriter. See peer_bench_dreplay.h.
//
//   peer_bench                                  # 128 B and 28 KiB, all three
//   peer_bench --payload_bytes=128 --systems=redis,dreplay --duration_s=5
//   peer_bench --json                           # one JSON object
//
// The workload, the same in every arm: --writers threads insert transitions
// of --payload_bytes (--insert_batch per message, command or flush; by
// default 1 MiB worth, at most 256), with an initial priority each; one
// reader thread samples batches of --batch_size by priority (proportional,
// alpha --alpha, over a memory of the same capacity in every arm: the
// largest power of two up to 2^18 whose slots fit in --ring_mib) and writes
// a new priority back for each transition it received. Each arm's memory
// holds the same prefill (min(capacity / 2, 65536) transitions, inserted
// through the arm's own writers) before the clock starts.
//
// Like with like:
//   - one process, one arm at a time (sizes outer, then --rounds, then the
//     --systems order; with several rounds each case is its median round,
//     so that a burst of background load does not decide a ratio);
//   - the same CPU budget: the whole process, and the redis-server it
//     starts, is pinned to the same CPUs (--cpus; by default the CPUs the
//     tool was started with). Each arm uses the client threads above plus
//     the threads its system needs (redis-server's; gRPC's server and
//     completion threads; dreplay's replay core and one soft-provider NIC
//     thread per participant), all inside that budget;
//   - the same window: every client connects and the prefill is in, then
//     --warmup_s passes, then counters are read at the two ends of
//     --duration_s;
//   - the same counting: "inserted" is transitions that entered the
//     prioritized memory (Redis: the learner's index; gRPC and dreplay: the
//     server's), "sampled" is transitions whose payload the reader received
//     in a batch.
// On a shared host the arms see whatever else runs at their turn; repeat
// the run, and compare ratios from one run, not figures across runs.
//
// Output: a table of inserted/s, sampled/s, their sum, the CPU seconds the
// arm used over its window (this process's, plus redis-server's for Redis)
// and the sum per CPU second, per case; per size the ratios dreplay / redis
// and dreplay / grpc of the sums (and of the sums per CPU second, which
// depend less on what else the host runs); per size, each arm's sum as a
// share of two references on the same CPUs (peer_bench_copy.h): one thread
// copying the payloads once (--copy_reference) and one loopback TCP stream
// (--tcp_reference); with --json the object peer_bench_report.h describes.
//
// This file holds the flags; the parts live beside it: peer_bench_config
// (options and the geometry of a case), peer_bench_window (the measured
// window), peer_bench_redis / _redis_server, peer_bench_grpc (with
// peer_bench.proto), peer_bench_dreplay and peer_bench_report.

#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/binary_main.h"
#include "common/flag_values.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "tools/bench/peer_bench_config.h"
#include "tools/bench/peer_bench_copy.h"
#include "tools/bench/peer_bench_dreplay.h"
#include "tools/bench/peer_bench_grpc.h"
#include "tools/bench/peer_bench_redis.h"
#include "tools/bench/peer_bench_report.h"

DEFINE_string(systems, "redis,grpc,dreplay",
              "comma-separated systems to run, in this order: redis, grpc, dreplay, dreplay-tcp "
              "(dreplay with --soft_transport=tcp: no same-host shared mapping)");
DEFINE_string(payload_bytes, "128,28672", "comma-separated transition sizes in bytes (>= 8)");
DEFINE_int32(writers, 4, "inserting threads in every arm");
DEFINE_int32(batch_size, 256, "transitions per sampled batch");
DEFINE_int32(insert_batch, 0,
             "transitions per writer insert (0: 1 MiB worth, at most 256: 256 for 128 B, 36 for "
             "28 KiB)");
DEFINE_int64(ring_mib, 256,
             "every arm's memory holds the largest power of two of transitions (at most 2^18) "
             "whose slots fit in this many MiB");
DEFINE_double(warmup_s, 1, "seconds each arm runs before its window");
DEFINE_double(duration_s, 3, "seconds of each arm's measured window");
DEFINE_double(alpha, 0.6, "prioritization exponent of every arm's memory");
DEFINE_int64(seed, 1, "seed of the samplers and of the new priorities");
DEFINE_int32(rounds, 1,
             "rounds per size; each runs every system once, in --systems order, and the report "
             "gives each case's round of median total");
DEFINE_string(cpus, "",
              "comma-separated CPU ids every arm (and redis-server) runs on (empty: the CPUs "
              "the tool was started with)");
DEFINE_string(redis_server, "redis-server", "the redis-server binary (a path or a name in PATH)");
DEFINE_bool(json, false, "print one JSON object instead of the table");
DEFINE_bool(copy_reference, true,
            "per size and round, also measure one thread copying payload-sized blocks through "
            "the ring (1 s, on the same CPUs; the report gives the median round): the most "
            "transitions per second one core moves once, against which the table gives each "
            "arm's share");
DEFINE_bool(tcp_reference, true,
            "per size and round, also measure a kernel TCP stream over loopback (1 s, on the "
            "same CPUs, sends of one insert's bytes; the report gives the median round): the "
            "transitions per second one socket's two ends move with nothing else to do, against "
            "which the table gives each arm's share (an arm whose transitions cross a socket "
            "(redis, grpc, dreplay-tcp) does not reach 1)");

namespace dreplay::tools {
namespace {

constexpr absl::Duration kReferenceDuration = absl::Seconds(1);

constexpr char kUsage[] =
    "the same actor-to-buffer-to-learner workload (writers inserting, a reader sampling by "
    "priority and writing priorities back) through Redis, gRPC streaming and dreplay, in one "
    "run on one machine; prints inserted/s, sampled/s and the ratios dreplay / redis and "
    "dreplay / grpc of their sums per payload size. Every arm runs on the same CPUs (--cpus, "
    "the redis-server it starts included), with the same capacity, prefill, warmup and window, "
    "one arm at a time, and reports the CPU seconds it used; the header of "
    "tools/bench/peer_bench.cc and of each arm's file (peer_bench_redis.h, peer_bench_grpc.h, "
    "peer_bench_dreplay.h) say exactly what each arm does.\n"
    "Exit status: 0 done, 1 an arm failed, 2 a bad flag.\n"
    "Usage: peer_bench [--systems=redis,grpc,dreplay] [--payload_bytes=128,28672] "
    "[--duration_s=3] [--json]";

absl::StatusOr<std::vector<int>> IntList(const char* flag, const std::string& text) {
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 0) {
      return FlagError(flag, text, absl::StrCat("\"", item, "\" is not a whole number >= 0"));
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<PeerBenchOptions> OptionsFromFlags() {
  PeerBenchOptions o;
  absl::StatusOr<std::vector<PeerSystem>> systems = ParsePeerSystems(FLAGS_systems);
  if (!systems.ok()) return FlagError("systems", FLAGS_systems, systems.status().message());
  o.systems = *systems;
  ASSIGN_OR_RETURN(std::vector<int> sizes, IntList("payload_bytes", FLAGS_payload_bytes));
  for (int s : sizes) o.payload_bytes.push_back(static_cast<uint32_t>(s));
  RETURN_IF_ERROR(CheckRange("writers", FLAGS_writers, 1, 64));
  o.writers = FLAGS_writers;
  RETURN_IF_ERROR(CheckRange("batch_size", FLAGS_batch_size, 1, 4096));
  o.batch_size = static_cast<uint32_t>(FLAGS_batch_size);
  RETURN_IF_ERROR(CheckRange("insert_batch", FLAGS_insert_batch, 0, 4096));
  o.insert_batch = static_cast<uint32_t>(FLAGS_insert_batch);
  RETURN_IF_ERROR(CheckRange("ring_mib", FLAGS_ring_mib, 1, 1 << 16));
  RETURN_IF_ERROR(CheckRange("rounds", FLAGS_rounds, 1, 100));
  o.ring_bytes = static_cast<uint64_t>(FLAGS_ring_mib) << 20;
  if (!(FLAGS_warmup_s >= 0)) {
    return FlagError("warmup_s", std::to_string(FLAGS_warmup_s), "must be >= 0");
  }
  ASSIGN_OR_RETURN(o.duration, Seconds("duration_s", FLAGS_duration_s, false));
  o.warmup = absl::Seconds(FLAGS_warmup_s);
  o.alpha = FLAGS_alpha;
  o.seed = static_cast<uint64_t>(FLAGS_seed);
  o.redis_server = FLAGS_redis_server;
  RETURN_IF_ERROR(o.Validate());
  return o;
}

absl::StatusOr<PeerCaseResult> RunArm(const PeerBenchOptions& o, PeerSystem system,
                                      const PeerCase& c) {
  switch (system) {
    case PeerSystem::kRedis:
      return RunRedisArm(c, o.redis_server);
    case PeerSystem::kGrpc:
      return RunGrpcArm(c);
    case PeerSystem::kDreplay:
      return RunDreplayArm(c, verbs::SoftTransport::kAuto);
    case PeerSystem::kDreplayTcp:
      return RunDreplayArm(c, verbs::SoftTransport::kTcp);
  }
  return absl::InternalError("unknown system");
}

int Run(const BinaryMain& binary) {
  absl::StatusOr<PeerBenchOptions> options = OptionsFromFlags();
  if (!options.ok()) return binary.BadFlag(options.status());
  if (!FLAGS_cpus.empty()) {
    absl::StatusOr<std::vector<int>> cpus = IntList("cpus", FLAGS_cpus);
    if (!cpus.ok()) return binary.BadFlag(cpus.status());
    if (const absl::Status s = PinToCpus(*cpus); !s.ok()) return binary.BadFlag(s);
  }
  const std::vector<int> cpus = AllowedCpus();
  std::vector<std::vector<PeerCaseResult>> rounds(static_cast<size_t>(FLAGS_rounds));
  std::vector<PeerCopyReference> copies;
  std::vector<PeerTcpReference> tcps;
  for (uint32_t payload : options->payload_bytes) {
    const PeerCase c = CaseFor(*options, payload);
    std::vector<PeerCopyReference> round_copies;
    std::vector<PeerTcpReference> round_tcps;
    for (std::vector<PeerCaseResult>& round : rounds) {
      // The references once per round, beside the arms they are set against.
      if (FLAGS_copy_reference) {
        absl::StatusOr<PeerCopyReference> copy =
            MeasurePeerCopy(payload, c.capacity * payload, kReferenceDuration);
        if (!copy.ok()) {
          return binary.Failure(absl::StrCat("copy at ", payload, " B"), copy.status());
        }
        round_copies.push_back(*copy);
      }
      if (FLAGS_tcp_reference) {
        absl::StatusOr<PeerTcpReference> tcp =
            MeasurePeerTcpStream(payload, uint64_t{c.insert_batch} * payload, kReferenceDuration);
        if (!tcp.ok()) return binary.Failure(absl::StrCat("TCP at ", payload, " B"), tcp.status());
        round_tcps.push_back(*tcp);
      }
      for (PeerSystem system : options->systems) {
        absl::StatusOr<PeerCaseResult> r = RunArm(*options, system, c);
        if (!r.ok()) {
          return binary.Failure(absl::StrCat(PeerSystemName(system), " at ", payload, " B"),
                                r.status());
        }
        round.push_back(*r);
      }
    }
    if (!round_copies.empty()) copies.push_back(MedianReference(std::move(round_copies)));
    if (!round_tcps.empty()) tcps.push_back(MedianReference(std::move(round_tcps)));
  }
  std::cout << FormatPeerBenchReport(*options, cpus, rounds, FLAGS_json, copies, tcps)
            << std::flush;
  return kExitSuccess;
}

}  // namespace
}  // namespace dreplay::tools

int main(int argc, char** argv) {
  dreplay::BinaryMain binary(
      {"peer_bench", dreplay::tools::kUsage, "peer_bench", /*warnings_only=*/true});
  if (std::optional<int> done = binary.Init(argc, argv)) return *done;
  return dreplay::tools::Run(binary);
}
