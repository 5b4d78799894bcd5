// Copyright dreplay authors.

#include "learner_client/prometheus_metrics.h"

#include "common/prometheus_text.h"

namespace dreplay::learner {
namespace {

constexpr char kUp[] = "dreplay_learner_up";
constexpr char kUpHelp[] = "1 once the learner has reported its first progress record.";

// A gauge only when the record has the value.
void OptionalGauge(PrometheusText* out, absl::string_view name, absl::string_view help,
                   const std::optional<double>& value) {
  if (value.has_value()) out->Gauge(name, help, *value);
}

void RenderCounters(const ProgressRecord& r, PrometheusText* out) {
  out->Counter("dreplay_learner_train_steps_total", "Train steps taken.", r.train_steps);
  out->Counter("dreplay_learner_env_steps_total",
               "Environment steps the actors reported (summed over their lines).", r.env_steps);
  out->Counter("dreplay_learner_episodes_total",
               "Episodes the actors finished (summed over their lines).", r.episodes);
  out->Counter("dreplay_learner_link_transitions_total",
               "Transitions that crossed the learner's link.", r.link_transitions_total);
  out->Family("dreplay_learner_link_bytes_total", MetricType::kCounter,
              "Bytes over the learner's link, by traffic class.");
  out->Sample({{"class", "experience"}}, r.link.experience);
  out->Sample({{"class", "metadata"}}, r.link.metadata);
  out->Sample({{"class", "polling"}}, r.link.polling);
  out->Sample({{"class", "priorities"}}, r.link.priorities);
  out->Sample({{"class", "params"}}, r.link.params);
  out->Sample({{"class", "control"}}, r.link.control);
  out->Counter("dreplay_learner_transitions_fetched_total",
               "Transition payloads READ over the link (a re-READ counts again).",
               r.link.transitions_fetched);
  out->Counter("dreplay_learner_distinct_transitions_fetched_total",
               "Distinct transitions among those READ over the link.",
               r.link.distinct_transitions_fetched);
  out->Counter("dreplay_learner_transitions_dropped_total",
               "Batch entries and forwarded transitions left out: they do not decode or cannot "
               "be trained on (non-finite reward or observation, action out of range).",
               r.transitions_dropped);
  out->Counter("dreplay_learner_params_withheld_total",
               "Parameter publications withheld because a parameter was not finite.",
               r.params_withheld);
}

void RenderGauges(const ProgressRecord& r, PrometheusText* out) {
  out->Family("dreplay_learner_info", MetricType::kGauge,
              "Always 1; the replay placement in its label.");
  out->Sample({{"placement", r.replay_placement}}, 1.0);
  out->Gauge("dreplay_learner_wall_seconds", "Seconds since the learner started.", r.wall_s);
  out->Gauge("dreplay_learner_link_bytes_per_second",
             "Bytes per second over the link in the last progress interval.", r.link_bytes_per_s);
  out->Gauge("dreplay_learner_link_transitions_per_second",
             "Transitions per second over the link in the last progress interval.",
             r.link_transitions_per_s);
  OptionalGauge(out, "dreplay_learner_loss", "Mean loss of the last interval's train steps.",
                r.loss);
  OptionalGauge(out, "dreplay_learner_transferred_priority",
                "Mean |TD error| of the transitions that crossed the link in the last interval, "
                "on arrival.",
                r.transferred_priority);
  OptionalGauge(out, "dreplay_learner_trained_abs_td_error",
                "Mean |TD error| of the transitions trained on in the last interval.",
                r.trained_abs_td_error);
  OptionalGauge(out, "dreplay_learner_probe_loss", "Huber loss of the fixed probe set.",
                r.probe_loss);
  OptionalGauge(out, "dreplay_learner_samples_per_insert",
                "Achieved samples per insert since the start.", r.samples_per_insert);
  OptionalGauge(out, "dreplay_learner_actor_return_mean",
                "Mean episode return the actors reported.", r.actor_return_mean);
  OptionalGauge(out, "dreplay_learner_eval_return_mean",
                "Mean return of the last greedy evaluation.", r.eval_return_mean);
  OptionalGauge(out, "dreplay_learner_data_age_mean_seconds",
                "Mean age on arrival of the transitions of the last interval.", r.data_age_mean_s);
  OptionalGauge(out, "dreplay_learner_data_age_p50_seconds",
                "Median age on arrival of the transitions of the last interval.", r.data_age_p50_s);
  OptionalGauge(out, "dreplay_learner_data_age_p95_seconds",
                "95th percentile age on arrival of the transitions of the last interval.",
                r.data_age_p95_s);
  OptionalGauge(out, "dreplay_learner_policy_lag_mean",
                "Mean policy-version lag of the batch entries of the last interval.",
                r.policy_lag_mean);
}

}  // namespace

std::string RenderLearnerMetrics(const ProgressRecord& record) {
  PrometheusText out;
  out.Gauge(kUp, kUpHelp, 1);
  RenderCounters(record, &out);
  RenderGauges(record, &out);
  return out.Take();
}

void RenderNodeMetrics(absl::Span<const NodeMetrics> nodes, double tv, PrometheusText* out) {
  if (nodes.empty()) return;
  const auto family = [&](const char* name, MetricType type, const char* help, auto value) {
    out->Family(name, type, help);
    for (const NodeMetrics& n : nodes) out->Sample({{"node", n.address}}, value(n));
  };
  family("dreplay_learner_node_rows_total", MetricType::kCounter,
         "Rows the learner took from this buffer node to train on.",
         [](const NodeMetrics& n) { return static_cast<double>(n.rows); });
  family("dreplay_learner_node_batches_total", MetricType::kCounter,
         "Batches of this buffer node the learner took.",
         [](const NodeMetrics& n) { return static_cast<double>(n.batches); });
  family("dreplay_learner_node_passed_over_total", MetricType::kCounter,
         "Times this buffer node was found away (staged nothing in time, or lost).",
         [](const NodeMetrics& n) { return static_cast<double>(n.passed_over); });
  family("dreplay_learner_node_rows_dropped_total", MetricType::kCounter,
         "Rows of this buffer node dropped untrained when it resumed.",
         [](const NodeMetrics& n) { return static_cast<double>(n.dropped); });
  family("dreplay_learner_node_link_bytes_total", MetricType::kCounter,
         "Bytes over the link to this buffer node.",
         [](const NodeMetrics& n) { return static_cast<double>(n.link_bytes); });
  family("dreplay_learner_node_taken_share", MetricType::kGauge,
         "This buffer node's mean share of a batch's rows.",
         [](const NodeMetrics& n) { return n.taken_share; });
  family("dreplay_learner_node_mass_share", MetricType::kGauge,
         "This buffer node's mean share of the priority mass when a batch was made.",
         [](const NodeMetrics& n) { return n.mass_share; });
  family("dreplay_learner_node_total_priority", MetricType::kGauge,
         "This buffer node's sum of p^alpha, as last read.",
         [](const NodeMetrics& n) { return n.priority_sum; });
  family("dreplay_learner_node_away", MetricType::kGauge,
         "1 while this buffer node is passed over, else 0.",
         [](const NodeMetrics& n) { return n.away ? 1.0 : 0.0; });
  // Figures known for some nodes only: a sample for each of those.
  const auto known = [&](const char* name, const char* help, auto value) {
    bool any = false;
    for (const NodeMetrics& n : nodes) any = any || value(n).has_value();
    if (!any) return;
    out->Family(name, MetricType::kGauge, help);
    for (const NodeMetrics& n : nodes) {
      if (value(n).has_value()) out->Sample({{"node", n.address}}, *value(n));
    }
  };
  known("dreplay_learner_node_policy_lag_mean",
        "Mean policy-version lag of the rows taken from this buffer node.",
        [](const NodeMetrics& n) { return n.policy_lag_mean; });
  known("dreplay_learner_node_inserts_per_second",
        "This buffer node's inserts per second (its sites' generation rate).",
        [](const NodeMetrics& n) { return n.inserts_per_s; });
  out->Gauge("dreplay_learner_sampling_tv_distance",
             "Total-variation distance of the sampling from exact global prioritization.", tv);
}

void LearnerMetricsExport::Update(const ProgressRecord& record) {
  MutexLock lock(&mu_);
  latest_ = record;
}

void LearnerMetricsExport::UpdateNodes(std::vector<NodeMetrics> nodes, double tv) {
  MutexLock lock(&mu_);
  nodes_ = std::move(nodes);
  tv_ = tv;
}

std::string LearnerMetricsExport::Render() const {
  std::optional<ProgressRecord> latest;
  std::vector<NodeMetrics> nodes;
  double tv = 0;
  {
    MutexLock lock(&mu_);
    latest = latest_;
    nodes = nodes_;
    tv = tv_;
  }
  if (latest.has_value()) {
    PrometheusText out;
    out.Gauge(kUp, kUpHelp, 1);
    RenderCounters(*latest, &out);
    RenderGauges(*latest, &out);
    RenderNodeMetrics(nodes, tv, &out);
    return out.Take();
  }
  PrometheusText out;
  out.Gauge(kUp, kUpHelp, 0);
  return out.Take();
}

}  // namespace dreplay::learner
