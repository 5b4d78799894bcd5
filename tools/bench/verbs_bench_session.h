// Copyright dreplay authors.
//
// verbs_bench_session.h: both ends of one tools/bench/verbs_bench connection.
//
// The client asks in its connect payload for a region of size x depth bytes;
// the server registers one for that connection and replies with its
// RemoteRegion. The server never polls: one-sided verbs need no server CPU.
//
//   ASSIGN_OR_RETURN(auto provider, MakeBenchProvider(config));
//   ASSIGN_OR_RETURN(auto client, ConnectBenchClient(provider.get(), host, port, config));
//   // post to client->qp against client->remote, from client->mr
//
// Blocking; thread-safe across sessions (each session's queue pair belongs
// to one thread at a time, as verbs.h says).

#ifndef DREPLAY_TOOLS_BENCH_VERBS_BENCH_SESSION_H_
#define DREPLAY_TOOLS_BENCH_VERBS_BENCH_SESSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/verbs_bench_config.h"
#include "verbs/shareable_memory.h"
#include "verbs/verbs.h"

namespace dreplay::tools {

// The server's side of one connection. Members are destroyed in reverse
// order: the queue pair, then the registration, then the memory. The
// memory is shareable (one segment), so a soft client on the same host
// WRITEs and READs it through a mapping unless --soft_transport=tcp.
struct BenchServerSession {
  verbs::ShareableMemory memory;
  std::unique_ptr<verbs::MemoryRegion> mr;
  std::unique_ptr<verbs::QueuePair> qp;
};

// The client's side: its own region (the source of WRITEs and atomics, the
// destination of READs) and the server's.
struct BenchClientSession {
  std::vector<uint64_t> memory;
  std::unique_ptr<verbs::MemoryRegion> mr;
  std::unique_ptr<verbs::QueuePair> qp;
  verbs::RemoteRegion remote;
};

// The provider the config names. InvalidArgument when an emulated link is
// asked of a provider other than "soft"; CreateProvider's errors.
absl::StatusOr<std::unique_ptr<verbs::Provider>> MakeBenchProvider(const VerbsBenchConfig& config);

// Accepts one client on `listener` within `timeout` (DeadlineExceeded when
// none came). A bad request is rejected (the client sees why) and reported
// as InvalidArgument; the registration's and the accept's errors.
absl::StatusOr<std::unique_ptr<BenchServerSession>> ServeOneBenchClient(
    verbs::Provider* provider, verbs::Listener* listener, absl::Duration timeout,
    const verbs::QueuePairOptions& options);

// Connects to a server at host:port. DataLoss when its reply is not a
// region of at least config.region_bytes(); the connection's errors.
absl::StatusOr<std::unique_ptr<BenchClientSession>> ConnectBenchClient(
    verbs::Provider* provider, const std::string& host, uint16_t port,
    const VerbsBenchConfig& config);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_VERBS_BENCH_SESSION_H_
