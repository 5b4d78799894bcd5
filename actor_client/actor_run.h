// Copyright dreplay authors.
//
// actor_run.h: the `actor` binary's run on a connected session, once its
// flags are options: check the server's configuration against this actor's
// layout, wire the service clients (and, with `metrics`, the Prometheus
// endpoint, fed at every stats publication) to an ActorLoop, run it until it
// ends or a stop is requested, and log what it did.

#ifndef DREPLAY_ACTOR_CLIENT_ACTOR_RUN_H_
#define DREPLAY_ACTOR_CLIENT_ACTOR_RUN_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "actor_client/actor_layout.h"
#include "actor_client/actor_loop.h"
#include "client/retry.h"
#include "client/session.h"
#include "common/metrics_http.h"
#include "common/stop_signals.h"

namespace dreplay::actor {

struct ActorRunOptions {
  client::RetryPolicy retry;
  std::optional<MetricsHttpOptions> metrics;  // serve /metrics
  // How the network was given, for a mismatch message (e.g. "--hidden=64,64").
  std::string network_description;
  std::string server;  // for the log line
  // A P record per committed transition (common/verification_log.h; for
  // tools/chaos/chaos.py); empty: none.
  std::string verification_log;
};

// Runs the loop until it ends or `signals` asks it to stop (a connection
// failure after a stop request ends the run normally). Errors: the server's
// configuration, the service clients', the loop's, the endpoint's.
absl::Status RunActor(client::ClientSession* session, const ActorLoopOptions& options,
                      const ActorLayout& layout, const ActorRunOptions& run,
                      const StopSignals& signals, const std::string& provider_name);

}  // namespace dreplay::actor

#endif  // DREPLAY_ACTOR_CLIENT_ACTOR_RUN_H_
