// Copyright dreplay authors.
//
// replay_bench_server.h: the server a tools/bench/replay_bench run measures,
// in this process or in another one (on another host, or in another network
// namespace):
//
//   // In process: a ReplayServer on loopback with the run's layout.
//   ASSIGN_OR_RETURN(auto server, StartLocalBenchServer(config));
//   // Elsewhere: `replay_bench --server` serving the same flags (ServeBench).
//   ASSIGN_OR_RETURN(auto server, ConnectRemoteBenchServer(config, "10.0.0.1", 18515));
//   ASSIGN_OR_RETURN(protocol::StatsBlock st, server->ReadStats());
//
// The clients connect to host():port(); the measuring thread reads the
// server's counters with ReadStats(): in process from the replay core's
// stats, remotely with a monitor session of its own that READs the stats
// region (client/stats_reader.h), so that what is counted is the same.
//
// A run needs the server's layout to be the one its flags give: a remote
// server with another layout is refused (FailedPrecondition).
//
// Thread-safe: ReadStats may be called from any thread.

#ifndef DREPLAY_TOOLS_BENCH_REPLAY_BENCH_SERVER_H_
#define DREPLAY_TOOLS_BENCH_REPLAY_BENCH_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "protocol/layout.h"
#include "replay_server/server.h"
#include "tools/bench/replay_bench_config.h"

namespace dreplay::tools {

class BenchServer {
 public:
  virtual ~BenchServer() = default;
  virtual const std::string& host() const = 0;
  virtual uint16_t port() const = 0;
  // A consistent snapshot of the server's counters.
  virtual absl::StatusOr<protocol::StatsBlock> ReadStats() const = 0;
  // Stops a server this process runs (its first failure); nothing for a
  // remote one.
  virtual absl::Status Stop() = 0;
};

// The options of the server a run with `config` measures, listening on
// `host`:`port` (0: chosen by the OS).
server::ReplayServerOptions BenchServerOptions(const ReplayBenchConfig& config,
                                               const std::string& host, uint16_t port);

// A ReplayServer in this process on 127.0.0.1, on a provider of its own.
// InvalidArgument when a link is emulated on a provider other than "soft";
// the server's start failure otherwise.
absl::StatusOr<std::unique_ptr<BenchServer>> StartLocalBenchServer(const ReplayBenchConfig& config);

// The `replay_bench --server` at host:port, read through a monitor session.
// The connection's failure; FailedPrecondition when its layout is not
// config.layout.
absl::StatusOr<std::unique_ptr<BenchServer>> ConnectRemoteBenchServer(
    const ReplayBenchConfig& config, const std::string& host, uint16_t port);

// `replay_bench --server`: runs the server of `config` on `host`:`port`,
// calls `listening` with its address ("host:port") once it accepts
// clients, and serves until `wait_for_stop` returns; then stops it. The
// server's start or stop failure.
absl::Status ServeBench(const ReplayBenchConfig& config, const std::string& host, uint16_t port,
                        const std::function<void(const std::string&)>& listening,
                        const std::function<void()>& wait_for_stop);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_REPLAY_BENCH_SERVER_H_
