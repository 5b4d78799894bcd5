// Copyright dreplay authors.

#include "learner_client/learner_run.h"

#include <iostream>
#include <memory>

#include "common/port_file.h"
#include "common/status_macros.h"
#include "common/verification_log.h"
#include "glog/logging.h"
#include "learner_client/metrics.h"
#include "learner_client/prometheus_metrics.h"
#include "learner_client/snapshot_writer.h"

namespace dreplay::learner {

absl::Status RunLearner(LearnerRunOptions& options, verbs::Provider* provider,
                        const StopSignals& signals) {
  LearnerMetricsExport exported;
  std::unique_ptr<MetricsHttpServer> metrics_http;  // stopped before `exported` goes
  if (options.metrics.has_value()) {
    ASSIGN_OR_RETURN(metrics_http, MetricsHttpServer::Start(*options.metrics, [&exported] {
                       return exported.Render();
                     }));
    std::cerr << "metrics on " << metrics_http->url() << std::endl;
    if (!options.metrics_port_file.empty()) {
      RETURN_IF_ERROR(WritePortFile(options.metrics_port_file, metrics_http->port()));
    }
  }
  // Only a learner-placement learner is given keys to the slots, commit
  // words and forward journal (protocol/handshake.h).
  options.connection.session.learner_placement =
      options.loop.placement == ReplayPlacement::kLearner;
  ASSIGN_OR_RETURN(std::unique_ptr<client::ClientSession> session,
                   client::ConnectWithRetry(provider, options.connection.session, options.retry));
  RETURN_IF_ERROR(ApplyServerConfig(session->config(), options.expected, &options.loop));
  if (options.local_capacity > 0) options.loop.memory.capacity = options.local_capacity;
  std::unique_ptr<MetricsFile> metrics_file;
  if (!options.metrics_out.empty()) {
    ASSIGN_OR_RETURN(metrics_file, MetricsFile::Open(options.metrics_out));
  }
  std::unique_ptr<VerificationLog> verification_log;
  if (!options.verification_log.empty()) {
    ASSIGN_OR_RETURN(verification_log, VerificationLog::Open(options.verification_log));
    options.io.verification_log = verification_log.get();
  }
  options.io.placement = options.loop.placement;
  options.io.retry = options.retry;
  ASSIGN_OR_RETURN(std::unique_ptr<LearnerServiceIo> service,
                   LearnerServiceIo::Create(session.get(), options.io));

  absl::Status metrics_status;
  LearnerIo io = service->io();
  io.on_progress = [&](const ProgressRecord& record) {
    std::cerr << "progress: " << record.ToText() << std::endl;
    exported.Update(record);
    if (metrics_file != nullptr && metrics_status.ok()) {
      metrics_status = metrics_file->Write(record.ToJson());
    }
  };
  std::unique_ptr<SnapshotWriter> snapshots;
  if (!options.snapshot_dir.empty()) {
    ASSIGN_OR_RETURN(snapshots, SnapshotWriter::Open(options.snapshot_dir));
    io.on_snapshot = [&](const SnapshotRecord& record, absl::Span<const uint8_t> params) {
      return snapshots->Write(record, params);
    };
  }
  ASSIGN_OR_RETURN(std::unique_ptr<LearnerLoop> loop, LearnerLoop::Create(options.loop, io));
  LOG(INFO) << "learner: " << ReplayPlacementName(options.loop.placement) << " placement, "
            << options.loop.env << ", server " << options.server << " over link " << options.link
            << " (" << provider->name() << "), batch " << session->config().batch_size
            << ", capacity " << session->config().capacity
            << (options.loop.placement == ReplayPlacement::kBuffer
                    ? std::string()
                    : absl::StrCat(", local replay memory ", options.loop.memory.capacity,
                                   " slots"));
  const absl::Status run = loop->Run(signals.flag());
  if (!run.ok()) {
    if (!signals.requested() || !client::IsConnectionFailure(run)) return run;
    // Asked to stop while the server was away: the run ends here.
    LOG(WARNING) << "stopped while disconnected: " << run;
  }
  const SummaryRecord summary = loop->Summary();
  std::cerr << "summary: " << summary.ToText() << std::endl;
  if (metrics_file != nullptr && metrics_status.ok()) {
    metrics_status = metrics_file->Write(summary.ToJson());
  }
  return metrics_status;
}

}  // namespace dreplay::learner
