// Copyright dreplay authors.
//
// prometheus_metrics.h: the learner's metrics (metrics.h's progress records)
// in the Prometheus text exposition format: what `learner --metrics_listen`
// serves at /metrics (through common/metrics_http.h).
//
//   LearnerMetricsExport exported;
//   io.on_progress = [&](const ProgressRecord& r) { exported.Update(r); ... };
//   auto http = MetricsHttpServer::Start(options, [&] { return exported.Render(); });
//
// A scrape shows the latest progress record, so its figures are as fresh as
// --progress_interval_s. Every name starts with dreplay_learner_:
//
//   counters  train_steps_total, env_steps_total, episodes_total (the last
//             two summed over the actors' lines), link_transitions_total,
//             link_bytes_total{class=experience|metadata|polling|priorities|
//             params|control}, transitions_fetched_total,
//             distinct_transitions_fetched_total, transitions_dropped_total,
//             params_withheld_total
//   gauges    info{placement=buffer|learner} (always 1), wall_seconds,
//             link_bytes_per_second, link_transitions_per_second, and, when
//             the record has them: loss, transferred_priority,
//             trained_abs_td_error, probe_loss, samples_per_insert,
//             actor_return_mean, eval_return_mean, data_age_mean_seconds,
//             data_age_p50_seconds, data_age_p95_seconds, policy_lag_mean
//
// Before the first record only dreplay_learner_up (0) is rendered; after it,
// dreplay_learner_up is 1.
//
// A learner over several buffer nodes (edge sites) adds one sample per node,
// labelled node="HOST:PORT" (multi_node_source.h's NodeShare):
//
//   counters  node_rows_total, node_batches_total, node_passed_over_total,
//             node_rows_dropped_total, node_link_bytes_total
//   gauges    node_taken_share, node_mass_share, node_total_priority (its
//             S_k; not _sum, a suffix kept for summaries), node_away (1
//             while passed over), node_policy_lag_mean and
//             node_inserts_per_second (once known), and
//             sampling_tv_distance

#ifndef DREPLAY_LEARNER_CLIENT_PROMETHEUS_METRICS_H_
#define DREPLAY_LEARNER_CLIENT_PROMETHEUS_METRICS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/mutex.h"
#include "common/prometheus_text.h"
#include "learner_client/metrics.h"

namespace dreplay::learner {

// The exposition text of one progress record. Pure.
std::string RenderLearnerMetrics(const ProgressRecord& record);

// One buffer node's figures, for a learner over several.
struct NodeMetrics {
  std::string address;  // the label
  uint64_t rows = 0;
  uint64_t batches = 0;
  uint64_t passed_over = 0;
  uint64_t dropped = 0;
  uint64_t link_bytes = 0;
  double taken_share = 0;
  double mass_share = 0;
  double priority_sum = 0;
  bool away = false;
  std::optional<double> policy_lag_mean;
  std::optional<double> inserts_per_s;
};

// The node families of `nodes` and the policy's distance `tv` from exact
// sampling, into `out`. Nothing when `nodes` is empty.
void RenderNodeMetrics(absl::Span<const NodeMetrics> nodes, double tv, PrometheusText* out);

// The latest progress record, handed from the learner loop's thread to the
// HTTP server's. Thread-safe.
class LearnerMetricsExport {
 public:
  void Update(const ProgressRecord& record);
  // The nodes' figures, rendered after the record's (several buffer nodes).
  void UpdateNodes(std::vector<NodeMetrics> nodes, double tv);
  // RenderLearnerMetrics of the latest record, or only dreplay_learner_up 0
  // before the first one.
  std::string Render() const;

 private:
  mutable Mutex mu_;
  std::optional<ProgressRecord> latest_ ABSL_GUARDED_BY(mu_);
  std::vector<NodeMetrics> nodes_ ABSL_GUARDED_BY(mu_);
  double tv_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_PROMETHEUS_METRICS_H_
