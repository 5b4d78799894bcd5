// Copyright dreplay authors.
//
// learner_run.h: one learner run, as the `learner` binary does it once its
// flags are options: connect (retrying), check the server's configuration
// against the learner's, wire the service clients, the metrics file, the
// parameter snapshots and the Prometheus endpoint to a LearnerLoop, run it
// until it ends or a stop is requested, and write the summary.
//
//   LearnerRunOptions options = ...;  // from the flags, in learner_main.cc
//   RETURN_IF_ERROR(RunLearner(options, provider.get(), signals));
//
// Progress and summary lines go to stderr ("progress: ...", "summary: ...");
// the records, as JSON lines, to options.metrics_out.

#ifndef DREPLAY_LEARNER_CLIENT_LEARNER_RUN_H_
#define DREPLAY_LEARNER_CLIENT_LEARNER_RUN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/connection_flags.h"
#include "client/retry.h"
#include "client/session.h"
#include "common/metrics_http.h"
#include "common/stop_signals.h"
#include "learner_client/learner_loop.h"
#include "learner_client/multi_node_source.h"
#include "learner_client/server_config.h"
#include "learner_client/service_io.h"
#include "verbs/verbs.h"

namespace dreplay::learner {

struct LearnerRunOptions {
  // connection.session.learner_placement is set from loop.placement.
  client::ConnectionOptions connection;
  // Several buffer nodes (edge sites; buffer placement): one connection
  // each (connection above is then unused), batches made by `multi`'s
  // shard policy (multi_node_source.h). Empty: the one server above.
  std::vector<client::ConnectionOptions> nodes;
  // With nodes: a servers file (servers_file.h) read again every interval;
  // a node added to it joins while the learner trains. Empty: none.
  std::string servers_file;
  absl::Duration servers_file_interval = absl::Seconds(1);
  MultiNodeOptions multi;
  client::RetryPolicy retry;
  // Everything but what the server publishes (ApplyServerConfig fills that).
  LearnerLoopOptions loop;
  // The service clients; placement and retry are taken from above.
  LearnerServiceIoOptions io;
  // Learner and hybrid placements: the local replay memory's slots; 0: the
  // server's capacity.
  uint64_t local_capacity = 0;
  // What the learner's flags say of the actors' transitions.
  ExpectedTransitions expected;
  std::optional<MetricsHttpOptions> metrics;  // serve /metrics
  std::string metrics_port_file;              // its port, written; empty: none
  std::string metrics_out;                    // JSON lines; empty: none
  std::string snapshot_dir;                   // SnapshotWriter; empty: none
  std::string verification_log;               // common/verification_log.h; empty: none
  // For the log line: the server's address (or the nodes'), and the link
  // as given.
  std::string server;
  std::string link;
};

// Runs the learner to its end (LearnerLoop::Run). A connection failure after
// a stop was requested ends the run normally. Errors: the connection's, the
// server's configuration, the loop's, the metrics file's.
absl::Status RunLearner(LearnerRunOptions& options, verbs::Provider* provider,
                        const StopSignals& signals);

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_LEARNER_RUN_H_
