// Copyright dreplay authors.
//
// replay_bench_clients.h: the client threads of one tools/bench/replay_bench run
// and the state they share with the thread that measures.
//
//   actor    ExperienceWriter: Append config.max_batch transitions of
//            config.payload_bytes, Flush, over and over; each Flush timed
//            while the window is open.
//   learner  BatchReader (pipelined READs of staged batches) and
//            PriorityWriter (a new random priority per transition), then,
//            after the run, config.read_probes READs of one staging slot
//            alone on its queue pair, timed.
//
// Each client connects its own session (its own provider unless the actors
// share one), signals `ready`, and runs until `stop`. Thread-safe as stated
// per member.

#ifndef DREPLAY_TOOLS_BENCH_REPLAY_BENCH_CLIENTS_H_
#define DREPLAY_TOOLS_BENCH_REPLAY_BENCH_CLIENTS_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "client/link_bytes.h"
#include "common/latency_histogram.h"
#include "common/mutex.h"
#include "learner_client/batch_reader.h"
#include "tools/bench/replay_bench_config.h"
#include "tools/bench/replay_bench_server.h"
#include "verbs/verbs.h"

namespace dreplay::tools {

// Counters a client thread publishes (relaxed) for the measuring thread.
struct ClientCounters {
  std::atomic<uint64_t> transitions{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> reconnects{0};
};

// State shared by the threads of one run. The atomics and the methods are
// thread-safe; actor(i) for i < the `actors` it was made with.
class ReplayBenchState {
 public:
  explicit ReplayBenchState(int actors) : actors_(static_cast<size_t>(actors)) {}

  std::atomic<bool> stop{false};       // the clients return
  std::atomic<bool> measuring{false};  // the window is open: time what you do
  std::atomic<int> ready{0};           // clients connected and running

  ClientCounters& actor(int i) { return actors_[static_cast<size_t>(i)]; }
  ClientCounters& learner() { return learner_; }

  // Keeps the first failure and stops the run.
  void Fail(const absl::Status& s);
  absl::Status status() const;
  // The actors' insert latencies, merged.
  void AddInsertLatencies(const LatencyHistogram& latencies);
  LatencyHistogram insert_latencies() const;
  // Thread-per-actor setup: at most `limit` actors connect at once (the
  // server keeps at most 32 half-open peers per source address, and a
  // connect beyond them would push out another's). BeginConnect blocks
  // while `limit` connects are under way; every BeginConnect is followed
  // by one EndConnect.
  void BeginConnect(int limit);
  void EndConnect();

 private:
  std::vector<ClientCounters> actors_;
  ClientCounters learner_;
  mutable Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  LatencyHistogram insert_latencies_ ABSL_GUARDED_BY(mu_);
  int connecting_ ABSL_GUARDED_BY(mu_) = 0;
  CondVar connect_done_;
};

// What the learner measured besides its counters.
// The learner's cumulative link counters at one moment.
struct LearnerLinkCounts {
  client::LinkBytes link_bytes;  // its session's, by traffic class
  uint64_t transitions_fetched = 0;
  uint64_t distinct_transitions_fetched = 0;
};

struct LearnerFigures {
  LatencyHistogram batch_wait;  // Next(), while measuring
  LatencyHistogram batch_read;  // one staging-slot READ, alone, after the run
  learner::BatchReaderStats reader;
  // Where the learner saw the window open and close (between two batches,
  // so within one Next() of the window's own ends).
  LearnerLinkCounts window_begin;
  LearnerLinkCounts window_end;
};

// Inserts config.prefill transitions with one writer of its own and waits
// until the server has ingested them (DeadlineExceeded after a minute).
absl::Status Prefill(const ReplayBenchConfig& config, const BenchServer& server);

// Actor `id` until state->stop. `shared_provider` may be null: the actor
// then creates its own. The first failure of the session or the writer.
absl::Status RunBenchActor(const ReplayBenchConfig& config, const BenchServer& server, int id,
                           verbs::Provider* shared_provider, ReplayBenchState* state);

// Actors [first_id, first_id + count) on one provider and this thread:
// each has its own session (queue pair) and writer; their Flushes take turns
// until state->stop. The sessions are set up `connectors` at a time, by as
// many helper threads that are joined before the writers run. The first
// failure of a session or a writer.
absl::Status RunBenchActorGroup(const ReplayBenchConfig& config, const BenchServer& server,
                                int first_id, int count, int connectors, ReplayBenchState* state);

// Stalled actors [first_id, first_id + count) on one provider: each is
// granted a lease, WRITEs one batch of sealed slots at its resume sequence
// and never their commit words, then holds its connection until
// state->stop.
absl::Status RunStalledActors(const ReplayBenchConfig& config, const BenchServer& server,
                              int first_id, int count, ReplayBenchState* state);

// The learner until state->stop, then the READ probes. The first failure of
// the session, the reader or the priority writer.
absl::Status RunBenchLearner(const ReplayBenchConfig& config, const BenchServer& server,
                             ReplayBenchState* state, LearnerFigures* figures);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_REPLAY_BENCH_CLIENTS_H_
