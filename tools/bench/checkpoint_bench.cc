// Copyright dreplay authors.
//
// checkpoint_bench: how long a checkpoint holds the replay core, and how
// fast it is written, on plain memory (no network).
//
// --actors threads insert into their leases at --inserts_per_s each (each
// respects its window) while the core runs its loop on its own thread, as the
// server's core thread does, with the server's checkpoint flow
// (replay_server/checkpoint/server_checkpoints.h: the store in --dir, the sequence
// reservations, the writer thread). After the ring has been filled once and
// a baseline window, --checkpoints checkpoints are requested one after the
// other: the core takes the cut in chunks between its steps
// (incremental_cut.h) and the writer streams the ring while inserts,
// ingest and sampling go on. It prints, per checkpoint, the cut's longest
// step, the write's MB/s and the inserts per second during it; then, over
// all of them, what the core thread recorded (checkpoint_pauses.h): every
// checkpoint step on the core (max, p99, count) and the gaps between core
// loop iterations during checkpoints (max, p99, count), against the longest
// iteration of the baseline window. --json prints those figures as one JSON
// object on stdout instead (the per-checkpoint lines go to stderr).
//
//   bazel run -c opt //tools/bench:checkpoint_bench -- --capacity=4194304 \
//       --slot_size=256 --dir=/tmp/ckpt_bench

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/shared_words.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "replay_server/checkpoint/checkpoint.h"
#include "replay_server/checkpoint/checkpoint_pauses.h"
#include "replay_server/checkpoint/server_checkpoints.h"
#include "replay_server/regions.h"
#include "replay_server/replay_core.h"

DEFINE_uint64(capacity, uint64_t{1} << 22, "slots in the ring (power of two)");
DEFINE_uint32(slot_size, 256, "bytes per slot (header included; a multiple of 64)");
DEFINE_int32(actors, 2, "actor threads, one lease each");
DEFINE_uint64(actor_window, 0, "sequences an actor may run ahead of ingest (0: a 16th of a lease)");
DEFINE_double(inserts_per_s, 250000, "inserts per second per actor (0: as fast as it can)");
DEFINE_int32(checkpoints, 3, "checkpoints taken one after the other");
DEFINE_double(baseline_s, 2.0, "seconds of the baseline window before the checkpoints");
DEFINE_string(dir, "/tmp/checkpoint_bench", "directory the checkpoint file is written to");
DEFINE_uint64(chunk_slots, uint64_t{1} << 16, "entries the cut copies per core step");
DEFINE_bool(json, false, "print the summary figures as one JSON object");
DEFINE_bool(cut_only, false,
            "time only the cut of an idle core (no actors, no write), with fresh and with "
            "reused buffers");

namespace dreplay::server {
namespace {

protocol::LayoutConfig Config() {
  protocol::LayoutConfig c;
  c.capacity = FLAGS_capacity;
  c.slot_size = FLAGS_slot_size;
  c.batch_size = 32;
  c.staging_depth = 4;
  c.param_bytes = 4096;
  c.leases = static_cast<uint32_t>(FLAGS_actors);
  c.max_actors = c.leases;
  c.actor_window = FLAGS_actor_window != 0 ? FLAGS_actor_window : c.capacity / c.leases / 16;
  return c;
}

// One actor per lease: seals each transition privately, copies it into the
// ring word by word, then release-stores the commit word.
void ActorLoop(const ReplayRegions& r, uint32_t lease, const std::atomic<bool>& stop,
               std::atomic<uint64_t>* inserted) {
  const protocol::LayoutConfig& c = r.config();
  const uint32_t payload_bytes = c.slot_size - sizeof(protocol::SlotHeader);
  std::vector<uint8_t> payload(payload_bytes), image(c.slot_size);
  uint64_t q = 0;
  const absl::Time start = absl::Now();
  while (!stop.load(std::memory_order_relaxed)) {
    if (FLAGS_inserts_per_s > 0 &&
        q > FLAGS_inserts_per_s * absl::ToDoubleSeconds(absl::Now() - start)) {
      absl::SleepFor(absl::Microseconds(50));
      continue;
    }
    const uint64_t cursor = LoadAcquire(&r.lease_line(lease)->ingest_cursor);
    if (!protocol::SequenceWritable(c, q, cursor)) {
      std::this_thread::yield();
      continue;
    }
    std::fill(payload.begin(), payload.end(), static_cast<uint8_t>(q));
    CHECK(protocol::SealSlot(image.data(), c.slot_size, q, lease, 0.5f + q % 7, 0, payload.data(),
                             payload_bytes)
              .ok());
    const uint64_t index = protocol::LeaseSlotIndex(c, lease, q);
    CopyToShared(r.slot(index), image.data(), c.slot_size);
    StoreRelease(&r.commits()[index], protocol::CommitValue(q));
    ++q;
    inserted->fetch_add(1, std::memory_order_relaxed);
  }
}

// What the core thread measured outside a checkpoint; read by main.
struct CoreProbe {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> max_iteration_ns{0};      // since the last reset by main
  std::atomic<int64_t> max_iteration_cpu_ns{0};  // the most CPU time in one
  std::atomic<bool> reset{false};
};

void CoreLoop(ReplayCore* core, ServerCheckpoints* checkpoints, CoreProbe* probe) {
  int64_t max_ns = 0, max_cpu_ns = 0;
  while (!probe->stop.load(std::memory_order_relaxed)) {
    const absl::Time start = absl::Now();
    const absl::Duration cpu_start = ThreadCpuTime();
    core->Step();
    checkpoints->Tick(absl::Now());
    if (probe->reset.exchange(false)) max_ns = max_cpu_ns = 0;
    max_ns = std::max(max_ns, absl::ToInt64Nanoseconds(absl::Now() - start));
    max_cpu_ns = std::max(max_cpu_ns, absl::ToInt64Nanoseconds(ThreadCpuTime() - cpu_start));
    probe->max_iteration_ns.store(max_ns, std::memory_order_relaxed);
    probe->max_iteration_cpu_ns.store(max_cpu_ns, std::memory_order_relaxed);
  }
}

// The cut alone, on this thread: fresh buffers, then the same buffers again.
int CutOnly(ReplayCore* core) {
  CheckpointCut cut;
  for (const char* buffers : {"fresh", "reused", "reused"}) {
    cut = core->CutCheckpoint(std::move(cut));
    std::printf("cut of %zu entries with %s buffers: %u steps, longest %.3f ms, all %.3f ms\n",
                cut.values.size(), buffers, cut.steps, absl::ToDoubleMilliseconds(cut.pause),
                absl::ToDoubleMilliseconds(cut.cut_time));
  }
  return 0;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

int Run() {
  const protocol::LayoutConfig config = Config();
  std::unique_ptr<ReplayRegions> regions = ReplayRegions::Create(config).value();
  ReplayCoreOptions options;
  options.incarnation = 1;
  options.checkpoint_chunk_slots = FLAGS_chunk_slots;
  std::unique_ptr<ReplayCore> core = ReplayCore::Create(regions.get(), options).value();
  if (FLAGS_cut_only) return CutOnly(core.get());
  std::filesystem::remove_all(FLAGS_dir);  // a fresh store: nothing to restore
  ServerCheckpointsOptions checkpoint_options;
  checkpoint_options.dir = FLAGS_dir;
  std::unique_ptr<ServerCheckpoints> checkpoints =
      ServerCheckpoints::Open(checkpoint_options, regions.get(), core.get()).value();

  std::atomic<bool> stop_actors{false};
  std::atomic<uint64_t> inserted{0};
  std::vector<std::thread> actors;
  for (int a = 0; a < FLAGS_actors; ++a) {
    actors.emplace_back(
        [&, a] { ActorLoop(*regions, static_cast<uint32_t>(a), stop_actors, &inserted); });
  }
  CoreProbe probe;
  std::thread core_thread([&] { CoreLoop(core.get(), checkpoints.get(), &probe); });

  const absl::Time fill_start = absl::Now();
  // Filled once: every lease has handled a ring's worth of sequences.
  while (LoadAcquire(&regions->control()->server.ingest_cursor) < config.capacity) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  std::fprintf(FLAGS_json ? stderr : stdout,
               "ring: %llu slots x %u B = %.1f MiB, filled in %.2f s by %d actors (%llu held)\n",
               static_cast<unsigned long long>(config.capacity), config.slot_size,
               protocol::SlotRingBytes(config) / 1048576.0,
               absl::ToDoubleSeconds(absl::Now() - fill_start), FLAGS_actors,
               static_cast<unsigned long long>(LoadAcquire(&regions->stats()->size)));

  probe.reset.store(true);
  absl::SleepFor(absl::Milliseconds(1));
  uint64_t before = inserted.load();
  absl::Time t0 = absl::Now();
  absl::SleepFor(absl::Seconds(FLAGS_baseline_s));
  const double baseline_rate = (inserted.load() - before) / absl::ToDoubleSeconds(absl::Now() - t0);
  const double baseline_max_ms = probe.max_iteration_ns.load() / 1e6;
  const double baseline_max_cpu_ms = probe.max_iteration_cpu_ns.load() / 1e6;
  std::fprintf(FLAGS_json ? stderr : stdout,
               "baseline: %.0f inserts/s, longest core iteration %.3f ms\n", baseline_rate,
               baseline_max_ms);

  const CheckpointPauses& pauses = core->checkpoint_pauses();
  for (int k = 1; k <= FLAGS_checkpoints; ++k) {
    const uint64_t written_before = pauses.Take().written;
    before = inserted.load();
    t0 = absl::Now();
    checkpoints->Request();
    while (pauses.Take().written == written_before) absl::SleepFor(absl::Milliseconds(1));
    const double rate = (inserted.load() - before) / absl::ToDoubleSeconds(absl::Now() - t0);
    const CheckpointWriteStats last = *checkpoints->last_written();
    std::fprintf(
        FLAGS_json ? stderr : stdout,
        "checkpoint %d: cut in %u steps over %.3f ms, longest step %.3f ms; %.1f MiB written in "
        "%.2f s (%.0f MB/s); %.0f inserts/s during it; %llu slots kept, %llu overwritten "
        "during the write\n",
        k, last.cut_steps, Ms(last.cut_time), Ms(last.cut_pause), last.bytes / 1048576.0,
        absl::ToDoubleSeconds(last.write_time), last.bytes_per_second() / 1e6, rate,
        static_cast<unsigned long long>(last.slots_kept),
        static_cast<unsigned long long>(last.slots_absent));
  }
  const CheckpointPauses::Snapshot s = pauses.Take();
  const SequenceReservations& reservations = checkpoints->reservations();
  const unsigned long long steps = s.step_time.count(), gaps = s.loop_gaps.count();
  std::string by_step;
  for (int k = 0; k < kNumCheckpointSteps; ++k) {
    absl::StrAppendFormat(&by_step, "%s\"%s\": [%.3f, %.3f]", k > 0 ? ", " : "",
                          CheckpointStepName(static_cast<CheckpointStep>(k)), Ms(s.max_by_step[k]),
                          Ms(s.max_cpu_by_step[k]));
  }
  if (FLAGS_json) {
    std::printf(
        "{\"capacity\": %llu, \"slot_size\": %u, \"chunk_slots\": %llu, \"checkpoints\": %d, "
        "\"baseline_inserts_per_s\": %.0f, \"baseline_max_iteration_ms\": %.3f, "
        "\"baseline_max_iteration_cpu_ms\": %.3f, "
        "\"step_max_ms\": %.3f, \"step_max_wall_cpu_ms_by_kind\": {%s}, \"step_p99_ms\": %.4f, "
        "\"step_count\": %llu, "
        "\"loop_gap_max_ms\": %.3f, \"loop_gap_max_cpu_ms\": %.3f, \"loop_gap_most_cpu_ms\": "
        "%.3f, \"loop_gap_p99_ms\": %.4f, \"loop_gap_count\": %llu, "
        "\"reservation_syncs\": %llu, \"reservation_stalls\": %llu, "
        "\"reservation_max_background_sync_ms\": %.3f}\n",
        static_cast<unsigned long long>(config.capacity), config.slot_size,
        static_cast<unsigned long long>(FLAGS_chunk_slots), FLAGS_checkpoints, baseline_rate,
        baseline_max_ms, baseline_max_cpu_ms, Ms(s.step_time.max()), by_step.c_str(),
        Ms(s.step_time.Percentile(0.99)), steps, Ms(s.loop_gaps.max()), Ms(s.longest_gap_cpu),
        Ms(s.max_gap_cpu), Ms(s.loop_gaps.Percentile(0.99)), gaps,
        static_cast<unsigned long long>(reservations.syncs()),
        static_cast<unsigned long long>(reservations.stalls()),
        Ms(reservations.max_background_sync()));
  } else {
    std::printf(
        "core thread over %d checkpoints: checkpoint steps max %.3f ms (by kind, [wall, cpu] ms: "
        "%s), p99 "
        "%.4f ms, count %llu; "
        "loop gaps max %.3f ms (%.3f ms of it on the CPU; the most CPU in one gap %.3f ms), p99 "
        "%.4f ms, count %llu (baseline longest iteration %.3f ms, most CPU in one %.3f ms); "
        "reservation syncs %llu, stalls %llu, longest background sync %.3f ms\n",
        FLAGS_checkpoints, Ms(s.step_time.max()), by_step.c_str(), Ms(s.step_time.Percentile(0.99)),
        steps, Ms(s.loop_gaps.max()), Ms(s.longest_gap_cpu), Ms(s.max_gap_cpu),
        Ms(s.loop_gaps.Percentile(0.99)), gaps, baseline_max_ms, baseline_max_cpu_ms,
        static_cast<unsigned long long>(reservations.syncs()),
        static_cast<unsigned long long>(reservations.stalls()),
        Ms(reservations.max_background_sync()));
  }
  probe.stop.store(true);
  core_thread.join();
  stop_actors.store(true);
  for (std::thread& t : actors) t.join();
  checkpoints.reset();
  std::filesystem::remove_all(FLAGS_dir);
  return 0;
}

}  // namespace
}  // namespace dreplay::server

int main(int argc, char** argv) {
  gflags::SetUsageMessage("checkpoint pause and write speed of the replay core");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  google::InitGoogleLogging(argv[0]);
  return dreplay::server::Run();
}
