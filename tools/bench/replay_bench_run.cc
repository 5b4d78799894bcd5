// Copyright dreplay authors.

#include "tools/bench/replay_bench_run.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "protocol/stats.h"
#include "replay/rate_limiter.h"
#include "replay_server/server.h"
#include "tools/bench/replay_bench_clients.h"
#include "verbs/verbs.h"

namespace dreplay::tools {
namespace {

// How long the clients may take to connect (1,024 handshakes on a loaded
// 2-core host took more than a minute).
constexpr absl::Duration kSetupTimeout = absl::Seconds(180);

// The clients' counters and the server's ingest at one moment.
struct Totals {
  uint64_t committed = 0;
  uint64_t bytes_in = 0;
  uint64_t reconnects = 0;
  uint64_t sampled = 0;
  uint64_t batches = 0;
  uint64_t bytes_out = 0;
  uint64_t inserted = 0;
  absl::Time when;
  double cpu_seconds = 0;  // the process's CPU time
};

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

absl::StatusOr<Totals> TakeTotals(const ReplayBenchConfig& c, ReplayBenchState* state,
                                  const BenchServer& server) {
  Totals t;
  for (int i = 0; i < c.actors; ++i) {
    t.committed += state->actor(i).transitions.load();
    t.bytes_in += state->actor(i).bytes.load();
    t.reconnects += state->actor(i).reconnects.load();
  }
  t.sampled = state->learner().transitions.load();
  t.batches = state->learner().batches.load();
  t.bytes_out = state->learner().bytes.load();
  ASSIGN_OR_RETURN(const protocol::StatsBlock stats, server.ReadStats());
  t.inserted = stats.inserted;
  t.when = absl::Now();
  t.cpu_seconds = ProcessCpuSeconds();
  return t;
}

// Waits until `n` clients are ready or the run failed.
absl::Status WaitReady(ReplayBenchState* state, int n) {
  const absl::Time deadline = absl::Now() + kSetupTimeout;
  while (state->ready.load() < n) {
    RETURN_IF_ERROR(state->status());
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(state->ready.load(), " of ", n,
                                                      " clients connected within ",
                                                      absl::FormatDuration(kSetupTimeout)));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return state->status();
}

// With a samples-per-insert limit, waits until the server's limiter runs at
// its ratio: the memory holds min_size_to_sample and the transitions staged
// are within the error buffer (and a batch) of the budget. Until then the
// sampler may be catching up on the credit of inserts made while the
// actors' windows evicted the prefill below min_size_to_sample, and a window
// opened then would measure the catch-up, not the ratio.
absl::Status WaitLimiterSettled(const ReplayBenchConfig& c, const BenchServer& server,
                                ReplayBenchState* state) {
  const replay::RateLimiterOptions o =
      BenchServerOptions(c, server.host(), server.port()).core.sampler.rate_limiter;
  if (o.samples_per_insert == 0) return absl::OkStatus();
  const double slack = o.error_buffer + c.layout.batch_size;
  const absl::Time deadline = absl::Now() + kSetupTimeout;
  for (;;) {
    RETURN_IF_ERROR(state->status());
    ASSIGN_OR_RETURN(const protocol::StatsBlock st, server.ReadStats());
    const double budget = o.samples_per_insert * (static_cast<double>(st.inserted) -
                                                  static_cast<double>(o.min_size_to_sample));
    const double gap = budget - static_cast<double>(st.sampled);
    if (st.size >= o.min_size_to_sample && gap <= slack && gap >= -slack) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the rate limiter did not reach its ratio within ", absl::FormatDuration(kSetupTimeout),
          ": ", st.size, " transitions in memory (sampling needs ", o.min_size_to_sample,
          "), inserted ", st.inserted, ", staged ", st.sampled, ", budget ", budget));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// After the warmup (and the limiter settling), opens the window for
// config.duration and fills `r`'s rates from the counters at its two ends.
absl::Status MeasureWindow(const ReplayBenchConfig& c, const BenchServer& server,
                           ReplayBenchState* state, ReplayRunResult* r) {
  absl::SleepFor(c.warmup);
  RETURN_IF_ERROR(WaitLimiterSettled(c, server, state));
  ASSIGN_OR_RETURN(const Totals begin, TakeTotals(c, state, server));
  state->measuring = true;
  absl::SleepFor(c.duration);
  state->measuring = false;
  ASSIGN_OR_RETURN(const Totals end, TakeTotals(c, state, server));
  ASSIGN_OR_RETURN(r->server, server.ReadStats());
  const double s = absl::ToDoubleSeconds(end.when - begin.when);
  r->seconds = s;
  r->cpu_seconds = end.cpu_seconds - begin.cpu_seconds;
  r->inserted_per_s = (end.inserted - begin.inserted) / s;
  r->committed_per_s = (end.committed - begin.committed) / s;
  r->bytes_in_per_s = (end.bytes_in - begin.bytes_in) / s;
  r->insert_gbps = r->committed_per_s * c.layout.slot_size * 8 / 1e9;
  r->sampled_per_s = (end.sampled - begin.sampled) / s;
  r->batches_per_s = (end.batches - begin.batches) / s;
  r->bytes_out_per_s = (end.bytes_out - begin.bytes_out) / s;
  r->writer_reconnects = end.reconnects;
  return absl::OkStatus();
}

// The bytes of each class from `begin` to `end` (counts of one session).
client::LinkBytes Minus(const client::LinkBytes& end, const client::LinkBytes& begin) {
  client::LinkBytes d;
  d.experience = end.experience - begin.experience;
  d.metadata = end.metadata - begin.metadata;
  d.polling = end.polling - begin.polling;
  d.priorities = end.priorities - begin.priorities;
  d.params = end.params - begin.params;
  d.control = end.control - begin.control;
  return d;
}

// `s` with "<who>: " before its message.
absl::Status Named(const absl::Status& s, absl::string_view who) {
  return absl::Status(s.code(), absl::StrCat(who, ": ", s.message()));
}

// Starts the clients on `server`, measures, stops and joins them.
absl::StatusOr<ReplayRunResult> MeasureClients(const ReplayBenchConfig& c,
                                               const BenchServer& server) {
  std::unique_ptr<verbs::Provider> shared_actor_provider;
  if (c.shared_actor_provider && c.actors > 0) {
    ASSIGN_OR_RETURN(shared_actor_provider, verbs::CreateProvider(c.provider));
  }
  ReplayBenchState state(c.actors);
  LearnerFigures learner;
  std::vector<std::thread> threads;
  const absl::Time clients_start = absl::Now();
  if (c.actor_threads == 0) {
    for (int i = 0; i < c.actors; ++i) {
      threads.emplace_back([&, i] {
        const absl::Status s = RunBenchActor(c, server, i, shared_actor_provider.get(), &state);
        if (!s.ok()) state.Fail(Named(s, absl::StrCat("actor ", i)));
      });
      pthread_setname_np(threads.back().native_handle(), "bench-actor");
    }
  } else {
    // Actors [first, first + count) per thread, as evenly as they go; each
    // thread sets up its share of connect_in_flight connections at once.
    const int connectors = std::max(1, c.connect_in_flight / c.actor_threads);
    for (int t = 0; t < c.actor_threads; ++t) {
      const int first = c.actors * t / c.actor_threads;
      const int count = c.actors * (t + 1) / c.actor_threads - first;
      if (count == 0) continue;
      threads.emplace_back([&, first, count] {
        const absl::Status s = RunBenchActorGroup(c, server, first, count, connectors, &state);
        if (!s.ok()) state.Fail(Named(s, absl::StrCat("actors ", first, "..")));
      });
      pthread_setname_np(threads.back().native_handle(), "bench-actors");
    }
  }
  if (c.stalled_actors > 0) {
    threads.emplace_back([&] {
      const absl::Status s = RunStalledActors(c, server, c.actors, c.stalled_actors, &state);
      if (!s.ok()) state.Fail(Named(s, "stalled actors"));
    });
  }
  if (c.learner) {
    threads.emplace_back([&] {
      const absl::Status s = RunBenchLearner(c, server, &state, &learner);
      if (!s.ok()) state.Fail(Named(s, "learner"));
    });
    pthread_setname_np(threads.back().native_handle(), "bench-learner");
  }
  ReplayRunResult r;
  absl::Status status = WaitReady(&state, c.actors + c.stalled_actors + (c.learner ? 1 : 0));
  r.connect_seconds = absl::ToDoubleSeconds(absl::Now() - clients_start);
  if (status.ok()) status = MeasureWindow(c, server, &state, &r);
  state.stop = true;
  for (std::thread& t : threads) t.join();
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(state.status());
  r.insert_latency = state.insert_latencies();
  r.batch_wait = learner.batch_wait;
  r.batch_read = learner.batch_read;
  r.reader_torn = learner.reader.torn;
  r.reader_not_staged = learner.reader.not_staged;
  // A window in which the clients moved nothing measured a stall, not a rate.
  if (c.actors > 0 && r.committed_per_s == 0) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the actors committed nothing in the ", r.seconds, " s window (server: ", r.server.inserted,
        " inserted, ", r.server.size, " in memory, ", r.server.sampled, " staged)"));
  }
  if (c.learner && r.sampled_per_s == 0) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the learner received nothing in the ", r.seconds, " s window (server: ", r.server.inserted,
        " inserted, ", r.server.size, " in memory, ", r.server.sampled, " staged)"));
  }
  r.samples_per_insert = r.inserted_per_s > 0 ? r.sampled_per_s / r.inserted_per_s : 0;
  r.link_bytes = Minus(learner.window_end.link_bytes, learner.window_begin.link_bytes);
  r.transitions_fetched =
      learner.window_end.transitions_fetched - learner.window_begin.transitions_fetched;
  r.distinct_transitions_fetched = learner.window_end.distinct_transitions_fetched -
                                   learner.window_begin.distinct_transitions_fetched;
  return r;
}

}  // namespace

absl::StatusOr<ReplayRunResult> RunReplayBenchOnce(const ReplayBenchConfig& c) {
  std::unique_ptr<BenchServer> server;
  if (c.remote_host.empty()) {
    ASSIGN_OR_RETURN(server, StartLocalBenchServer(c));
  } else {
    ASSIGN_OR_RETURN(server, ConnectRemoteBenchServer(c, c.remote_host, c.remote_port));
  }
  absl::Status status = Prefill(c, *server);
  absl::StatusOr<ReplayRunResult> r =
      status.ok() ? MeasureClients(c, *server) : absl::StatusOr<ReplayRunResult>(status);
  const absl::Status stopped = server->Stop();
  RETURN_IF_ERROR(r.status());
  RETURN_IF_ERROR(stopped);
  return r;
}

absl::StatusOr<ReplayBenchRound> RunReplayBenchRound(const ReplayBenchConfig& c) {
  ReplayBenchRound round;
  ASSIGN_OR_RETURN(round.main, RunReplayBenchOnce(c));
  if (c.nolink_baseline) {
    ReplayBenchConfig without = c;
    without.link = verbs::LinkModel();
    without.link_spec = "none";
    absl::StatusOr<ReplayRunResult> r = RunReplayBenchOnce(without);
    if (!r.ok()) return Named(r.status(), "the run without --link");
    round.nolink = *r;
  }
  if (c.tcp_baseline) {
    ASSIGN_OR_RETURN(round.tcp, RunLoopbackTcpStream(c.layout.slot_size, c.duration));
  }
  return round;
}

}  // namespace dreplay::tools
