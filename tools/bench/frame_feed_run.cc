// Copyright dreplay authors.

#include "tools/bench/frame_feed_run.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "common/status_macros.h"
#include "common/thread_cpu.h"
#include "glog/logging.h"
#include "learner_client/batch_reader.h"
#include "learner_client/learner_loop.h"
#include "learner_client/local_replay_source.h"
#include "learner_client/metrics.h"
#include "learner_client/service_io.h"
#include "protocol/frame_record.h"
#include "protocol/layout.h"
#include "replay_server/server.h"
#include "rl/minatar/render.h"
#include "rl/transition.h"
#include "verbs/verbs.h"

namespace dreplay::tools {
namespace {

using client::ClientSession;
using client::ClientSessionOptions;
using protocol::Role;

constexpr absl::Duration kSetupTimeout = absl::Seconds(60);
constexpr absl::Duration kNextPoll = absl::Milliseconds(100);
constexpr uint32_t kFlushItems = 16;

// The phases the main thread moves the clients through.
enum Phase : int { kWarmup = 0, kWindow = 1, kStop = 2 };

// What the learner thread reads at the window's two edges, at one moment.
struct Snapshot {
  absl::Time when;
  client::LinkBytes link;
  learner::BatchReaderStats reader;
  protocol::StatsBlock server{};
  uint64_t consumed = 0;
  uint64_t left_out = 0;
  uint64_t distinct_fetched = 0;
  uint64_t cpu_ns = 0;
  uint64_t assembly_cpu_ns = 0;  // decoding and stack assembly, on any thread
};

struct Shared {
  std::atomic<int> phase{kWarmup};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> actor_cpu_ns{0};  // over the window, set by the actor
  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);

  void Fail(const absl::Status& s, absl::string_view who) {
    absl::MutexLock lock(&mu);
    if (status.ok()) status = absl::Status(s.code(), absl::StrCat(who, ": ", s.message()));
    phase = kStop;
  }
  absl::Status Status() {
    absl::MutexLock lock(&mu);
    return status;
  }
};

// Paces a learner at `rate` transitions a second. After a stall it catches
// up by at most one batch, so a window never counts a burst of the time
// lost before it.
class Pacer {
 public:
  Pacer(double rate, uint32_t batch_size) : rate_(rate), slack_(absl::Seconds(batch_size / rate)) {}
  // How long until the next batch is due (zero: now).
  absl::Duration Wait() const { return std::max(next_ - absl::Now(), absl::ZeroDuration()); }
  void Consumed(uint64_t n) {
    next_ = std::max(next_, absl::Now() - slack_) + absl::Seconds(n / rate_);
  }

 private:
  const double rate_;
  const absl::Duration slack_;
  absl::Time next_ = absl::InfinitePast();
};

verbs::ProviderOptions SoftProvider() {
  verbs::ProviderOptions o;
  o.kind = verbs::ProviderKind::kSoft;
  return o;
}

size_t StackBytes(const Trace& trace) {
  return static_cast<size_t>(rl::minatar::kFrameStackDepth) * trace.frame_bytes;
}

server::ReplayServerOptions ServerOptionsFor(const FrameFeedConfig& c, const FrameFeedArm& arm,
                                             const Trace& trace, size_t item_bytes) {
  server::ReplayServerOptions so;
  protocol::LayoutConfig& l = so.layout;
  l.capacity = c.capacity;
  l.leases = 1;
  l.max_actors = 1;
  l.batch_size = c.batch_size;
  l.staging_depth = 4;
  l.param_bytes = 256;
  l.slot_size = static_cast<uint32_t>(protocol::SlotSizeFor(item_bytes));
  l.observation_size = static_cast<uint32_t>(StackBytes(trace));
  l.num_actions = static_cast<uint32_t>(trace.action_count);
  if (arm.kind == TraceFeeder::kFrames) {
    l.frame_stack = rl::minatar::kFrameStackDepth;
    // Records stay referenced behind the actor: half the lease (as the
    // launchers set it).
    l.actor_window = c.capacity / 2;
  }
  CHECK(l.set_spec(absl::StrCat("env=FrameFeed obs=", StackBytes(trace),
                                "u8 act=", trace.action_count, " nstep=", c.nstep, " gamma=0.99"))
            .ok());
  so.core.memory.seed = c.seed;
  so.core.sampler.link_codec = arm.link_codec;
  replay::RateLimiterOptions& limiter = so.core.sampler.rate_limiter;
  limiter.min_size_to_sample = 2 * c.batch_size;
  if (arm.placement == FeedPlacement::kBuffer) {
    limiter.samples_per_insert = c.samples_per_insert;
    limiter.error_buffer = 4.0 * c.batch_size;
  }
  // The other placements keep the ratio in the learner's own replay.
  if (arm.placement == FeedPlacement::kHybrid) {
    so.core.sampler.forward = arm.forward;
    so.core.sampler.forward_queue = c.capacity;
    if (arm.forward == protocol::ForwardMode::kForwardUniform) {
      so.core.memory.mode = replay::SamplingMode::kUniform;
    }
  }
  so.stats_interval = absl::InfiniteDuration();
  return so;
}

ClientSessionOptions SessionOptionsFor(const server::ReplayServer& server, Role role,
                                       const verbs::LinkModel& link) {
  ClientSessionOptions o;
  o.host = server.host();
  o.port = server.port();
  o.role = role;
  o.insecure = true;  // the bench runs its own server, in this process, without tokens
  o.qp.link = link;
  o.connect_deadline = absl::Seconds(10);
  o.op_timeout = absl::Seconds(30);
  return o;
}

// Replays the trace at consume_rate / samples_per_insert steps a second.
absl::Status RunActor(const FrameFeedConfig& c, const FrameFeedArm& arm, const Trace& trace,
                      const server::ReplayServer& server, Shared* shared) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider,
                   verbs::CreateProvider(SoftProvider()));
  ASSIGN_OR_RETURN(
      std::unique_ptr<ClientSession> session,
      ClientSession::Connect(provider.get(), SessionOptionsFor(server, Role::kActor, {})));
  actor::ExperienceWriterOptions wo;
  wo.max_batch = kFlushItems;
  ASSIGN_OR_RETURN(std::unique_ptr<actor::ExperienceWriter> writer,
                   actor::ExperienceWriter::Create(session.get(), wo));
  rl::NStepOptions nstep;
  nstep.n = c.nstep;
  TraceFeeder feeder(&trace, arm.kind, c.environments, nstep);
  const double steps_per_s = c.consume_rate / c.samples_per_insert;
  const absl::Time start = absl::Now();
  std::vector<FeedItem> items;
  uint64_t window_cpu_begin = 0;
  while (shared->phase.load() != kStop) {
    if (window_cpu_begin == 0 && shared->phase.load() == kWindow) {
      window_cpu_begin = ThreadCpuNanos();
    }
    const absl::Time due = start + absl::Seconds(feeder.steps() / steps_per_s);
    const absl::Time now = absl::Now();
    if (due > now) absl::SleepFor(std::min(due - now, absl::Milliseconds(20)));
    if (absl::Now() < due) continue;
    items.clear();
    RETURN_IF_ERROR(feeder.Step(&items));
    for (const FeedItem& item : items) RETURN_IF_ERROR(writer->Append(item.bytes, item.priority));
  }
  if (window_cpu_begin != 0) shared->actor_cpu_ns = ThreadCpuNanos() - window_cpu_begin;
  return absl::OkStatus();
}

// The buffer placement: the C++ learner's own path (LearnerServiceIo: its
// batch reader, the batches' decoding and stack assembly on their own
// thread, and its priority writer), at most consume_rate transitions a
// second, with random |TD errors| as priorities.
absl::Status RunLearner(const FrameFeedConfig& c, const FrameFeedArm& arm, const Trace& trace,
                        const server::ReplayServer& server, Shared* shared, Snapshot* begin,
                        Snapshot* end) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider,
                   verbs::CreateProvider(SoftProvider()));
  ClientSessionOptions so = SessionOptionsFor(server, Role::kLearner, c.link);
  so.learner_cache = c.learner_cache;
  ASSIGN_OR_RETURN(std::unique_ptr<ClientSession> session,
                   ClientSession::Connect(provider.get(), so));
  learner::LearnerServiceIoOptions io_options;
  io_options.placement = learner::ReplayPlacement::kBuffer;
  io_options.learner_cache = c.learner_cache;
  io_options.assemble_ahead = c.assemble_ahead;
  ASSIGN_OR_RETURN(std::unique_ptr<learner::LearnerServiceIo> io,
                   learner::LearnerServiceIo::Create(session.get(), io_options));
  rl::TransitionBatch batch(StackBytes(trace), rl::ObservationType::kUint8);
  std::vector<float> weights;
  std::vector<learner::EntryOrigin> origins;
  std::mt19937 random(static_cast<uint32_t>(c.seed));
  std::uniform_real_distribution<float> td_error(0.05f, 2.0f);
  std::vector<float> update;
  uint64_t consumed = 0;
  auto take = [&](Snapshot* s) {
    s->when = absl::Now();
    s->link = session->link_bytes();
    s->reader = *io->batch_reader_stats();
    s->server = server.ReadStats();
    s->consumed = consumed;
    // Entries whose stacks could not be assembled (a record the cache
    // could not serve).
    s->left_out = io->transitions_dropped();
    s->distinct_fetched = s->reader.distinct_transitions_fetched;
    s->cpu_ns = ThreadCpuNanos();
    s->assembly_cpu_ns = io->assembly_cpu_ns();
  };
  Pacer pacer(c.consume_rate, c.batch_size);
  bool began = false;
  for (;;) {
    const int phase = shared->phase.load();
    if (phase == kWindow && !began) {
      take(begin);
      began = true;
    }
    if (phase == kStop) {
      if (began) take(end);
      return absl::OkStatus();
    }
    // The learner consumes at most consume_rate transitions a second.
    if (const absl::Duration wait = pacer.Wait(); wait > absl::ZeroDuration()) {
      absl::SleepFor(std::min(wait, absl::Milliseconds(20)));
      continue;
    }
    ASSIGN_OR_RETURN(const bool got, io->Next(kNextPoll, &batch, &weights, &origins));
    if (!got) continue;
    update.resize(batch.size());
    for (float& p : update) p = td_error(random);
    RETURN_IF_ERROR(io->WritePriorities(update));
    consumed += batch.size();
    pacer.Consumed(batch.size());
    ++shared->batches;
  }
}

// The hybrid and learner placements: the learner's own replay
// (LocalReplaySource) of what the server forwards, sampled at consume_rate
// and samples_per_insert, with random |TD errors| as priorities.
absl::Status RunLocalLearner(const FrameFeedConfig& c, const FrameFeedArm& arm, const Trace& trace,
                             const server::ReplayServer& server, Shared* shared, Snapshot* begin,
                             Snapshot* end) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider,
                   verbs::CreateProvider(SoftProvider()));
  ClientSessionOptions so = SessionOptionsFor(server, Role::kLearner, c.link);
  const bool hybrid = arm.placement == FeedPlacement::kHybrid;
  so.learner_cache = hybrid && c.learner_cache;
  so.learner_placement = !hybrid;
  ASSIGN_OR_RETURN(std::unique_ptr<ClientSession> session,
                   ClientSession::Connect(provider.get(), so));
  learner::LearnerServiceIoOptions io_options;
  io_options.placement =
      hybrid ? learner::ReplayPlacement::kHybrid : learner::ReplayPlacement::kLearner;
  ASSIGN_OR_RETURN(std::unique_ptr<learner::LearnerServiceIo> io,
                   learner::LearnerServiceIo::Create(session.get(), io_options));
  learner::LearnerLoopOptions loop;
  loop.placement = io_options.placement;
  loop.memory.capacity = c.capacity;
  loop.memory.seed = c.seed;
  loop.batch_size = c.batch_size;
  loop.min_replay_size = 2 * c.batch_size;
  loop.samples_per_insert = c.samples_per_insert;
  loop.spi_error_buffer = 4.0 * c.batch_size;
  learner::MetricsRecorder metrics(learner::ReplayPlacementName(loop.placement), c.seed, 1.0);
  learner::ReplaySourceContext context;
  context.metrics = &metrics;
  context.observation_size = static_cast<int>(StackBytes(trace));
  context.observation_type = rl::ObservationType::kUint8;
  context.action_count = trace.action_count;
  context.frame_stack = arm.kind == TraceFeeder::kFrames ? rl::minatar::kFrameStackDepth : 0;
  context.wall_clock_ns = [] { return static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())); };
  ASSIGN_OR_RETURN(std::unique_ptr<learner::LocalReplaySource> source,
                   learner::LocalReplaySource::Create(loop, io.get(), context));
  rl::TransitionBatch batch(StackBytes(trace), rl::ObservationType::kUint8);
  std::vector<float> weights;
  std::mt19937 random(static_cast<uint32_t>(c.seed));
  std::uniform_real_distribution<float> td_error(0.05f, 2.0f);
  std::vector<float> errors;
  uint64_t consumed = 0;
  auto take = [&](Snapshot* s) {
    s->when = absl::Now();
    s->link = session->link_bytes();
    s->server = server.ReadStats();
    s->consumed = consumed;
    s->left_out = source->transitions_dropped();
    if (const learner::BatchReaderStats* reader = io->batch_reader_stats(); reader != nullptr) {
      s->reader = *reader;
    }
    s->distinct_fetched = io->link_stats().distinct_transitions_fetched;
    s->cpu_ns = ThreadCpuNanos();
  };
  Pacer pacer(c.consume_rate, c.batch_size);
  bool began = false;
  for (;;) {
    const int phase = shared->phase.load();
    if (phase == kWindow && !began) {
      take(begin);
      began = true;
    }
    if (phase == kStop) {
      if (began) take(end);
      return absl::OkStatus();
    }
    if (const absl::Duration wait = pacer.Wait(); wait > absl::ZeroDuration()) {
      // Forwarding goes on while the learner waits for its next step.
      RETURN_IF_ERROR(source->Idle(std::min(wait, absl::Milliseconds(20))));
      continue;
    }
    ASSIGN_OR_RETURN(const bool ready, source->Next(kNextPoll, &batch, &weights));
    if (!ready) continue;
    errors.resize(batch.size());
    for (float& e : errors) e = td_error(random);
    RETURN_IF_ERROR(source->Trained(errors));
    consumed += batch.size();
    pacer.Consumed(batch.size());
    ++shared->batches;
  }
}

}  // namespace

absl::Status FrameFeedConfig::Validate() const {
  if (!(consume_rate > 0 && consume_rate <= 1e7)) {
    return absl::InvalidArgumentError(absl::StrCat("consume_rate=", consume_rate, ": (0, 1e7]"));
  }
  if (!(samples_per_insert >= 1 && samples_per_insert <= 1024)) {
    return absl::InvalidArgumentError(
        absl::StrCat("samples_per_insert=", samples_per_insert, ": [1, 1024]"));
  }
  if (batch_size < 1 || batch_size > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size=", batch_size, ": [1, 4096]"));
  }
  if (capacity < 4 * batch_size || (capacity & (capacity - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("capacity=", capacity, ": a power of two, at least 4 batches"));
  }
  if (environments < 1 || environments > 64) {
    return absl::InvalidArgumentError(absl::StrCat("environments=", environments, ": [1, 64]"));
  }
  if (warmup < absl::ZeroDuration() || window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("warmup must be >= 0 and window > 0");
  }
  rl::NStepOptions n;
  n.n = nstep;
  return n.Validate();
}

absl::StatusOr<FrameFeedResult> RunFrameFeedArm(const FrameFeedConfig& c, const FrameFeedArm& arm,
                                                const Trace& trace) {
  RETURN_IF_ERROR(c.Validate());
  if (arm.placement == FeedPlacement::kLearner && arm.link_codec.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(arm.name,
                     ": the learner placement READs the slots as actors wrote them; "
                     "it has no link codec"));
  }
  rl::NStepOptions nstep;
  nstep.n = c.nstep;
  const size_t item_bytes = TraceFeeder(&trace, arm.kind, 1, nstep).item_bytes();
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider,
                   verbs::CreateProvider(SoftProvider()));
  ASSIGN_OR_RETURN(
      std::unique_ptr<server::ReplayServer> server,
      server::ReplayServer::Start(provider.get(), ServerOptionsFor(c, arm, trace, item_bytes)));
  Shared shared;
  Snapshot begin, end;
  std::thread actor([&] {
    const absl::Status s = RunActor(c, arm, trace, *server, &shared);
    if (!s.ok()) shared.Fail(s, "actor");
  });
  std::thread learner([&] {
    const absl::Status s = arm.placement == FeedPlacement::kBuffer
                               ? RunLearner(c, arm, trace, *server, &shared, &begin, &end)
                               : RunLocalLearner(c, arm, trace, *server, &shared, &begin, &end);
    if (!s.ok()) shared.Fail(s, "learner");
  });
  // Warm up: the first batch, then the warmup time; then the window.
  const absl::Time setup_deadline = absl::Now() + kSetupTimeout;
  while (shared.batches.load() == 0 && shared.phase.load() != kStop &&
         absl::Now() < setup_deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (shared.batches.load() == 0 && shared.phase.load() != kStop) {
    shared.Fail(absl::DeadlineExceededError("no batch within the setup time"), "learner");
  }
  if (shared.phase.load() != kStop) absl::SleepFor(c.warmup);
  int expected = kWarmup;
  if (shared.phase.compare_exchange_strong(expected, kWindow)) absl::SleepFor(c.window);
  shared.phase = kStop;
  actor.join();
  learner.join();
  const absl::Status stopped = server->Stop();
  RETURN_IF_ERROR(shared.Status());
  RETURN_IF_ERROR(stopped);

  FrameFeedResult r;
  r.arm = arm;
  r.seconds = absl::ToDoubleSeconds(end.when - begin.when);
  r.inserted = end.server.inserted - begin.server.inserted;
  r.records_inserted =
      r.inserted + (end.server.frame_only_records - begin.server.frame_only_records);
  r.consumed = end.consumed - begin.consumed;
  r.left_out = end.left_out - begin.left_out;
  r.distinct_fetched = end.distinct_fetched - begin.distinct_fetched;
  if (const uint64_t n =
          end.server.crossing_percentile_count - begin.server.crossing_percentile_count;
      n > 0) {
    r.crossing_percentile =
        (end.server.crossing_percentile_sum - begin.server.crossing_percentile_sum) / n;
  }
  const client::LinkBytes& a = begin.link;
  const client::LinkBytes& b = end.link;
  r.link.experience = b.experience - a.experience;
  r.link.metadata = b.metadata - a.metadata;
  r.link.polling = b.polling - a.polling;
  r.link.priorities = b.priorities - a.priorities;
  r.link.params = b.params - a.params;
  r.link.control = b.control - a.control;
  r.packed_in = end.server.link_packed_in_bytes - begin.server.link_packed_in_bytes;
  r.packed_out = end.server.link_packed_out_bytes - begin.server.link_packed_out_bytes;
  r.server_pack_cpu_s = (end.server.link_pack_cpu_ns - begin.server.link_pack_cpu_ns) * 1e-9;
  r.unpacked = end.reader.unpacked_bytes - begin.reader.unpacked_bytes;
  r.learner_unpack_cpu_s = (end.reader.unpack_cpu_ns - begin.reader.unpack_cpu_ns) * 1e-9;
  r.learner_cpu_s = (end.cpu_ns - begin.cpu_ns) * 1e-9;
  r.assembly_cpu_s = (end.assembly_cpu_ns - begin.assembly_cpu_ns) * 1e-9;
  r.actor_cpu_s = shared.actor_cpu_ns.load() * 1e-9;
  if (r.seconds <= 0 || r.inserted == 0 || r.consumed == 0) {
    return absl::UnavailableError(absl::StrCat(arm.name, ": nothing moved in the window (",
                                               r.inserted, " inserted, ", r.consumed,
                                               " consumed in ", r.seconds, " s)"));
  }
  return r;
}

}  // namespace dreplay::tools
