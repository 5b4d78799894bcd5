// Copyright dreplay authors.

#include "actor_client/prometheus_metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/prometheus_text.h"

namespace dreplay::actor {
namespace {

constexpr char kUp[] = "dreplay_actor_up";
constexpr char kUpHelp[] = "1 once the actor has published its first statistics.";

void RenderCounters(const ActorMetrics& m, PrometheusText* out) {
  const ExperienceWriterStats& w = m.writer;
  out->Counter("dreplay_actor_env_steps_total", "Environment steps, all environments together.",
               m.env_steps);
  out->Counter("dreplay_actor_episodes_total", "Episodes finished.", m.episodes);
  out->Counter("dreplay_actor_transitions_committed_total",
               "Transitions whose commit WRITE completed.", w.committed);
  out->Counter("dreplay_actor_transitions_abandoned_total",
               "Transitions of batches lost to a failure.", w.abandoned);
  out->Counter("dreplay_actor_flushes_total", "Batches committed.", w.flushes);
  out->Counter("dreplay_actor_reconnects_total", "Reconnections the experience writer saw.",
               w.reconnects);
  out->Counter("dreplay_actor_room_waits_total",
               "Reads of the server's ingest cursor that found no room in the actor window.",
               w.room_waits);
  out->Counter("dreplay_actor_bytes_written_total", "Slot and commit bytes written.",
               w.bytes_written);
}

void RenderGauges(const ActorMetrics& m, PrometheusText* out) {
  out->Family("dreplay_actor_info", MetricType::kGauge,
              "Always 1; the actor's index in its label.");
  const std::string index = absl::StrCat(m.actor_index);
  out->Sample({{"actor_index", index}}, 1.0);
  out->Gauge("dreplay_actor_params_version",
             "Version of the parameters the actor acts with (0: its initial network).",
             static_cast<double>(m.params_version));
  if (m.last_episode_return.has_value()) {
    out->Gauge("dreplay_actor_last_episode_return", "Return of the last episode finished.",
               *m.last_episode_return);
  }
  const LatencyHistogram& latency = m.writer.latency;
  if (latency.count() > 0) {
    out->Gauge("dreplay_actor_insert_latency_p50_seconds",
               "Median time from reserving a batch to its commit, over the run.",
               absl::ToDoubleSeconds(latency.Percentile(0.5)));
    out->Gauge("dreplay_actor_insert_latency_p99_seconds",
               "99th percentile time from reserving a batch to its commit, over the run.",
               absl::ToDoubleSeconds(latency.Percentile(0.99)));
    out->Gauge("dreplay_actor_insert_latency_max_seconds",
               "Longest time from reserving a batch to its commit, over the run.",
               absl::ToDoubleSeconds(latency.max()));
  }
}

}  // namespace

std::string RenderActorMetrics(const ActorMetrics& metrics) {
  PrometheusText out;
  out.Gauge(kUp, kUpHelp, 1);
  RenderCounters(metrics, &out);
  RenderGauges(metrics, &out);
  return out.Take();
}

void ActorMetricsExport::Update(const ActorMetrics& metrics) {
  MutexLock lock(&mu_);
  latest_ = metrics;
}

std::string ActorMetricsExport::Render() const {
  std::optional<ActorMetrics> latest;
  {
    MutexLock lock(&mu_);
    latest = latest_;
  }
  if (latest.has_value()) return RenderActorMetrics(*latest);
  PrometheusText out;
  out.Gauge(kUp, kUpHelp, 0);
  return out.Take();
}

}  // namespace dreplay::actor
