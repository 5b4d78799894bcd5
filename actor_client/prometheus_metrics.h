// Copyright dreplay authors.
//
// prometheus_metrics.h: an actor's figures in the Prometheus text exposition
// format: what `actor --metrics_listen` serves at /metrics (through
// common/metrics_http.h).
//
// The actor's loop thread hands a snapshot to Update() each time it
// publishes its episode statistics (every stats interval, a second by
// default); the HTTP server's thread calls Render(). Every name starts with
// dreplay_actor_:
//
//   counters  env_steps_total, episodes_total, transitions_committed_total,
//             transitions_abandoned_total, flushes_total, reconnects_total,
//             room_waits_total, bytes_written_total
//   gauges    up (0 before the first snapshot), info{actor_index=...} (1),
//             params_version, last_episode_return (after an episode),
//             insert_latency_p50_seconds, insert_latency_p99_seconds,
//             insert_latency_max_seconds (reserve to commit of a batch,
//             over the whole run; after the first batch)

#ifndef DREPLAY_ACTOR_CLIENT_PROMETHEUS_METRICS_H_
#define DREPLAY_ACTOR_CLIENT_PROMETHEUS_METRICS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "actor_client/experience_writer.h"
#include "common/mutex.h"

namespace dreplay::actor {

// What one scrape shows.
struct ActorMetrics {
  uint32_t actor_index = 0;
  uint64_t env_steps = 0;
  uint64_t episodes = 0;
  std::optional<double> last_episode_return;
  uint64_t params_version = 0;  // 0: none loaded yet
  ExperienceWriterStats writer;
};

// The exposition text of `metrics`. Pure.
std::string RenderActorMetrics(const ActorMetrics& metrics);

// The latest snapshot, handed from the actor's loop thread to the HTTP
// server's. Thread-safe.
class ActorMetricsExport {
 public:
  void Update(const ActorMetrics& metrics);
  // RenderActorMetrics of the latest snapshot, or only dreplay_actor_up 0
  // before the first one.
  std::string Render() const;

 private:
  mutable Mutex mu_;
  std::optional<ActorMetrics> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dreplay::actor

#endif  // DREPLAY_ACTOR_CLIENT_PROMETHEUS_METRICS_H_
