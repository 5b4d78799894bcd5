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
//             data_age_p50_seconds, data_age_p95_seconds
//
// Before the first record only dreplay_learner_up (0) is rendered; after it,
// dreplay_learner_up is 1.

#ifndef DREPLAY_LEARNER_CLIENT_PROMETHEUS_METRICS_H_
#define DREPLAY_LEARNER_CLIENT_PROMETHEUS_METRICS_H_

#include <optional>
#include <string>

#include "common/mutex.h"
#include "learner_client/metrics.h"

namespace dreplay::learner {

// The exposition text of one progress record. Pure.
std::string RenderLearnerMetrics(const ProgressRecord& record);

// The latest progress record, handed from the learner loop's thread to the
// HTTP server's. Thread-safe.
class LearnerMetricsExport {
 public:
  void Update(const ProgressRecord& record);
  // RenderLearnerMetrics of the latest record, or only dreplay_learner_up 0
  // before the first one.
  std::string Render() const;

 private:
  mutable Mutex mu_;
  std::optional<ProgressRecord> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_PROMETHEUS_METRICS_H_
