// Copyright dreplay authors.
//
// stats_monitor.h: the client side of the multi-process tests: session
// options for a ServerProcess, and a monitor that waits for conditions on
// the server's stats region (READ as any monitor would).
//
//   auto host = testing::SoftProvider();
//   ASSIGN_OR_RETURN(auto monitor, StatsMonitor::Connect(host.get(), *server));
//   ASSIGN_OR_RETURN(StatsBlock s, monitor->WaitUntil(
//       "every transition ingested", [&](const StatsBlock& s) { return s.inserted == n; }));
//
// Not thread-safe: one thread uses a StatsMonitor.

#ifndef DREPLAY_TESTING_STATS_MONITOR_H_
#define DREPLAY_TESTING_STATS_MONITOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/session.h"
#include "client/stats_reader.h"
#include "protocol/handshake.h"
#include "protocol/layout.h"
#include "testing/server_process.h"
#include "verbs/verbs.h"

namespace dreplay::testing {

// How long a test waits for the server to reach a state.
inline constexpr absl::Duration kConditionTimeout = absl::Seconds(30);

// Options to connect to `server` as `role`; connect and op deadlines suit a
// loaded test machine.
client::ClientSessionOptions ClientOptions(const ServerProcess& server, protocol::Role role,
                                           uint32_t actor_id = 0, const std::string& token = "");

class StatsMonitor {
 public:
  // Connects as a monitor (with `token`).
  static absl::StatusOr<std::unique_ptr<StatsMonitor>> Connect(verbs::Provider* provider,
                                                               const ServerProcess& server,
                                                               const std::string& token = "");

  // A consistent snapshot of the stats region.
  absl::StatusOr<protocol::StatsBlock> Stats();
  // Polls Stats() until `condition` holds; returns that snapshot.
  // DeadlineExceeded naming `what` and the last snapshot's counters after
  // `timeout`; READ errors as they come.
  absl::StatusOr<protocol::StatsBlock> WaitUntil(
      const std::string& what, const std::function<bool(const protocol::StatsBlock&)>& condition,
      absl::Duration timeout = kConditionTimeout);

  client::ClientSession* session() const { return session_.get(); }

 private:
  StatsMonitor() = default;
  std::unique_ptr<client::ClientSession> session_;
  std::unique_ptr<client::StatsReader> reader_;
};

// "inserted=.. size=.. torn=.. ..." for failure messages.
std::string StatsSummary(const protocol::StatsBlock& s);

}  // namespace dreplay::testing

#endif  // DREPLAY_TESTING_STATS_MONITOR_H_
