// Copyright dreplay authors.
//
// prometheus_metrics.h: the buffer node's metrics in the Prometheus text
// exposition format: what `replay_server --metrics_listen` serves at
// /metrics (through common/metrics_http.h).
//
//   auto http = MetricsHttpServer::Start(http_options, [&server] {
//     return RenderServerMetrics(CollectServerMetrics(*server));
//   });
//
// Every name starts with dreplay_server_. Counters are totals since the
// epoch's first process: a server that restores a checkpoint continues them
// (protocol::StatsBlock), so they only fall when the memory starts afresh.
// The delay histograms start empty in every process.
//
//   counters   inserted_total, sampled_total, batches_staged_total,
//              batches_released_total, update_timeouts_total,
//              dropped_total{cause=overrun|torn|invalid|copy_reject|restore}
//              (invalid: since this process started),
//              priority_updates_total{result=applied|stale|invalid},
//              priority_mailbox_rejects_total, staging_stalls_total, priorities_bounded_total,
//              limiter_sample_waits_total, limiter_sample_wait_seconds_total,
//              limiter_insert_wait_seconds_total,
//              staged_entries_total{kind=payload|cached},
//              learner_cache_resets_total, checkpoints_written_total,
//              connections_accepted_total{role=actor|learner|monitor},
//              connections_rejected_total
//   gauges     size, capacity, epoch, batches_outstanding,
//              samples_per_insert (achieved), samples_per_insert_target,
//              total_priority, max_priority, connections{role=...}
//   histograms insert_to_ingest_delay_seconds, staging_delay_seconds
//              (replay_server/delays.h says what they measure)
//   checkpoints (replay_server/checkpoint/checkpoint_pauses.h; zeros without
//              --checkpoint_dir): histogram checkpoint_core_pause_seconds
//              (each checkpoint step on the core thread), gauges
//              checkpoint_core_pause_max_seconds,
//              checkpoint_loop_gap_max_seconds, last_checkpoint_duration_seconds,
//              last_checkpoint_bytes; counters reservation_syncs_total,
//              reservation_stalls_total (sequence_reservations.h)

#ifndef DREPLAY_REPLAY_SERVER_PROMETHEUS_METRICS_H_
#define DREPLAY_REPLAY_SERVER_PROMETHEUS_METRICS_H_

#include <string>

#include "common/bucket_histogram.h"
#include "protocol/stats.h"
#include "replay_server/server.h"

namespace dreplay::server {

// What one scrape renders, gathered from a running server.
struct ServerMetrics {
  protocol::StatsBlock stats{};  // ReplayServer::ReadStats()
  ConnectionCounts connections;
  HistogramSnapshot insert_to_ingest;
  HistogramSnapshot staging;
  // The rate limiter's samples per insert (0: no limit).
  double samples_per_insert_target = 0;
  // Checkpoints: each checkpoint step on the core thread (seconds), the
  // longest step and the longest core loop gap during a checkpoint, the
  // last checkpoint written (its cut's begin to the file in place).
  HistogramSnapshot checkpoint_core_pauses;
  double checkpoint_core_pause_max_seconds = 0;
  double checkpoint_loop_gap_max_seconds = 0;
  double last_checkpoint_duration_seconds = 0;
  uint64_t last_checkpoint_bytes = 0;
  // Sequence reservation file writes, and times a lease's published cursor
  // waited at its synced mark.
  uint64_t reservation_syncs = 0;
  uint64_t reservation_stalls = 0;
};

// Thread-safe: any thread, while the server runs (the HTTP server's).
ServerMetrics CollectServerMetrics(const ReplayServer& server);

// The exposition text of `metrics`. Pure.
std::string RenderServerMetrics(const ServerMetrics& metrics);

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_PROMETHEUS_METRICS_H_
