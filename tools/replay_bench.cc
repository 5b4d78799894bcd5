// Copyright dreplay authors.
//
// replay_bench: throughput and latency of the replay service end to end, on
// one host.
//
//   replay_bench --actors=4 --payload_bytes=128 --learner=false    # insert rate
//   replay_bench --actors=0 --batch_size=256 --link=10km-25g --baseline=nolink
//   replay_bench --actors=4 --payload_bytes=28672 --learner=false --baseline=tcp
//   replay_bench ... --json                                        # one JSON object
//
// One process plays every host: a ReplayServer (soft provider by default,
// any provider with --provider), --actors actor threads and one learner
// thread. Each client has its own provider (its own emulated NIC: a thread
// of the soft provider) and queue pair, as separate hosts would; with
// --shared_actor_provider the actors share one provider (still one queue
// pair each). Threads rather than processes: on a small host every
// participant competes for the same cores either way, and threads let the
// benchmark read the writers' own counters and latencies without a side
// channel.
//
//   actors   ExperienceWriter: Append --max_batch transitions of
//            --payload_bytes, Flush (FETCH_ADD reservation, slot and commit
//            WRITEs, wait for the commit), over and over.
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
// Before the clock starts, --prefill transitions are inserted (so the
// sampler has data even with --actors=0) and every client connects; then
// --warmup_s passes, and counters are taken over --duration_s.
//
// Reported (text or --json):
//   inserted/s         transitions the server's ingest accepted per second
//                      (and what the actors committed)
//   sampled/s          transitions in the batches the learner received
//   bytes in / out     bytes the actors WROTE (slots + commit words) and the
//                      learner READ (whole staging slots, retries included)
//   insert latency     p50 / p99 of one Flush: reserve to commit of
//                      --max_batch transitions
//   batch wait         p50 / p99 of the learner's Next() (time it waited for
//                      the next batch, with the READs pipelined)
//   batch READ         p50 / p99 of one READ of a whole staging slot, posted
//                      alone after the run (post to completion)
//   server counters    torn, abandoned, overrun, copy rejects, staging stalls
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

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "actor_client/experience_writer.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "learner_client/batch_reader.h"
#include "learner_client/priority_writer.h"
#include "client/session.h"
#include "protocol/layout.h"
#include "replay_server/server.h"
#include "tools/tcp_baseline.h"
#include "verbs/verbs.h"

DEFINE_string(provider, "soft", "RDMA provider of every participant: soft, ibverbs or auto");
DEFINE_string(ib_device, "", "ibverbs: device (empty: the first with an active port)");
DEFINE_int32(ib_port, 1, "ibverbs: port number");
DEFINE_int32(gid_index, -1, "ibverbs: GID index (-1: automatic, RoCE v2 preferred)");
DEFINE_int32(actors, 4, "actor threads (0: only the learner, on prefilled memory)");
DEFINE_bool(shared_actor_provider, false,
            "actors share one provider (one queue pair each) instead of one provider each");
DEFINE_int32(payload_bytes, 128, "bytes per transition (e.g. 128, 1024, 28672)");
DEFINE_int32(max_batch, 256, "transitions per actor insert (one reservation, one commit)");
DEFINE_int64(capacity, 0,
             "slots in the replay memory, a power of two (0: the largest power of two whose "
             "ring fits in --ring_mib, at most 2^18)");
DEFINE_int64(ring_mib, 256, "size bound of the slot ring when --capacity=0");
DEFINE_int64(actor_window, 0, "sequences actors may run ahead of ingest (0: capacity / 4)");
DEFINE_int32(batch_size, 256, "transitions per staged batch");
DEFINE_int32(staging_depth, 8, "staged batches (= READs the learner keeps in flight)");
DEFINE_bool(learner, true, "run the learner (batch reader + priority writer)");
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

namespace dreplay::tools {
namespace {

using client::ClientSession;
using client::ClientSessionOptions;
using protocol::LayoutConfig;
using server::ReplayServer;
using server::ReplayServerOptions;
using protocol::Role;

// Largest capacity chosen automatically.
constexpr uint64_t kMaxAutoCapacity = uint64_t{1} << 18;
constexpr uint64_t kMaxAutoPrefill = 65536;
// How long the clients may take to connect and the prefill to be ingested.
constexpr absl::Duration kSetupTimeout = absl::Seconds(60);
// The learner's Next() returns at least this often to look at the stop flag.
constexpr absl::Duration kNextPoll = absl::Milliseconds(100);
// Transitions per Flush of the prefill writer.
constexpr uint32_t kPrefillBatch = 256;
constexpr double kMicrosPerSecond = 1e6;

struct BenchConfig {
  verbs::ProviderOptions provider;
  int actors = 0;
  bool shared_actor_provider = false;
  uint32_t payload_bytes = 0;
  uint32_t max_batch = 0;
  LayoutConfig layout;
  bool learner = true;
  bool verify_slots = false;
  absl::Duration reader_retry;
  absl::Duration reader_retry_max;
  absl::Duration core_max_sleep;
  uint32_t core_spin_steps = 0;
  std::string link_spec;
  verbs::LinkModel link;
  verbs::LinkModel actor_link;
  uint64_t prefill = 0;
  absl::Duration duration;
  absl::Duration warmup;
  int read_probes = 0;
  double alpha = 0;
  uint64_t seed = 0;
  bool tcp_baseline = false;
  bool nolink_baseline = false;
  int rounds = 1;
};

// p50 / p99 / mean / max of samples in microseconds.
struct Percentiles {
  uint64_t count = 0;
  double p50 = 0;
  double p99 = 0;
  double mean = 0;
  double max = 0;
};

Percentiles Summarize(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const auto i = static_cast<size_t>(std::llround(q * static_cast<double>(v.size() - 1)));
    return v[std::min(i, v.size() - 1)];
  };
  p.count = v.size();
  p.p50 = at(0.5);
  p.p99 = at(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  p.max = v.back();
  return p;
}

double Micros(absl::Duration d) { return absl::ToDoubleMicroseconds(d); }

// What one run measured over its window.
struct RunResult {
  double seconds = 0;
  double inserted_per_s = 0;    // server ingest
  double committed_per_s = 0;   // actors
  double bytes_in_per_s = 0;    // actors' WRITEs (slots + commit words)
  double insert_gbps = 0;       // committed slot bytes, Gb/s
  double sampled_per_s = 0;     // transitions the learner received
  double batches_per_s = 0;
  double bytes_out_per_s = 0;   // the learner's READs
  Percentiles insert_latency;   // one Flush of max_batch transitions
  Percentiles batch_wait;       // the learner's Next()
  Percentiles batch_read;       // one staging-slot READ, alone
  protocol::StatsBlock server{};  // at the end of the window
  uint64_t writer_reconnects = 0;
  uint64_t reader_torn = 0;
  uint64_t reader_not_staged = 0;
};

// Counters a client thread publishes for the main thread.
struct ClientCounters {
  std::atomic<uint64_t> transitions{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> reconnects{0};
};

// State shared by the threads of one run.
class RunState {
 public:
  explicit RunState(int actors) : actors_(static_cast<size_t>(actors)) {}

  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};
  std::atomic<int> ready{0};

  ClientCounters& actor(int i) { return actors_[static_cast<size_t>(i)]; }
  ClientCounters& learner() { return learner_; }

  // Keeps the first failure and stops the run.
  void Fail(const absl::Status& s) {
    {
      MutexLock lock(&mu_);
      if (status_.ok()) status_ = s;
    }
    stop = true;
  }
  absl::Status status() const {
    MutexLock lock(&mu_);
    return status_;
  }
  void AddInsertLatencies(const std::vector<double>& v) {
    MutexLock lock(&mu_);
    insert_us_.insert(insert_us_.end(), v.begin(), v.end());
  }
  std::vector<double> insert_latencies() const {
    MutexLock lock(&mu_);
    return insert_us_;
  }

 private:
  std::vector<ClientCounters> actors_;
  ClientCounters learner_;
  mutable Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<double> insert_us_ ABSL_GUARDED_BY(mu_);
};

ClientSessionOptions SessionOptionsFor(const ReplayServer& server, Role role, uint32_t actor_id,
                                       const verbs::LinkModel& link) {
  ClientSessionOptions o;
  o.host = server.host();
  o.port = server.port();
  o.role = role;
  o.actor_id = actor_id;
  o.qp.link = link;
  o.connect_deadline = absl::Seconds(10);
  o.op_timeout = absl::Seconds(30);
  return o;
}

// Fills `payload` for transition `tag`: the tag, then a pattern.
void FillPayload(uint64_t tag, std::vector<uint8_t>* payload) {
  std::memcpy(payload->data(), &tag, std::min(sizeof(tag), payload->size()));
}

absl::Status Prefill(const BenchConfig& c, const ReplayServer& server) {
  if (c.prefill == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider, verbs::CreateProvider(c.provider));
  ASSIGN_OR_RETURN(std::unique_ptr<ClientSession> session,
                   ClientSession::Connect(provider.get(),
                                          SessionOptionsFor(server, Role::kActor, 0, {})));
  actor::ExperienceWriterOptions wo;
  wo.max_batch = static_cast<uint32_t>(
      std::min<uint64_t>(kPrefillBatch, protocol::ActorWindow(session->config())));
  ASSIGN_OR_RETURN(std::unique_ptr<actor::ExperienceWriter> writer,
                   actor::ExperienceWriter::Create(session.get(), wo));
  std::vector<uint8_t> payload(c.payload_bytes, 0x5a);
  for (uint64_t t = 0; t < c.prefill; ++t) {
    FillPayload(t, &payload);
    RETURN_IF_ERROR(writer->Append(payload, 0.1f * static_cast<float>(t % 17 + 1)));
  }
  RETURN_IF_ERROR(writer->Flush());
  const absl::Time deadline = absl::Now() + kSetupTimeout;
  while (server.ReadStats().inserted < c.prefill) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the prefill of ", c.prefill, " transitions was not ingested within ",
          absl::FormatDuration(kSetupTimeout)));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::OkStatus();
}

absl::Status ActorLoop(const BenchConfig& c, const ReplayServer& server, int id,
                       verbs::Provider* shared_provider, RunState* state) {
  std::unique_ptr<verbs::Provider> own;
  verbs::Provider* provider = shared_provider;
  if (provider == nullptr) {
    ASSIGN_OR_RETURN(own, verbs::CreateProvider(c.provider));
    provider = own.get();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ClientSession> session,
                   ClientSession::Connect(provider, SessionOptionsFor(server, Role::kActor,
                                                                      static_cast<uint32_t>(id),
                                                                      c.actor_link)));
  actor::ExperienceWriterOptions wo;
  wo.max_batch = c.max_batch;
  ASSIGN_OR_RETURN(std::unique_ptr<actor::ExperienceWriter> writer,
                   actor::ExperienceWriter::Create(session.get(), wo));
  std::vector<uint8_t> payload(c.payload_bytes, static_cast<uint8_t>(id));
  std::vector<double> latencies;
  ClientCounters& counters = state->actor(id);
  uint64_t tag = uint64_t{static_cast<uint32_t>(id)} << 40;
  ++state->ready;
  while (!state->stop) {
    for (uint32_t i = 0; i < c.max_batch; ++i, ++tag) {
      FillPayload(tag, &payload);
      RETURN_IF_ERROR(writer->Append(payload, 0.1f * static_cast<float>(tag % 17 + 1)));
    }
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(writer->Flush());
    const absl::Duration took = absl::Now() - start;
    if (state->measuring) latencies.push_back(Micros(took));
    const actor::ExperienceWriterStats& s = writer->stats();
    counters.transitions.store(s.committed, std::memory_order_relaxed);
    counters.batches.store(s.flushes, std::memory_order_relaxed);
    counters.bytes.store(s.bytes_written, std::memory_order_relaxed);
    counters.reconnects.store(s.reconnects, std::memory_order_relaxed);
  }
  state->AddInsertLatencies(latencies);
  return absl::OkStatus();
}

absl::Status LearnerLoop(const BenchConfig& c, const ReplayServer& server, RunState* state,
                         std::vector<double>* waits, std::vector<double>* reads,
                         learner::BatchReaderStats* reader_stats) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider, verbs::CreateProvider(c.provider));
  ASSIGN_OR_RETURN(
      std::unique_ptr<ClientSession> session,
      ClientSession::Connect(provider.get(), SessionOptionsFor(server, Role::kLearner, 0, c.link)));
  learner::BatchReaderOptions ro;
  ro.verify_slots = c.verify_slots;
  ro.retry_initial = c.reader_retry;
  ro.retry_max = c.reader_retry_max;
  ASSIGN_OR_RETURN(std::unique_ptr<learner::BatchReader> reader,
                   learner::BatchReader::Create(session.get(), ro));
  ASSIGN_OR_RETURN(std::unique_ptr<learner::PriorityWriter> priorities,
                   learner::PriorityWriter::Create(session.get()));
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<float> new_priority(0.05f, 2.0f);
  std::vector<float> td;
  ClientCounters& counters = state->learner();
  ++state->ready;
  while (!state->stop) {
    const absl::Time start = absl::Now();
    absl::StatusOr<learner::StagedBatch> batch = reader->Next(kNextPoll);
    if (absl::IsDeadlineExceeded(batch.status())) continue;
    RETURN_IF_ERROR(batch.status());
    if (state->measuring) waits->push_back(Micros(absl::Now() - start));
    td.resize(batch->size());
    for (float& p : td) p = new_priority(rng);
    RETURN_IF_ERROR(priorities->Write(*batch, td));
    const learner::BatchReaderStats& s = reader->stats();
    counters.transitions.store(s.transitions, std::memory_order_relaxed);
    counters.batches.store(s.batches, std::memory_order_relaxed);
    counters.bytes.store(s.bytes_read, std::memory_order_relaxed);
    counters.reconnects.store(s.reconnects, std::memory_order_relaxed);
  }
  *reader_stats = reader->stats();

  // Latency of one READ of a whole staging slot, alone on the queue pair
  // (the reader's pipelined READs have completed by now or complete first).
  const uint64_t stride = protocol::StagingSlotStride(session->config());
  ASSIGN_OR_RETURN(std::unique_ptr<client::RegisteredBuffer> image,
                   client::RegisteredBuffer::Create(provider.get(), stride));
  for (int i = 0; i < c.read_probes; ++i) {
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(session->ReadSync(protocol::RegionKind::kStaging,
                                      protocol::StagingSlotOffset(session->config(), i),
                                      static_cast<uint32_t>(stride), image->mr(), image->data()));
    reads->push_back(Micros(absl::Now() - start));
  }
  return absl::OkStatus();
}

struct Totals {
  uint64_t committed = 0;
  uint64_t bytes_in = 0;
  uint64_t reconnects = 0;
  uint64_t sampled = 0;
  uint64_t batches = 0;
  uint64_t bytes_out = 0;
  uint64_t inserted = 0;
  absl::Time when;
};

Totals TakeTotals(const BenchConfig& c, RunState* state, const ReplayServer& server) {
  Totals t;
  for (int i = 0; i < c.actors; ++i) {
    t.committed += state->actor(i).transitions.load();
    t.bytes_in += state->actor(i).bytes.load();
    t.reconnects += state->actor(i).reconnects.load();
  }
  t.sampled = state->learner().transitions.load();
  t.batches = state->learner().batches.load();
  t.bytes_out = state->learner().bytes.load();
  t.inserted = server.ReadStats().inserted;
  t.when = absl::Now();
  return t;
}

// Waits until `n` clients are ready or the run failed.
absl::Status WaitReady(RunState* state, int n) {
  const absl::Time deadline = absl::Now() + kSetupTimeout;
  while (state->ready.load() < n) {
    RETURN_IF_ERROR(state->status());
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          state->ready.load(), " of ", n, " clients connected within ",
          absl::FormatDuration(kSetupTimeout)));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return state->status();
}

absl::StatusOr<RunResult> RunOnce(const BenchConfig& c) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> server_provider,
                   verbs::CreateProvider(c.provider));
  if ((c.link.enabled() || c.actor_link.enabled()) && server_provider->name() != "soft") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--link / --actor_link need the soft provider; this run uses ", server_provider->name()));
  }
  ReplayServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.layout = c.layout;
  so.core.memory.alpha = c.alpha;
  so.core.memory.seed = c.seed;
  so.core.sampler.min_size_to_sample = c.layout.batch_size;
  so.core.max_sleep = c.core_max_sleep;
  so.core.min_sleep = std::min(so.core.min_sleep, c.core_max_sleep);
  so.core.spin_steps = c.core_spin_steps;
  so.stats_log_interval = absl::InfiniteDuration();
  so.max_clients = static_cast<uint32_t>(c.actors + 8);
  ASSIGN_OR_RETURN(std::unique_ptr<ReplayServer> server,
                   ReplayServer::Start(server_provider.get(), so));
  RETURN_IF_ERROR(Prefill(c, *server));

  std::unique_ptr<verbs::Provider> shared_actor_provider;
  if (c.shared_actor_provider && c.actors > 0) {
    ASSIGN_OR_RETURN(shared_actor_provider, verbs::CreateProvider(c.provider));
  }
  RunState state(c.actors);
  std::vector<double> waits;
  std::vector<double> reads;
  learner::BatchReaderStats reader_stats;
  std::vector<std::thread> threads;
  for (int i = 0; i < c.actors; ++i) {
    threads.emplace_back([&, i] {
      const absl::Status s = ActorLoop(c, *server, i, shared_actor_provider.get(), &state);
      if (!s.ok()) state.Fail(absl::Status(s.code(), absl::StrCat("actor ", i, ": ", s.message())));
    });
  }
  if (c.learner) {
    threads.emplace_back([&] {
      const absl::Status s = LearnerLoop(c, *server, &state, &waits, &reads, &reader_stats);
      if (!s.ok()) state.Fail(absl::Status(s.code(), absl::StrCat("learner: ", s.message())));
    });
  }

  RunResult r;
  absl::Status status = WaitReady(&state, c.actors + (c.learner ? 1 : 0));
  if (status.ok()) {
    absl::SleepFor(c.warmup);
    const Totals begin = TakeTotals(c, &state, *server);
    state.measuring = true;
    absl::SleepFor(c.duration);
    state.measuring = false;
    const Totals end = TakeTotals(c, &state, *server);
    r.server = server->ReadStats();
    const double s = absl::ToDoubleSeconds(end.when - begin.when);
    r.seconds = s;
    r.inserted_per_s = (end.inserted - begin.inserted) / s;
    r.committed_per_s = (end.committed - begin.committed) / s;
    r.bytes_in_per_s = (end.bytes_in - begin.bytes_in) / s;
    r.insert_gbps = r.committed_per_s * c.layout.slot_size * 8 / 1e9;
    r.sampled_per_s = (end.sampled - begin.sampled) / s;
    r.batches_per_s = (end.batches - begin.batches) / s;
    r.bytes_out_per_s = (end.bytes_out - begin.bytes_out) / s;
    r.writer_reconnects = end.reconnects;
  }
  state.stop = true;
  for (std::thread& t : threads) t.join();
  if (status.ok()) status = state.status();
  const absl::Status stopped = server->Stop();
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(stopped);
  r.insert_latency = Summarize(state.insert_latencies());
  r.batch_wait = Summarize(waits);
  r.batch_read = Summarize(reads);
  r.reader_torn = reader_stats.torn;
  r.reader_not_staged = reader_stats.not_staged;
  return r;
}

// ---------------------------------------------------------------------------
// Flags and reports.

absl::Status FlagError(const char* flag, const std::string& value, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": ", why));
}

uint64_t FloorPowerOfTwo(uint64_t n) {
  uint64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

absl::StatusOr<BenchConfig> ConfigFromFlags() {
  BenchConfig c;
  absl::StatusOr<verbs::ProviderKind> kind = verbs::ParseProviderKind(FLAGS_provider);
  if (!kind.ok()) return FlagError("provider", FLAGS_provider, kind.status().message());
  c.provider.kind = *kind;
  c.provider.ib_device = FLAGS_ib_device;
  c.provider.ib_port = FLAGS_ib_port;
  c.provider.gid_index = FLAGS_gid_index;
  RETURN_IF_ERROR(c.provider.Validate());
  if (FLAGS_actors < 0 || FLAGS_actors > 256) {
    return FlagError("actors", std::to_string(FLAGS_actors), "must be in [0, 256]");
  }
  c.actors = FLAGS_actors;
  c.shared_actor_provider = FLAGS_shared_actor_provider;
  if (FLAGS_payload_bytes < 8 ||
      FLAGS_payload_bytes > static_cast<int>(protocol::kMaxSlotSize - sizeof(protocol::SlotHeader))) {
    return FlagError("payload_bytes", std::to_string(FLAGS_payload_bytes),
                     absl::StrCat("must be in [8, ", protocol::kMaxSlotSize - sizeof(protocol::SlotHeader),
                                  "]"));
  }
  c.payload_bytes = static_cast<uint32_t>(FLAGS_payload_bytes);
  if (FLAGS_max_batch < 1) {
    return FlagError("max_batch", std::to_string(FLAGS_max_batch), "must be >= 1");
  }
  c.max_batch = static_cast<uint32_t>(FLAGS_max_batch);
  if (FLAGS_ring_mib < 1) return FlagError("ring_mib", std::to_string(FLAGS_ring_mib), "must be >= 1");

  LayoutConfig& l = c.layout;
  l.slot_size = static_cast<uint32_t>(
      protocol::RoundUp(sizeof(protocol::SlotHeader) + c.payload_bytes, protocol::kSlotAlignment));
  if (FLAGS_capacity == 0) {
    const uint64_t fit = static_cast<uint64_t>(FLAGS_ring_mib) * (uint64_t{1} << 20) / l.slot_size;
    l.capacity = std::min(kMaxAutoCapacity, FloorPowerOfTwo(std::max<uint64_t>(fit, 2)));
  } else {
    l.capacity = static_cast<uint64_t>(std::max<int64_t>(FLAGS_capacity, 0));
  }
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
  l.max_actors = static_cast<uint32_t>(std::max(c.actors, 1));
  RETURN_IF_ERROR(l.set_spec(absl::StrCat("replay_bench ", c.payload_bytes, "B")));
  {
    const absl::Status s = l.Validate();
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("bad geometry: ", s.message()));
  }
  if (c.max_batch > protocol::ActorWindow(l)) {
    return FlagError("max_batch", std::to_string(c.max_batch),
                     absl::StrCat("exceeds the actor window of ", protocol::ActorWindow(l)));
  }
  c.learner = FLAGS_learner;
  c.verify_slots = FLAGS_verify_slots;
  if (!(FLAGS_reader_retry_us > 0) || !(FLAGS_reader_retry_max_us >= FLAGS_reader_retry_us)) {
    return FlagError("reader_retry_us / reader_retry_max_us",
                     absl::StrCat(FLAGS_reader_retry_us, " / ", FLAGS_reader_retry_max_us),
                     "need 0 < initial <= max");
  }
  c.reader_retry = absl::Microseconds(FLAGS_reader_retry_us);
  c.reader_retry_max = absl::Microseconds(FLAGS_reader_retry_max_us);
  if (!(FLAGS_core_max_sleep_us > 0) || FLAGS_core_spin_steps < 0) {
    return FlagError("core_max_sleep_us / core_spin_steps",
                     absl::StrCat(FLAGS_core_max_sleep_us, " / ", FLAGS_core_spin_steps),
                     "need a sleep > 0 and spin steps >= 0");
  }
  c.core_max_sleep = absl::Microseconds(FLAGS_core_max_sleep_us);
  c.core_spin_steps = static_cast<uint32_t>(FLAGS_core_spin_steps);
  c.link_spec = FLAGS_link;
  ASSIGN_OR_RETURN(c.link, verbs::ParseLinkModel(FLAGS_link));
  ASSIGN_OR_RETURN(c.actor_link, verbs::ParseLinkModel(FLAGS_actor_link));
  if (FLAGS_prefill < -1) return FlagError("prefill", std::to_string(FLAGS_prefill), "must be >= -1");
  c.prefill = FLAGS_prefill >= 0 ? static_cast<uint64_t>(FLAGS_prefill)
                                 : std::min(l.capacity / 2, kMaxAutoPrefill);
  if (c.prefill > l.capacity) {
    return FlagError("prefill", std::to_string(FLAGS_prefill),
                     absl::StrCat("exceeds the capacity of ", l.capacity));
  }
  if (c.actors == 0 && (!c.learner || c.prefill < l.batch_size)) {
    return absl::InvalidArgumentError(
        "--actors=0 measures the learner alone: it needs --learner and a --prefill of at least "
        "one batch");
  }
  if (!(FLAGS_duration_s > 0) || !(FLAGS_warmup_s >= 0)) {
    return FlagError("duration_s / warmup_s", absl::StrCat(FLAGS_duration_s, " / ", FLAGS_warmup_s),
                     "need duration > 0 and warmup >= 0");
  }
  c.duration = absl::Seconds(FLAGS_duration_s);
  c.warmup = absl::Seconds(FLAGS_warmup_s);
  if (FLAGS_read_probes < 0) {
    return FlagError("read_probes", std::to_string(FLAGS_read_probes), "must be >= 0");
  }
  c.read_probes = FLAGS_read_probes;
  c.alpha = FLAGS_alpha;
  c.seed = static_cast<uint64_t>(FLAGS_seed);
  for (absl::string_view b : absl::StrSplit(FLAGS_baseline, ',', absl::SkipEmpty())) {
    if (b == "tcp") {
      c.tcp_baseline = true;
    } else if (b == "nolink") {
      c.nolink_baseline = true;
    } else {
      return FlagError("baseline", FLAGS_baseline, "expected a comma-separated list of tcp, nolink");
    }
  }
  if (FLAGS_rounds < 1 || FLAGS_rounds > 100) {
    return FlagError("rounds", std::to_string(FLAGS_rounds), "must be in [1, 100]");
  }
  c.rounds = FLAGS_rounds;
  if (c.nolink_baseline && (!c.link.enabled() || !c.learner)) {
    return FlagError("baseline", FLAGS_baseline, "nolink needs --link and the learner");
  }
  return c;
}

std::string PercentilesJson(const Percentiles& p) {
  return absl::StrFormat(
      "{\"count\":%d,\"p50_us\":%.2f,\"p99_us\":%.2f,\"mean_us\":%.2f,\"max_us\":%.2f}", p.count,
      p.p50, p.p99, p.mean, p.max);
}

std::string ResultJson(const RunResult& r) {
  const protocol::StatsBlock& s = r.server;
  return absl::StrFormat(
      "{\"seconds\":%.3f,\"inserted_per_s\":%.1f,\"committed_per_s\":%.1f,"
      "\"bytes_in_per_s\":%.1f,\"insert_gbps\":%.4f,\"sampled_per_s\":%.1f,"
      "\"batches_per_s\":%.1f,\"bytes_out_per_s\":%.1f,\"insert_latency\":%s,"
      "\"batch_wait\":%s,\"batch_read\":%s,\"server\":{\"inserted\":%d,\"torn_slots\":%d,"
      "\"abandoned_slots\":%d,\"overrun_slots\":%d,\"sample_copy_rejects\":%d,"
      "\"staging_stalls\":%d,\"mailbox_rejects\":%d},\"writer_reconnects\":%d,"
      "\"reader_torn\":%d,\"reader_not_staged\":%d}",
      r.seconds, r.inserted_per_s, r.committed_per_s, r.bytes_in_per_s, r.insert_gbps,
      r.sampled_per_s, r.batches_per_s, r.bytes_out_per_s, PercentilesJson(r.insert_latency),
      PercentilesJson(r.batch_wait), PercentilesJson(r.batch_read), s.inserted, s.torn_slots,
      s.abandoned_slots, s.overrun_slots, s.sample_copy_rejects, s.staging_stalls,
      s.mailbox_rejects, r.writer_reconnects, r.reader_torn, r.reader_not_staged);
}

std::string Rate(double per_s) {
  if (per_s >= 1e6) return absl::StrFormat("%.3f M", per_s / 1e6);
  if (per_s >= 1e3) return absl::StrFormat("%.1f k", per_s / 1e3);
  return absl::StrFormat("%.1f", per_s);
}

std::string LatencyText(const Percentiles& p) {
  if (p.count == 0) return "-";
  return absl::StrFormat("p50 %.1f us  p99 %.1f us  (mean %.1f, max %.1f, n=%d)", p.p50, p.p99,
                         p.mean, p.max, p.count);
}

std::string ResultText(const BenchConfig& c, const RunResult& r) {
  std::string out;
  const protocol::StatsBlock& s = r.server;
  absl::StrAppendFormat(&out,
                        "  inserted      %s transitions/s (actors committed %s/s)  %.1f MB/s in  "
                        "(%.3f Gb/s of slots)\n",
                        Rate(r.inserted_per_s), Rate(r.committed_per_s), r.bytes_in_per_s / 1e6,
                        r.insert_gbps);
  absl::StrAppendFormat(&out, "  sampled       %s transitions/s to the learner (%.0f batches/s)  "
                              "%.1f MB/s out\n",
                        Rate(r.sampled_per_s), r.batches_per_s, r.bytes_out_per_s / 1e6);
  absl::StrAppendFormat(&out, "  insert        %s  [reserve -> commit of %d transitions]\n",
                        LatencyText(r.insert_latency), c.max_batch);
  absl::StrAppendFormat(&out, "  batch wait    %s  [learner's Next(), READs pipelined]\n",
                        LatencyText(r.batch_wait));
  absl::StrAppendFormat(&out, "  batch READ    %s  [one %d-byte staging slot, alone]\n",
                        LatencyText(r.batch_read), protocol::StagingSlotStride(c.layout));
  absl::StrAppendFormat(&out,
                        "  server        torn %d  abandoned %d  overrun %d  copy_rejects %d  "
                        "staging_stalls %d  (reader: %d torn READs, %d early READs; writers: %d "
                        "reconnects)\n",
                        s.torn_slots, s.abandoned_slots, s.overrun_slots, s.sample_copy_rejects,
                        s.staging_stalls, r.reader_torn, r.reader_not_staged, r.writer_reconnects);
  return out;
}

// One round: the configured run, then its baselines, back to back, so that
// each ratio compares measurements taken under the same background load.
struct Round {
  RunResult main;
  std::optional<RunResult> nolink;
  std::optional<TcpStreamResult> tcp;
};

absl::StatusOr<Round> RunRound(const BenchConfig& c) {
  Round round;
  ASSIGN_OR_RETURN(round.main, RunOnce(c));
  if (c.nolink_baseline) {
    BenchConfig without = c;
    without.link = verbs::LinkModel();
    without.link_spec = "none";
    absl::StatusOr<RunResult> r = RunOnce(without);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat("the run without --link: ", r.status().message()));
    }
    round.nolink = *r;
  }
  if (c.tcp_baseline) {
    ASSIGN_OR_RETURN(round.tcp, RunLoopbackTcpStream(c.layout.slot_size, c.duration));
  }
  return round;
}

// The index of the round whose `metric` is the median (the lower middle).
size_t MedianRound(const std::vector<Round>& rounds, const std::function<double(const Round&)>& metric) {
  std::vector<size_t> order(rounds.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return metric(rounds[a]) < metric(rounds[b]); });
  return order[(order.size() - 1) / 2];
}

int Run() {
  absl::StatusOr<BenchConfig> config = ConfigFromFlags();
  if (!config.ok()) {
    std::cerr << "replay_bench: " << config.status().message() << "\n";
    return 2;
  }
  const BenchConfig& c = *config;
  std::vector<Round> rounds;
  for (int i = 0; i < c.rounds; ++i) {
    absl::StatusOr<Round> round = RunRound(c);
    if (!round.ok()) {
      std::cerr << "replay_bench: " << round.status() << "\n";
      return 1;
    }
    rounds.push_back(std::move(*round));
  }
  // Headline figures: the median over rounds; the ratios divide medians.
  const bool inserting = c.actors > 0;
  const Round& main_round = rounds[MedianRound(rounds, [&](const Round& r) {
    return inserting ? r.main.inserted_per_s : r.main.sampled_per_s;
  })];
  const RunResult& main_run = main_round.main;
  const double median_sampled =
      rounds[MedianRound(rounds, [](const Round& r) { return r.main.sampled_per_s; })]
          .main.sampled_per_s;
  const double median_insert_gbps =
      rounds[MedianRound(rounds, [](const Round& r) { return r.main.insert_gbps; })]
          .main.insert_gbps;
  const RunResult* nolink = nullptr;
  double link_ratio = 0;
  if (c.nolink_baseline) {
    nolink = &*rounds[MedianRound(rounds, [](const Round& r) { return r.nolink->sampled_per_s; })]
                   .nolink;
    if (nolink->sampled_per_s > 0) link_ratio = median_sampled / nolink->sampled_per_s;
  }
  const TcpStreamResult* tcp = nullptr;
  double tcp_ratio = 0;
  if (c.tcp_baseline) {
    tcp = &*rounds[MedianRound(rounds, [](const Round& r) { return r.tcp->gbps; })].tcp;
    if (tcp->gbps > 0) tcp_ratio = median_insert_gbps / tcp->gbps;
  }

  if (FLAGS_json) {
    std::string json = absl::StrFormat(
        "{\"config\":{\"provider\":\"%s\",\"actors\":%d,\"shared_actor_provider\":%s,"
        "\"payload_bytes\":%d,\"slot_size\":%d,\"max_batch\":%d,\"capacity\":%d,"
        "\"actor_window\":%d,\"batch_size\":%d,\"staging_depth\":%d,\"learner\":%s,"
        "\"link\":\"%s\",\"prefill\":%d,\"duration_s\":%.3f,\"rounds\":%d,"
        "\"hardware_threads\":%d},"
        "\"result\":%s",
        verbs::ProviderKindName(c.provider.kind), c.actors,
        c.shared_actor_provider ? "true" : "false", c.payload_bytes, c.layout.slot_size,
        c.max_batch, c.layout.capacity, protocol::ActorWindow(c.layout), c.layout.batch_size,
        c.layout.staging_depth, c.learner ? "true" : "false", c.link_spec, c.prefill,
        absl::ToDoubleSeconds(c.duration), c.rounds, std::thread::hardware_concurrency(),
        ResultJson(main_run));
    if (nolink != nullptr) {
      absl::StrAppendFormat(&json, ",\"nolink\":%s,\"sampled_ratio_vs_nolink\":%.4f",
                            ResultJson(*nolink), link_ratio);
    }
    if (tcp != nullptr) {
      absl::StrAppendFormat(&json,
                            ",\"tcp\":{\"message_bytes\":%d,\"messages_per_s\":%.1f,"
                            "\"gbps\":%.4f},\"insert_ratio_vs_tcp\":%.4f",
                            tcp->message_bytes, tcp->messages_per_s, tcp->gbps, tcp_ratio);
    }
    json += ",\"per_round\":[";
    for (size_t i = 0; i < rounds.size(); ++i) {
      const Round& r = rounds[i];
      absl::StrAppendFormat(&json, "%s{\"inserted_per_s\":%.1f,\"sampled_per_s\":%.1f,"
                                   "\"insert_gbps\":%.4f",
                            i == 0 ? "" : ",", r.main.inserted_per_s, r.main.sampled_per_s,
                            r.main.insert_gbps);
      if (r.nolink) absl::StrAppendFormat(&json, ",\"nolink_sampled_per_s\":%.1f", r.nolink->sampled_per_s);
      if (r.tcp) absl::StrAppendFormat(&json, ",\"tcp_gbps\":%.4f", r.tcp->gbps);
      json += "}";
    }
    json += "]}";
    std::cout << json << std::endl;
    return 0;
  }

  std::cout << absl::StrFormat(
      "replay_bench: provider %s, %d actors x %d-transition inserts%s, payload %d B (slot %d B), "
      "capacity %d (actor window %d), batch %d x depth %d, learner %s (link %s), %.1f s x %d "
      "rounds on %d hardware threads\n",
      verbs::ProviderKindName(c.provider.kind), c.actors, c.max_batch,
      c.shared_actor_provider ? " (one shared provider)" : "", c.payload_bytes, c.layout.slot_size,
      c.layout.capacity, protocol::ActorWindow(c.layout), c.layout.batch_size,
      c.layout.staging_depth, c.learner ? "on" : "off", c.link_spec,
      absl::ToDoubleSeconds(c.duration), c.rounds, std::thread::hardware_concurrency());
  if (c.rounds > 1) std::cout << "median round:\n";
  std::cout << ResultText(c, main_run);
  if (nolink != nullptr) {
    std::cout << "without the link (median round):\n" << ResultText(c, *nolink);
    std::cout << absl::StrFormat("  ratio sampled/s with link %s / without: %.3f\n", c.link_spec,
                                 link_ratio);
  }
  if (tcp != nullptr) {
    std::cout << absl::StrFormat(
        "tcp loopback stream of %d-byte messages: %s msgs/s  %.3f Gb/s\n"
        "  ratio insert bandwidth / tcp: %.3f\n",
        tcp->message_bytes, Rate(tcp->messages_per_s), tcp->gbps, tcp_ratio);
  }
  if (c.rounds > 1) {
    for (size_t i = 0; i < rounds.size(); ++i) {
      const Round& r = rounds[i];
      std::cout << absl::StrFormat("round %d: inserted %s/s  sampled %s/s  insert %.3f Gb/s", i + 1,
                                   Rate(r.main.inserted_per_s), Rate(r.main.sampled_per_s),
                                   r.main.insert_gbps);
      if (r.nolink) std::cout << "  sampled without link " << Rate(r.nolink->sampled_per_s) << "/s";
      if (r.tcp) std::cout << absl::StrFormat("  tcp %.3f Gb/s", r.tcp->gbps);
      std::cout << "\n";
    }
  }
  return 0;
}

}  // namespace
}  // namespace dreplay::tools

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "throughput and latency of the replay service end to end on one host (server, actor "
      "threads, learner thread).\n"
      "Usage: replay_bench [--actors=4] [--payload_bytes=128] [--link=10km-25g] "
      "[--baseline=tcp,nolink] [--json]");
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (FLAGS_minloglevel < google::GLOG_WARNING) FLAGS_minloglevel = google::GLOG_WARNING;
  return dreplay::tools::Run();
}
