// Copyright dreplay authors.

#include "replay_server/server_run.h"

#include <cstring>
#include <iostream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/port_file.h"
#include "common/status_macros.h"
#include "common/verification_log.h"
#include "glog/logging.h"
#include "replay_server/prometheus_metrics.h"

namespace dreplay::server {

absl::Status RunServer(const ServerRunOptions& options, StopSignals& signals) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider,
                   verbs::CreateProvider(options.provider));
  std::unique_ptr<VerificationLog> verification_log;
  ReplayServerOptions server_options = options.server;
  if (!options.verification_log.empty()) {
    ASSIGN_OR_RETURN(verification_log, VerificationLog::Open(options.verification_log));
    server_options.core.ingest.verification_log = verification_log.get();
    server_options.core.sampler.verification_log = verification_log.get();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ReplayServer> server,
                   ReplayServer::Start(provider.get(), server_options));
  if (verification_log) verification_log->Started(server->epoch());
  // The metrics endpoint first: once the port file appears, both serve.
  std::unique_ptr<MetricsHttpServer> metrics;
  if (options.metrics.has_value()) {
    const ReplayServer* running = server.get();
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started = MetricsHttpServer::Start(
        *options.metrics,
        [running] { return RenderServerMetrics(CollectServerMetrics(*running)); });
    if (!started.ok()) {
      return absl::Status(started.status().code(),
                          absl::StrCat("--metrics_listen: ", started.status().message()));
    }
    metrics = std::move(started).value();
    if (!options.metrics_port_file.empty()) {
      RETURN_IF_ERROR(WritePortFile(options.metrics_port_file, metrics->port()));
    }
    std::cout << "metrics on " << metrics->url() << std::endl;
  }
  if (!options.port_file.empty()) RETURN_IF_ERROR(WritePortFile(options.port_file, server->port()));
  std::cout << "listening on " << server->address() << std::endl;

  while (signals.WaitForEvent(absl::InfiniteDuration()) == StopSignals::Event::kRequest) {
    const absl::Status s = server->RequestCheckpoint();
    if (s.ok()) {
      LOG(INFO) << "received SIGUSR1: writing a checkpoint";
    } else {
      LOG(WARNING) << "received SIGUSR1: " << s.message();
    }
  }
  LOG(INFO) << "received " << strsignal(signals.signal_number()) << ", stopping";
  metrics.reset();  // no scrape reads the server once it stops
  const absl::Status stopped = server->Stop();
  server.reset();
  return stopped;
}

}  // namespace dreplay::server
