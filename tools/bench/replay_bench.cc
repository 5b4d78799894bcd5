// Copyright dreplay authors.
//
// replay_bench: throughput and latency of the replay service end to end, on
// one host or across two.
//
//   replay_bench --actors=4 --payload_bytes=128 --learner=false    # insert rate
//   replay_bench --actors=4 --stalled_actors=1 --learner=false     # one actor stalls mid-write
//   replay_bench --actors=1024 --actor_threads=2 --max_batch=64    # many light writers
//   replay_bench --actors=0 --batch_size=256 --link=10km-25g --baseline=nolink
//   replay_bench --actors=4 --payload_bytes=28672 --learner=false --baseline=tcp
//   replay_bench ... --json                                        # one JSON object
//   replay_bench --server --host=10.0.0.1 ...        # host A: the server alone
//   replay_bench --connect=10.0.0.1:PORT ...         # host B: the clients, same flags
//
// By default one process plays every host: a ReplayServer (on --provider, auto by
// default: the soft provider where there is no RDMA device), --actors actor threads and one learner
// thread. Each client has its own provider (its own emulated NIC: a thread
// of the soft provider) and queue pair, as separate hosts would; with
// --shared_actor_provider the actors share one provider (still one queue
// pair each). Threads rather than processes: on a small host every
// participant competes for the same cores either way, and threads let the
// benchmark read the writers' own counters and latencies without a side
// channel.
//
//   actors   ExperienceWriter: Append --max_batch transitions of
//            --payload_bytes, Flush (slot and commit WRITEs into its own
//            lease, wait for the commit), over and over. With
//            --actor_threads=T, T threads (one provider each) drive all the
//            writers round-robin instead of one thread per actor, each
//            writer keeping --writer_in_flight batches posted without
//            waiting (ExperienceWriter::Submit / Poll), at most
//            --thread_in_flight per thread. Either way the actors set up
//            their connections --connect_in_flight at a time (the report's
//            "connect" line).
//   stalled  --stalled_actors=K more actors WRITE one batch of slots and
//            never commit it; their leases stall, nobody else's. The live
//            actors are --actors in any case; give the same --leases to a
//            run with and one without stalled actors, so that both split
//            the ring alike.
//   learner  BatchReader (pipelined READs of staged batches, one per staging
//            slot) and PriorityWriter (a new random priority per transition),
//            so the mailbox flow control runs as in training. --link
//            emulates the learner's long-haul link (soft provider).
//
// The server runs with the layout the flags give (capacity by default the
// largest power of two up to 2^18 whose ring fits in --ring_mib; actor
// window capacity / 4). --reader_retry_us, --core_max_sleep_us and
// --core_spin_steps expose the polling back-offs of the learner's reader and
// of the server's replay core, which trade CPU for latency on a small host.
//
// Across hosts (or network namespaces): `--server` runs only the server of
// these flags, on --host:--port, until SIGTERM or SIGINT; `--connect` runs
// the actors and the learner against it (the same flags: it refuses a
// server with another layout) and reads the server's counters through a
// monitor session (client/stats_reader.h) rather than in process. Each run
// of a --connect prefills again; --baseline=nolink runs against the same
// server; CPU seconds are the clients' process's only.
//
// Before the clock starts, --prefill transitions are inserted (so the
// sampler has data even with --actors=0) and every client connects; then
// --warmup_s passes, and counters are taken over --duration_s.
//
// Reported (text or --json):
//   inserted/s         transitions the server's ingest accepted per second
//                      (and what the actors committed)
//   sampled/s          transitions in the batches the learner received
//   bytes in / out     bytes the actors WROTE (slots + commit words) and the
//                      learner READ (commit lines, then the bytes each batch
//                      uses, retries included)
//   link bytes         (JSON) the learner session's bytes by traffic class
//                      (client/link_bytes.h) in the window, with the achieved
//                      samples per insert and the transitions fetched in it
//                      (distinct: fetched for the first time)
//   insert latency     p50 / p99 of one Flush: reserve to commit of
//                      --max_batch transitions
//   batch wait         p50 / p99 of the learner's Next() (time it waited for
//                      the next batch, with the READs pipelined)
//   batch READ         p50 / p99 of one READ of a whole staging slot, posted
//                      alone after the run (post to completion)
//   server counters    torn, overrun, copy rejects, staging stalls
//
// --samples_per_insert sets the server's rate limiter (slack: two batches,
// or one actor insert's worth of samples if more); --learner_cache makes the
// learner keep what it receives, so the server may stage references;
// --payload_pad_bytes makes every transition that much larger.
//
// --rounds=N repeats the run and its baselines N times, alternating, and
// reports the median round; the ratios divide medians. On a shared host this
// keeps a burst of background load from deciding a ratio.
//
// --baseline (comma-separated):
//   tcp     also streams slot-sized messages over one loopback TCP connection
//           for --duration_s, and reports the insert bandwidth (committed
//           slot bytes/s) as a fraction of it
//   nolink  runs the whole benchmark again without --link and reports the
//           learner's sampled/s with the link as a fraction of it
//
// This file holds the flags; the parts live beside it: replay_bench_config
// (what a run measures), replay_bench_clients (the actor and learner
// threads), replay_bench_run (a run and a round) and replay_bench_report
// (text and JSON).

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/flag_values.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "protocol/layout.h"
#include "tools/bench/replay_bench_config.h"
#include "tools/bench/replay_bench_report.h"
#include "tools/bench/replay_bench_run.h"
#include "tools/bench/replay_bench_server.h"
#include "verbs/provider_flag_definitions.h"
#include "verbs/provider_flags.h"
#include "verbs/verbs.h"

DEFINE_int32(actors, 4, "actor threads (0: only the learner, on prefilled memory)");
DEFINE_int32(stalled_actors, 0,
             "more actors that WRITE one batch of slots and never commit it (stalled "
             "mid-write for the whole run), each holding its own lease");
DEFINE_int32(actor_threads, 0,
             "threads driving the actors' writers round-robin, one provider each (0: one thread "
             "per actor up to 256 actors, 32 beyond)");
DEFINE_int32(writer_in_flight, 1,
             "with --actor_threads: batches each writer keeps in flight, posted without waiting "
             "(0: each writer's Flush blocks in turn)");
DEFINE_int32(thread_in_flight, 4,
             "with --writer_in_flight: batches one actor thread's writers keep in flight "
             "together (0: no bound; more only queue in the provider)");
DEFINE_int32(connect_in_flight, 8,
             "connections set up at once during setup: by the actor threads' helper threads "
             "with --actor_threads (at least one per actor thread), by the actors themselves "
             "otherwise");
DEFINE_int32(leases, 0,
             "leases the ring is split into (0: one per actor, live or stalled); at least "
             "--actors + --stalled_actors");
DEFINE_bool(shared_actor_provider, false,
            "actors share one provider (one queue pair each) instead of one provider each");
DEFINE_int32(payload_bytes, 128, "bytes per transition (e.g. 128, 1024, 28672)");
DEFINE_int32(payload_pad_bytes, 0,
             "extra bytes per transition payload, stored and transferred like the rest");
DEFINE_int32(max_batch, 256, "transitions per actor insert (one reservation, one commit)");
DEFINE_int64(capacity, 0,
             "slots in the replay memory, a power of two (0: the largest power of two whose "
             "ring fits in --ring_mib, at most 2^18)");
DEFINE_int64(ring_mib, 256, "size bound of the slot ring when --capacity=0");
DEFINE_int64(actor_window, 0, "sequences actors may run ahead of ingest (0: capacity / 4)");
DEFINE_int32(batch_size, 256, "transitions per staged batch");
DEFINE_int32(staging_depth, 8, "staged batches (= READs the learner keeps in flight)");
DEFINE_bool(learner, true, "run the learner (batch reader + priority writer)");
DEFINE_double(samples_per_insert, 0,
              "server: transitions sampled per transition inserted (0: no rate limit); the "
              "limiter's slack is max(2 batches, one actor insert's worth of samples)");
DEFINE_bool(spi_block_actors, true,
            "server, with --samples_per_insert: pause ingest (and so the actors) while inserts "
            "run ahead of the ratio, so that the run measures that ratio; false: actors never "
            "wait and a slower learner samples less than asked");
DEFINE_bool(learner_cache, false,
            "learner: keep every transition received; the server then stages references to "
            "those it holds (transfer-once)");
DEFINE_bool(verify_slots, false,
            "the learner also verifies every copied slot (the batch checksum already covers "
            "them)");
DEFINE_double(reader_retry_us, 20,
              "learner: back-off before READing again a batch not staged yet (doubles up to "
              "--reader_retry_max_us)");
DEFINE_double(reader_retry_max_us, 2000, "learner: longest back-off before a READ again");
DEFINE_double(core_max_sleep_us, 1000, "server: longest sleep of the replay core when idle");
DEFINE_int32(core_spin_steps, 64, "server: empty steps of the replay core before it sleeps");
DEFINE_string(link, "none",
              "emulated link of the learner's connection (soft provider): none, 10km-25g, "
              "100km-10g, 1000km-1g or DELAY_US:GBPS");
DEFINE_string(actor_link, "none", "emulated link of each actor's connection (soft provider)");
DEFINE_int64(prefill, -1,
             "transitions inserted before the clock starts (-1: min(capacity / 2, 65536))");
DEFINE_double(duration_s, 5, "measured seconds");
DEFINE_double(warmup_s, 1, "seconds run before measuring");
DEFINE_int32(read_probes, 200, "isolated staging-slot READs timed after the run");
DEFINE_double(alpha, 0.6, "prioritization exponent of the server");
DEFINE_int64(seed, 1, "seed of the server's sampler and the learner's priorities");
DEFINE_string(baseline, "", "comma-separated: tcp, nolink (see the file comment)");
DEFINE_int32(rounds, 1,
             "rounds of (run, baselines); figures are medians over rounds, ratios divide "
             "medians");
DEFINE_bool(json, false, "print one JSON object instead of text");
DEFINE_bool(server, false,
            "serve the replay server these flags describe on --host:--port, for a replay_bench "
            "--connect with the same flags on another host or network namespace, until SIGTERM "
            "or SIGINT (prints \"replay_bench server listening on HOST:PORT\")");
DEFINE_string(host, "0.0.0.0", "--server: address to listen on");
DEFINE_int32(port, 0, "--server: port to listen on (0: any, printed)");
DEFINE_string(connect, "",
              "HOST:PORT of a replay_bench --server started with the same flags: run the actors "
              "and the learner against it instead of a server in this process (its counters are "
              "read through a monitor session; CPU seconds are this process's only)");

namespace dreplay::tools {
namespace {

// The shared provider flags (verbs/provider_flag_definitions.h), as every
// main reads them.
absl::Status ProviderFromFlags(verbs::ProviderOptions* provider) {
  ASSIGN_OR_RETURN(*provider,
                   verbs::ProviderOptionsFromFlags(verbs::ProviderFlagsFromCommandLine()));
  return absl::OkStatus();
}

// The transitions and the layout of the replay memory. REQUIRES: c->actors.
absl::Status LayoutFromFlags(ReplayBenchConfig* c) {
  const uint64_t max_payload = protocol::kMaxSlotSize - sizeof(protocol::SlotHeader);
  if (FLAGS_payload_bytes < 8 || FLAGS_payload_bytes > static_cast<int>(max_payload)) {
    return FlagError("payload_bytes", std::to_string(FLAGS_payload_bytes),
                     absl::StrCat("must be in [8, ", max_payload, "]"));
  }
  c->payload_bytes = static_cast<uint32_t>(FLAGS_payload_bytes);
  if (FLAGS_payload_pad_bytes < 0 ||
      uint64_t{c->payload_bytes} + static_cast<uint64_t>(FLAGS_payload_pad_bytes) > max_payload) {
    return FlagError("payload_pad_bytes", std::to_string(FLAGS_payload_pad_bytes),
                     absl::StrCat("must be >= 0, with --payload_bytes at most ", max_payload));
  }
  c->payload_pad_bytes = static_cast<uint32_t>(FLAGS_payload_pad_bytes);
  if (FLAGS_max_batch < 1) {
    return FlagError("max_batch", std::to_string(FLAGS_max_batch), "must be >= 1");
  }
  c->max_batch = static_cast<uint32_t>(FLAGS_max_batch);
  if (FLAGS_ring_mib < 1)
    return FlagError("ring_mib", std::to_string(FLAGS_ring_mib), "must be >= 1");

  protocol::LayoutConfig& l = c->layout;
  l.slot_size = SlotSizeFor(c->transition_bytes());
  l.capacity = FLAGS_capacity == 0
                   ? AutoCapacity(l.slot_size, static_cast<uint64_t>(FLAGS_ring_mib) << 20)
                   : static_cast<uint64_t>(std::max<int64_t>(FLAGS_capacity, 0));
  if (FLAGS_actor_window < 0) {
    return FlagError("actor_window", std::to_string(FLAGS_actor_window), "must be >= 0");
  }
  l.actor_window = FLAGS_actor_window != 0 ? static_cast<uint64_t>(FLAGS_actor_window)
                                           : std::max<uint64_t>(l.capacity / 4, 1);
  if (FLAGS_batch_size < 1 || FLAGS_staging_depth < 1) {
    return FlagError("batch_size / staging_depth",
                     absl::StrCat(FLAGS_batch_size, " / ", FLAGS_staging_depth), "must be >= 1");
  }
  l.batch_size = static_cast<uint32_t>(FLAGS_batch_size);
  l.staging_depth = static_cast<uint32_t>(FLAGS_staging_depth);
  l.param_bytes = 4096;
  const int actors = std::max(c->actors + c->stalled_actors, 1);
  if (FLAGS_leases != 0 && FLAGS_leases < actors) {
    return FlagError("leases", std::to_string(FLAGS_leases),
                     absl::StrCat("must be 0 or at least --actors + --stalled_actors = ", actors));
  }
  // One lease per actor, live or stalled, unless --leases says more.
  l.max_actors = static_cast<uint32_t>(std::max(actors, FLAGS_leases));
  l.leases = l.max_actors;
  RETURN_IF_ERROR(l.set_spec(absl::StrCat("replay_bench ", c->transition_bytes(), "B")));
  if (const absl::Status s = l.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad geometry: ", s.message()));
  }
  if (c->max_batch > protocol::ActorWindow(l)) {
    return FlagError("max_batch", std::to_string(c->max_batch),
                     absl::StrCat("exceeds the actor window of ", protocol::ActorWindow(l)));
  }
  return absl::OkStatus();
}

// The learner's reader, the server's core and the emulated links.
absl::Status PollingAndLinksFromFlags(ReplayBenchConfig* c) {
  c->learner = FLAGS_learner;
  c->verify_slots = FLAGS_verify_slots;
  c->learner_cache = FLAGS_learner_cache;
  if (!(FLAGS_samples_per_insert >= 0)) {
    return FlagError("samples_per_insert", std::to_string(FLAGS_samples_per_insert),
                     "must be >= 0");
  }
  c->samples_per_insert = FLAGS_samples_per_insert;
  c->spi_block_actors = FLAGS_spi_block_actors;
  // Enough slack for two batches (sampling can start) and for the burst of
  // one actor insert (inserts arrive max_batch at a time).
  c->spi_error_buffer = std::max(2.0 * c->layout.batch_size,
                                 FLAGS_samples_per_insert * static_cast<double>(c->max_batch));
  if (!(FLAGS_reader_retry_us > 0) || !(FLAGS_reader_retry_max_us >= FLAGS_reader_retry_us)) {
    return FlagError("reader_retry_us / reader_retry_max_us",
                     absl::StrCat(FLAGS_reader_retry_us, " / ", FLAGS_reader_retry_max_us),
                     "need 0 < initial <= max");
  }
  c->reader_retry = absl::Microseconds(FLAGS_reader_retry_us);
  c->reader_retry_max = absl::Microseconds(FLAGS_reader_retry_max_us);
  if (!(FLAGS_core_max_sleep_us > 0) || FLAGS_core_spin_steps < 0) {
    return FlagError("core_max_sleep_us / core_spin_steps",
                     absl::StrCat(FLAGS_core_max_sleep_us, " / ", FLAGS_core_spin_steps),
                     "need a sleep > 0 and spin steps >= 0");
  }
  c->core_max_sleep = absl::Microseconds(FLAGS_core_max_sleep_us);
  c->core_spin_steps = static_cast<uint32_t>(FLAGS_core_spin_steps);
  c->link_spec = FLAGS_link;
  ASSIGN_OR_RETURN(c->link, verbs::ParseLinkModel(FLAGS_link));
  ASSIGN_OR_RETURN(c->actor_link, verbs::ParseLinkModel(FLAGS_actor_link));
  return absl::OkStatus();
}

// Prefill, timing, seeds, baselines and rounds. REQUIRES: the layout, the
// learner and the link.
absl::Status MeasurementFromFlags(ReplayBenchConfig* c) {
  const protocol::LayoutConfig& l = c->layout;
  if (FLAGS_prefill < -1)
    return FlagError("prefill", std::to_string(FLAGS_prefill), "must be >= -1");
  c->prefill = FLAGS_prefill >= 0 ? static_cast<uint64_t>(FLAGS_prefill) : AutoPrefill(l.capacity);
  if (c->prefill > l.capacity) {
    return FlagError("prefill", std::to_string(FLAGS_prefill),
                     absl::StrCat("exceeds the capacity of ", l.capacity));
  }
  if (c->actors == 0 && (!c->learner || c->prefill < l.batch_size)) {
    return absl::InvalidArgumentError(
        "--actors=0 measures the learner alone: it needs --learner and a --prefill of at least "
        "one batch");
  }
  if (!(FLAGS_duration_s > 0) || !(FLAGS_warmup_s >= 0)) {
    return FlagError("duration_s / warmup_s", absl::StrCat(FLAGS_duration_s, " / ", FLAGS_warmup_s),
                     "need duration > 0 and warmup >= 0");
  }
  c->duration = absl::Seconds(FLAGS_duration_s);
  c->warmup = absl::Seconds(FLAGS_warmup_s);
  if (FLAGS_read_probes < 0) {
    return FlagError("read_probes", std::to_string(FLAGS_read_probes), "must be >= 0");
  }
  c->read_probes = FLAGS_read_probes;
  c->alpha = FLAGS_alpha;
  c->seed = static_cast<uint64_t>(FLAGS_seed);
  for (absl::string_view b : absl::StrSplit(FLAGS_baseline, ',', absl::SkipEmpty())) {
    if (b == "tcp") {
      c->tcp_baseline = true;
    } else if (b == "nolink") {
      c->nolink_baseline = true;
    } else {
      return FlagError("baseline", FLAGS_baseline,
                       "expected a comma-separated list of tcp, nolink");
    }
  }
  if (FLAGS_rounds < 1 || FLAGS_rounds > 100) {
    return FlagError("rounds", std::to_string(FLAGS_rounds), "must be in [1, 100]");
  }
  c->rounds = FLAGS_rounds;
  if (c->nolink_baseline && (!c->link.enabled() || !c->learner)) {
    return FlagError("baseline", FLAGS_baseline, "nolink needs --link and the learner");
  }
  c->json = FLAGS_json;
  return absl::OkStatus();
}

// --server and --connect.
absl::Status RemoteFromFlags(ReplayBenchConfig* c) {
  if (FLAGS_server && !FLAGS_connect.empty()) {
    return FlagError("connect", FLAGS_connect, "--server and --connect are two ends: give one");
  }
  if (FLAGS_port < 0 || FLAGS_port > 65535) {
    return FlagError("port", std::to_string(FLAGS_port), "must be in [0, 65535]");
  }
  if (FLAGS_connect.empty()) return absl::OkStatus();
  const size_t colon = FLAGS_connect.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(FLAGS_connect.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return FlagError("connect", FLAGS_connect, "expected HOST:PORT");
  }
  if (c->tcp_baseline) {
    return FlagError("baseline", FLAGS_baseline,
                     "tcp streams over loopback, not to the --connect host: use verbs_bench "
                     "--baseline=tcp across hosts");
  }
  c->remote_host = FLAGS_connect.substr(0, colon);
  c->remote_port = static_cast<uint16_t>(port);
  return absl::OkStatus();
}

absl::StatusOr<ReplayBenchConfig> ConfigFromFlags() {
  ReplayBenchConfig c;
  RETURN_IF_ERROR(ProviderFromFlags(&c.provider));
  if (FLAGS_actors < 0 || FLAGS_actors > 4096) {
    return FlagError("actors", std::to_string(FLAGS_actors), "must be in [0, 4096]");
  }
  c.actors = FLAGS_actors;
  if (FLAGS_stalled_actors < 0 || FLAGS_stalled_actors > 4096) {
    return FlagError("stalled_actors", std::to_string(FLAGS_stalled_actors),
                     "must be in [0, 4096]");
  }
  c.stalled_actors = FLAGS_stalled_actors;
  if (FLAGS_actor_threads < 0 || FLAGS_actor_threads > 256) {
    return FlagError("actor_threads", std::to_string(FLAGS_actor_threads), "must be in [0, 256]");
  }
  // Beyond 256 actors, threads drive many writers each (no thread per connection).
  c.actor_threads = FLAGS_actor_threads != 0 ? FLAGS_actor_threads : (c.actors > 256 ? 32 : 0);
  if (FLAGS_writer_in_flight < 0 || FLAGS_writer_in_flight > 64) {
    return FlagError("writer_in_flight", std::to_string(FLAGS_writer_in_flight),
                     "must be in [0, 64]");
  }
  c.writer_in_flight = static_cast<uint32_t>(FLAGS_writer_in_flight);
  if (FLAGS_thread_in_flight < 0) {
    return FlagError("thread_in_flight", std::to_string(FLAGS_thread_in_flight), "must be >= 0");
  }
  c.thread_in_flight = static_cast<uint32_t>(FLAGS_thread_in_flight);
  if (FLAGS_connect_in_flight < 1 || FLAGS_connect_in_flight > 32) {
    return FlagError("connect_in_flight", std::to_string(FLAGS_connect_in_flight),
                     "must be in [1, 32] (the server's half-open bound per source address)");
  }
  c.connect_in_flight = FLAGS_connect_in_flight;
  c.shared_actor_provider = FLAGS_shared_actor_provider;
  RETURN_IF_ERROR(LayoutFromFlags(&c));
  RETURN_IF_ERROR(PollingAndLinksFromFlags(&c));
  RETURN_IF_ERROR(MeasurementFromFlags(&c));
  RETURN_IF_ERROR(RemoteFromFlags(&c));
  return c;
}

// --server: serves until SIGTERM or SIGINT (blocked in main, before any
// thread starts, so that every thread inherits the mask).
int Serve(const ReplayBenchConfig& config, const sigset_t& stop_signals) {
  const absl::Status s = ServeBench(
      config, FLAGS_host, static_cast<uint16_t>(FLAGS_port),
      [](const std::string& address) {
        std::cerr << "replay_bench server listening on " << address << std::endl;
      },
      [&stop_signals] {
        int signal = 0;
        sigwait(&stop_signals, &signal);
      });
  if (!s.ok()) {
    std::cerr << "replay_bench: " << s << "\n";
    return 1;
  }
  return 0;
}

int Run(const sigset_t& stop_signals) {
  absl::StatusOr<ReplayBenchConfig> config = ConfigFromFlags();
  if (!config.ok()) {
    std::cerr << "replay_bench: " << config.status().message() << "\n";
    return 2;
  }
  if (FLAGS_server) return Serve(*config, stop_signals);
  std::vector<ReplayBenchRound> rounds;
  for (int i = 0; i < config->rounds; ++i) {
    absl::StatusOr<ReplayBenchRound> round = RunReplayBenchRound(*config);
    if (!round.ok()) {
      std::cerr << "replay_bench: " << round.status() << "\n";
      return 1;
    }
    rounds.push_back(std::move(*round));
  }
  std::cout << FormatReplayBenchReport(*config, rounds) << std::flush;
  return 0;
}

}  // namespace
}  // namespace dreplay::tools

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "throughput and latency of the replay service end to end on one host (server, actor "
      "threads, learner thread), or across two (--server on one, --connect on the other).\n"
      "Usage: replay_bench [--actors=4] [--payload_bytes=128] [--link=10km-25g] "
      "[--baseline=tcp,nolink] [--json]");
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (FLAGS_minloglevel < google::GLOG_WARNING) FLAGS_minloglevel = google::GLOG_WARNING;
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  if (FLAGS_server) {
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  }
  return dreplay::tools::Run(stop_signals);
}
