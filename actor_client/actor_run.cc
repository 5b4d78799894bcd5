// Copyright dreplay authors.

#include "actor_client/actor_run.h"

#include <iostream>
#include <memory>
#include <string>

#include "actor_client/prometheus_metrics.h"
#include "actor_client/service_io.h"
#include "common/status_macros.h"
#include "common/verification_log.h"
#include "glog/logging.h"

namespace dreplay::actor {
namespace {

// The service's episode statistics, also handed to the metrics endpoint at
// every Publish().
class ExportingStatsSink : public EpisodeStatsSink {
 public:
  ExportingStatsSink(ActorServiceIo* service, uint32_t actor_index, ActorMetricsExport* exported)
      : service_(service), exported_(exported) {
    metrics_.actor_index = actor_index;
  }
  void RecordSteps(uint64_t steps) override {
    service_->RecordSteps(steps);
    metrics_.env_steps += steps;
  }
  void RecordEpisode(double episode_return) override {
    service_->RecordEpisode(episode_return);
    ++metrics_.episodes;
    metrics_.last_episode_return = episode_return;
  }
  absl::Status Publish(uint64_t transitions) override {
    const absl::Status status = service_->Publish(transitions);
    metrics_.params_version = service_->version();
    metrics_.writer = service_->writer().stats();
    exported_->Update(metrics_);
    return status;
  }

 private:
  ActorServiceIo* const service_;
  ActorMetricsExport* const exported_;
  ActorMetrics metrics_;
};

}  // namespace

absl::Status RunActor(client::ClientSession* session, const ActorLoopOptions& options,
                      const ActorLayout& layout, const ActorRunOptions& run,
                      const StopSignals& signals, const std::string& provider_name) {
  RETURN_IF_ERROR(CheckServerConfig(session->config(), layout, options.actor_index));
  ActorServiceIoOptions io_options;
  // The loop flushes once flush_batch transitions are pending; one step of
  // every environment may add up to n each beyond that.
  io_options.writer.max_batch =
      static_cast<uint32_t>(options.flush_batch + options.num_envs * options.nstep.n);
  io_options.retry = run.retry;
  io_options.network_description = run.network_description;
  std::unique_ptr<VerificationLog> verification_log;  // outlives the writer
  if (!run.verification_log.empty()) {
    ASSIGN_OR_RETURN(verification_log, VerificationLog::Open(run.verification_log));
    io_options.writer.verification_log = verification_log.get();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ActorServiceIo> service,
                   ActorServiceIo::Create(session, io_options));
  ActorIo io = service->io();
  ActorMetricsExport exported;
  ExportingStatsSink exporting_stats(service.get(), static_cast<uint32_t>(options.actor_index),
                                     &exported);
  std::unique_ptr<MetricsHttpServer> metrics_http;  // stopped before what it reads goes
  if (run.metrics.has_value()) {
    ASSIGN_OR_RETURN(metrics_http, MetricsHttpServer::Start(
                                       *run.metrics, [&exported] { return exported.Render(); }));
    std::cout << "metrics on " << metrics_http->url() << std::endl;
    io.stats = &exporting_stats;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ActorLoop> loop, ActorLoop::Create(options, io));
  LOG(INFO) << "actor " << options.actor_index << " of " << options.num_actors << ": "
            << options.num_envs << " x " << options.env << ", epsilon " << loop->epsilons().front()
            << (options.num_envs > 1 ? " .. " : "")
            << (options.num_envs > 1 ? std::to_string(loop->epsilons().back()) : "") << ", server "
            << run.server << " (" << provider_name << ")";
  absl::Status status = loop->Run(signals.flag());
  if (!status.ok() && signals.requested() && client::IsConnectionFailure(status)) {
    // Asked to stop while the server was away: what was pending is lost,
    // which a stop accepts.
    LOG(WARNING) << "stopped while disconnected: " << status;
    status = absl::OkStatus();
  }
  const ActorLoopStats& s = loop->stats();
  LOG(INFO) << "actor " << options.actor_index << ": " << s.env_steps << " env steps, "
            << s.episodes << " episodes, " << service->writer().stats().committed
            << " transitions committed (" << service->writer().stats().abandoned << " abandoned), "
            << s.param_refreshes << " parameter refreshes (version " << service->fetcher().version()
            << ")";
  return status;
}

}  // namespace dreplay::actor
