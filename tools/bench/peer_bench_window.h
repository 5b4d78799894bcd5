// Copyright dreplay authors.
//
// peer_bench_window.h: the measured window of a tools/bench/peer_bench arm that
// runs its own client threads (the Redis and gRPC arms; the dreplay arm
// measures with replay_bench's run, the same way): clients connect and say
// so, the warmup passes, the counters are read at both ends of the window,
// then the clients stop and are joined.
//
//   PeerArmState state;
//   std::vector<PeerClient> clients = {{"writer 0", [&](PeerArmState* s) { ... }}};
//   ASSIGN_OR_RETURN(PeerCaseResult r, RunPeerClients(c, PeerSystem::kGrpc, clients, &state));
//
// A client increments `ready` once connected, adds what it inserted or
// sampled to the counters as it goes, and returns when `stop` is set.

#ifndef DREPLAY_TOOLS_BENCH_PEER_BENCH_WINDOW_H_
#define DREPLAY_TOOLS_BENCH_PEER_BENCH_WINDOW_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "tools/bench/peer_bench_config.h"

namespace dreplay::tools {

// Shared by the client threads of one arm and the measuring thread. The
// atomics and the methods are thread-safe.
class PeerArmState {
 public:
  std::atomic<bool> stop{false};  // clients return
  std::atomic<int> ready{0};      // clients connected and running
  // Transitions that entered the prioritized memory, and transitions in the
  // batches the reader received.
  std::atomic<uint64_t> inserted{0};
  std::atomic<uint64_t> sampled{0};

  // Keeps the first failure and stops the arm.
  void Fail(const absl::Status& s);
  absl::Status status() const;

 private:
  mutable Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

struct PeerClient {
  std::string name;  // named in its failure
  std::function<absl::Status(PeerArmState*)> run;
};

// This process's CPU time (every thread), in seconds.
double ProcessCpuSeconds();

// Starts one thread per client, waits until all are ready (DeadlineExceeded
// after a minute), lets c.warmup pass, measures c.duration, stops and joins
// them. `cpu_seconds` tells the CPU time the arm has used so far (read at
// the two ends of the window). Blocking. The first client failure, with its
// name, otherwise.
absl::StatusOr<PeerCaseResult> RunPeerClients(const PeerCase& c, PeerSystem system,
                                              const std::vector<PeerClient>& clients,
                                              const std::function<double()>& cpu_seconds,
                                              PeerArmState* state);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_PEER_BENCH_WINDOW_H_
