// Copyright dreplay authors.
//
// server_run.h: the `replay_server` binary's run once its flags are
// options: start the provider and the ReplayServer, the Prometheus endpoint
// (before the port files, so both serve once a port file appears), write
// the port files, print "metrics on URL" and "listening on HOST:PORT", then
// serve until a stop signal, writing a checkpoint on each SIGUSR1, and stop
// cleanly (a final checkpoint with a checkpoint directory).
//
//   StopSignals signals(StopSignals::Mode::kBlockAndWait);  // before threads
//   RETURN_IF_ERROR(RunServer(options, signals));

#ifndef DREPLAY_REPLAY_SERVER_SERVER_RUN_H_
#define DREPLAY_REPLAY_SERVER_SERVER_RUN_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/metrics_http.h"
#include "common/stop_signals.h"
#include "replay_server/server.h"
#include "verbs/verbs.h"

namespace dreplay::server {

struct ServerRunOptions {
  ReplayServerOptions server;
  verbs::ProviderOptions provider;
  std::optional<MetricsHttpOptions> metrics;  // serve /metrics
  std::string port_file;                      // the server's port; empty: none
  std::string metrics_port_file;              // the endpoint's port; needs `metrics`
  std::string verification_log;               // common/verification_log.h; empty: none
};

// Serves until `signals` (kBlockAndWait, created before any thread) asks to
// stop. Errors: the provider's, the server's start and stop, the endpoint's
// (prefixed "--metrics_listen: "), the port files'.
absl::Status RunServer(const ServerRunOptions& options, StopSignals& signals);

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_SERVER_RUN_H_
