// Copyright dreplay authors.
//
// service_clients.h: the client side of the multi-process tests: session
// options for a ServerProcess, and a monitor that waits for conditions on
// the server's stats region (READ as any monitor would).
//
//   auto host = replay::testing::SoftProvider();
//   ASSIGN_OR_RETURN(auto monitor, StatsMonitor::Connect(host.get(), *server));
//   ASSIGN_OR_RETURN(StatsBlock s, monitor->WaitUntil(
//       "every transition ingested", [&](const StatsBlock& s) { return s.inserted == n; }));
//
// Not thread-safe: one thread uses a StatsMonitor.

#ifndef DREPLAY_TESTS_SERVICE_CLIENTS_H_
#define DREPLAY_TESTS_SERVICE_CLIENTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "learner_client/stats_reader.h"
#include "replay_server/client_session.h"
#include "replay_server/handshake.h"
#include "replay_server/layout.h"
#include "tests/server_process.h"
#include "verbs/verbs.h"

namespace dreplay::tests {

// How long a test waits for the server to reach a state.
inline constexpr absl::Duration kConditionTimeout = absl::Seconds(30);

// Options to connect to `server` as `role`; connect and op deadlines suit a
// loaded test machine.
replay::ClientSessionOptions ClientOptions(const ServerProcess& server, replay::Role role,
                                           uint32_t actor_id = 0, const std::string& token = "");

class StatsMonitor {
 public:
  // Connects as a monitor (with `token`).
  static absl::StatusOr<std::unique_ptr<StatsMonitor>> Connect(verbs::Provider* provider,
                                                               const ServerProcess& server,
                                                               const std::string& token = "");

  // A consistent snapshot of the stats region.
  absl::StatusOr<replay::StatsBlock> Stats();
  // Polls Stats() until `condition` holds; returns that snapshot.
  // DeadlineExceeded naming `what` and the last snapshot's counters after
  // `timeout`; READ errors as they come.
  absl::StatusOr<replay::StatsBlock> WaitUntil(
      const std::string& what, const std::function<bool(const replay::StatsBlock&)>& condition,
      absl::Duration timeout = kConditionTimeout);

  replay::ClientSession* session() const { return session_.get(); }

 private:
  StatsMonitor() = default;
  std::unique_ptr<replay::ClientSession> session_;
  std::unique_ptr<learner::StatsReader> reader_;
};

// "inserted=.. size=.. torn=.. ..." for failure messages.
std::string StatsSummary(const replay::StatsBlock& s);

}  // namespace dreplay::tests

#endif  // DREPLAY_TESTS_SERVICE_CLIENTS_H_
