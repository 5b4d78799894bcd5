// Copyright dreplay authors.

#include "learner_client/learner_run.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/port_file.h"
#include "common/status_macros.h"
#include "common/verification_log.h"
#include "glog/logging.h"
#include "learner_client/metrics.h"
#include "learner_client/multi_node_io.h"
#include "learner_client/prometheus_metrics.h"
#include "learner_client/servers_file.h"
#include "learner_client/snapshot_writer.h"
#include "rl/make_environment.h"

namespace dreplay::learner {

namespace {

// `status` with the node it came from.
absl::Status AtNode(const absl::Status& status, const std::string& address) {
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " (replay node ", address, ")"));
}

// A node's clients retry for a quarter of the node timeout: a node that
// goes away costs the learner at most about the node timeout once (each
// reconnection attempt takes at most a quarter of it; together, with one
// attempt running past the retries' end, about half); later attempts run
// off the learner's thread (ServiceNode).
client::RetryPolicy NodeRetry(const LearnerRunOptions& options) {
  client::RetryPolicy retry = options.retry;
  retry.reconnect_timeout = std::min(retry.reconnect_timeout, options.multi.node_timeout / 4);
  retry.attempt_deadline = std::min(retry.attempt_deadline, options.multi.node_timeout / 4);
  return retry;
}

// Checks that a node after the first holds the same transitions as the
// first (whose configuration `options.loop` holds) and can stage what the
// policy needs.
absl::Status CheckLaterNode(const LearnerRunOptions& options, const protocol::LayoutConfig& config,
                            const std::string& address) {
  // The first node's n and gamma are required of the others.
  ExpectedTransitions same = options.expected;
  same.n_step = options.loop.nstep.n;
  same.gamma = options.loop.nstep.discount;
  same.n_step_given = same.gamma_given = true;
  LearnerLoopOptions other = options.loop;
  const absl::Status same_data = ApplyServerConfig(config, same, &other);
  if (!same_data.ok()) return AtNode(same_data, address);
  if (other.frame_stack != options.loop.frame_stack) {
    return absl::FailedPreconditionError(
        absl::StrCat("replay node ", address, " stores frame stacks of ", other.frame_stack,
                     ", the first node of ", options.loop.frame_stack));
  }
  return absl::OkStatus();
}

// Connects to one node; with `first`, takes the loop's options from it,
// otherwise checks it against them.
absl::StatusOr<MultiNodeIo::Node> ConnectNode(LearnerRunOptions& options, verbs::Provider* provider,
                                              const client::ClientSessionOptions& session,
                                              bool first) {
  const client::RetryPolicy retry = NodeRetry(options);
  MultiNodeIo::Node node;
  node.address = absl::StrCat(session.host, ":", session.port);
  absl::StatusOr<std::unique_ptr<client::ClientSession>> connected =
      client::ConnectWithRetry(provider, session, retry);
  if (!connected.ok()) return AtNode(connected.status(), node.address);
  node.session = std::move(*connected);
  const protocol::LayoutConfig& config = node.session->config();
  if (first) {
    RETURN_IF_ERROR(ApplyServerConfig(config, options.expected, &options.loop));
  } else {
    RETURN_IF_ERROR(CheckLaterNode(options, config, node.address));
  }
  if (options.multi.policy == ShardPolicy::kExact && config.staging_depth < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("replay node ", node.address,
                     " stages 1 batch at a time: exact sampling over several "
                     "nodes holds a node's batch until its rows are trained on, so it needs "
                     "--staging_depth >= 2 there"));
  }
  LearnerServiceIoOptions node_io = options.io;
  node_io.retry = retry;
  absl::StatusOr<std::unique_ptr<LearnerServiceIo>> service =
      LearnerServiceIo::Create(node.session.get(), node_io);
  if (!service.ok()) return AtNode(service.status(), node.address);
  node.service = std::move(*service);
  return node;
}

// Connects to every node of options.nodes and checks they hold the same
// transitions; the loop's options from the first.
absl::StatusOr<std::unique_ptr<MultiNodeIo>> ConnectNodes(LearnerRunOptions& options,
                                                          verbs::Provider* provider) {
  if (options.loop.placement != ReplayPlacement::kBuffer) {
    return absl::InvalidArgumentError(
        absl::StrCat("several replay nodes need the buffer placement, not ",
                     ReplayPlacementName(options.loop.placement)));
  }
  std::vector<MultiNodeIo::Node> nodes;
  for (size_t k = 0; k < options.nodes.size(); ++k) {
    ASSIGN_OR_RETURN(MultiNodeIo::Node node,
                     ConnectNode(options, provider, options.nodes[k].session, k == 0));
    nodes.push_back(std::move(node));
  }
  options.multi.batch_size = options.loop.batch_size;
  options.multi.seed = options.loop.seed;
  ASSIGN_OR_RETURN(std::unique_ptr<rl::Environment> env,
                   rl::MakeEnvironment(options.loop.env, options.loop.observation));
  return MultiNodeIo::Create(std::move(nodes), options.multi, env->spec().observation_size,
                             env->spec().observation_type);
}

// Watches options.servers_file: a node added to it is connected on the
// watcher's thread (with a copy of the options as they were once the
// first node had set them) and handed to `multi`.
absl::StatusOr<std::unique_ptr<ServersFileWatcher>> WatchServersFile(
    const LearnerRunOptions& options, verbs::Provider* provider, MultiNodeIo* multi) {
  ServersFileWatcherOptions watch;
  watch.path = options.servers_file;
  watch.interval = options.servers_file_interval;
  std::vector<std::string> known;
  for (size_t k = 0; k < multi->size(); ++k) known.push_back(multi->address(k));
  auto joining = std::make_shared<LearnerRunOptions>(options);
  return ServersFileWatcher::Start(
      watch, known, [joining, provider, multi](const NodeAddress& address) -> absl::Status {
        ASSIGN_OR_RETURN(client::ConnectionOptions c, NodeConnection(joining->connection, address));
        ASSIGN_OR_RETURN(MultiNodeIo::Node node,
                         ConnectNode(*joining, provider, c.session, /*first=*/false));
        multi->Offer(std::move(node));
        return absl::OkStatus();
      });
}

void ExportNodes(MultiNodeIo& multi, LearnerMetricsExport* exported) {
  const std::vector<NodeShare>& shares = multi.source()->shares();
  std::vector<NodeMetrics> nodes(shares.size());
  for (size_t k = 0; k < shares.size(); ++k) {
    const NodeShare& s = shares[k];
    NodeMetrics& n = nodes[k];
    n.address = multi.address(k);
    n.rows = s.rows;
    n.batches = s.batches;
    n.passed_over = s.passed_over;
    n.dropped = s.dropped;
    n.link_bytes = multi.link_bytes(k);
    n.taken_share = s.taken_share;
    n.mass_share = s.mass_share;
    n.priority_sum = s.priority_sum;
    n.away = s.away;
    n.policy_lag_mean = s.policy_lag_mean;
    n.inserts_per_s = s.inserts_per_s;
  }
  exported->UpdateNodes(std::move(nodes), SamplingTvDistance(shares));
}

std::string OrDash(const std::optional<double>& value) {
  return value.has_value() ? absl::StrCat(*value) : std::string("-");
}

// One line per node (what the learner took from it and what crossed its
// link), then one for the policy: how far its sampling was from exact
// global prioritization, and how fast the nodes' mass shares moved.
void PrintNodeShares(MultiNodeIo& multi, ShardPolicy policy) {
  const std::vector<NodeShare>& shares = multi.source()->shares();
  for (size_t k = 0; k < shares.size(); ++k) {
    const NodeShare& s = shares[k];
    std::cerr << "node: " << multi.address(k) << " rows " << s.rows << " taken_share "
              << s.taken_share << " mass_share " << s.mass_share << " batches " << s.batches
              << " passed_over " << s.passed_over << " dropped " << s.dropped << " priority_sum "
              << s.priority_sum << " link_bytes " << multi.link_bytes(k) << " ingested "
              << multi.ingested(k) << " policy_lag " << OrDash(s.policy_lag_mean)
              << " inserts_per_s " << OrDash(s.inserts_per_s) << (s.away ? " away" : "")
              << std::endl;
  }
  const std::optional<double> drift = multi.source()->mass_drift_per_s();
  std::cerr << "shards: policy " << ShardPolicyName(policy) << " tv " << SamplingTvDistance(shares)
            << " mass_drift_per_s " << OrDash(drift) << " longest_gap_s "
            << absl::ToDoubleSeconds(multi.source()->longest_gap()) << std::endl;
}

}  // namespace

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
  std::unique_ptr<VerificationLog> verification_log;
  if (!options.verification_log.empty()) {
    ASSIGN_OR_RETURN(verification_log, VerificationLog::Open(options.verification_log));
    options.io.verification_log = verification_log.get();
  }
  options.io.placement = options.loop.placement;
  options.io.retry = options.retry;
  std::unique_ptr<client::ClientSession> session;
  std::unique_ptr<LearnerServiceIo> service;
  std::unique_ptr<MultiNodeIo> multi;
  LearnerIo io;
  if (options.nodes.empty()) {
    ASSIGN_OR_RETURN(session,
                     client::ConnectWithRetry(provider, options.connection.session, options.retry));
    RETURN_IF_ERROR(ApplyServerConfig(session->config(), options.expected, &options.loop));
    ASSIGN_OR_RETURN(service, LearnerServiceIo::Create(session.get(), options.io));
    io = service->io();
  } else {
    ASSIGN_OR_RETURN(multi, ConnectNodes(options, provider));
    io = multi->io();
  }
  // Declared after `multi`, so that it stops (and joins its thread, which
  // hands nodes to `multi`) first.
  std::unique_ptr<ServersFileWatcher> watcher;
  if (multi != nullptr && !options.servers_file.empty()) {
    ASSIGN_OR_RETURN(watcher, WatchServersFile(options, provider, multi.get()));
  }
  if (options.local_capacity > 0) options.loop.memory.capacity = options.local_capacity;
  std::unique_ptr<MetricsFile> metrics_file;
  if (!options.metrics_out.empty()) {
    ASSIGN_OR_RETURN(metrics_file, MetricsFile::Open(options.metrics_out));
  }

  absl::Status metrics_status;
  io.on_progress = [&](const ProgressRecord& record) {
    std::cerr << "progress: " << record.ToText() << std::endl;
    exported.Update(record);
    if (multi != nullptr) ExportNodes(*multi, &exported);
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
  const protocol::LayoutConfig& config = session != nullptr ? session->config() : multi->config(0);
  LOG(INFO) << "learner: " << ReplayPlacementName(options.loop.placement) << " placement, "
            << options.loop.env << ", server " << options.server << " over link " << options.link
            << " (" << provider->name() << "), batch " << config.batch_size << ", capacity "
            << config.capacity
            << (options.loop.placement == ReplayPlacement::kBuffer
                    ? std::string()
                    : absl::StrCat(", local replay memory ", options.loop.memory.capacity,
                                   " slots"))
            << (multi != nullptr ? absl::StrCat(", ", multi->size(), " replay nodes, ",
                                                ShardPolicyName(options.multi.policy), " sampling")
                                 : std::string());
  const absl::Status run = loop->Run(signals.flag());
  if (!run.ok()) {
    if (!signals.requested() || !client::IsConnectionFailure(run)) return run;
    // Asked to stop while the server was away: the run ends here.
    LOG(WARNING) << "stopped while disconnected: " << run;
  }
  const SummaryRecord summary = loop->Summary();
  std::cerr << "summary: " << summary.ToText() << std::endl;
  if (multi != nullptr) PrintNodeShares(*multi, options.multi.policy);
  if (metrics_file != nullptr && metrics_status.ok()) {
    metrics_status = metrics_file->Write(summary.ToJson());
  }
  return metrics_status;
}

}  // namespace dreplay::learner
