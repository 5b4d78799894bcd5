// Copyright dreplay authors.

#include "replay_server/prometheus_metrics.h"

#include <cstdint>
#include <limits>

#include "common/prometheus_text.h"

namespace dreplay::server {
namespace {

double NanosToSeconds(uint64_t ns) { return static_cast<double>(ns) * 1e-9; }

// A counter whose value is a number of nanoseconds, exposed in seconds.
void SecondsCounter(PrometheusText* out, absl::string_view name, absl::string_view help,
                    uint64_t ns) {
  out->Family(name, MetricType::kCounter, help);
  out->Sample({}, NanosToSeconds(ns));
}

void RenderFlow(const protocol::StatsBlock& s, PrometheusText* out) {
  out->Counter("dreplay_server_inserted_total",
               "Transitions accepted by ingest (verified and inserted into the replay memory).",
               s.inserted);
  out->Counter("dreplay_server_sampled_total", "Transitions staged in batches for the learner.",
               s.sampled);
  out->Counter("dreplay_server_batches_staged_total", "Batches staged for the learner.",
               s.batches_staged);
  out->Counter("dreplay_server_batches_released_total",
               "Staging slots freed: the batch's priority update was consumed, or it was "
               "released without one.",
               s.batches_released);
  out->Counter("dreplay_server_update_timeouts_total",
               "Staged batches released without a priority update (update timeout, or a new "
               "learner that could not resolve them).",
               s.updates_timed_out);
  out->Family("dreplay_server_dropped_total", MetricType::kCounter,
              "Transitions dropped, by cause: "
              "overrun (lapped before ingest), torn (committed but failed its checks), "
              "copy_reject (overwritten while being staged), restore (failed verification when "
              "a checkpoint was restored), invalid (whole, but failed the transition check "
              "against the spec: non-finite reward or observation, action out of range, ...; "
              "counted since this process started), forward_dropped (--forward=fifo: left "
              "unforwarded, dropped from the queue's front or overwritten in it; this "
              "process).");
  out->Sample({{"cause", "overrun"}}, s.overrun_slots);
  out->Sample({{"cause", "torn"}}, s.torn_slots);
  out->Sample({{"cause", "invalid"}}, s.transitions_invalid);
  out->Sample({{"cause", "copy_reject"}}, s.sample_copy_rejects);
  out->Sample({{"cause", "restore"}}, s.restore_dropped);
  out->Sample({{"cause", "forward_dropped"}}, s.forward_dropped);
  out->Counter("dreplay_server_priorities_bounded_total",
               "Priorities clamped to --max_priority (actors' initial ones and the learner's "
               "updates), or initial ones taken as no estimate (NaN, infinite or negative).",
               s.priorities_bounded);
  out->Family("dreplay_server_priority_updates_total", MetricType::kCounter,
              "Priority update records from the learner, by result: applied, stale (the slot "
              "holds a newer transition now), invalid (bad slot index or priority, or an "
              "entry the answered batch does not hold).");
  out->Sample({{"result", "applied"}}, s.priority_updates_applied);
  out->Sample({{"result", "stale"}}, s.priority_updates_stale);
  out->Sample({{"result", "invalid"}}, s.priority_updates_invalid);
  out->Counter("dreplay_server_priority_mailbox_rejects_total",
               "Priority updates refused whole (bad checksum, header or count).",
               s.mailbox_rejects);
  out->Counter("dreplay_server_staging_stalls_total",
               "Core steps in which a batch waited for a staging slot (its update).",
               s.staging_stalls);
}

void RenderPolicyAndState(const ServerMetrics& m, PrometheusText* out) {
  const protocol::StatsBlock& s = m.stats;
  out->Counter("dreplay_server_limiter_sample_waits_total",
               "Core steps in which a batch could not be staged because of the samples-per-insert "
               "rate limiter.",
               s.limiter_sample_waits);
  SecondsCounter(out, "dreplay_server_limiter_sample_wait_seconds_total",
                 "Time batches waited for the samples-per-insert rate limiter.",
                 s.limiter_sample_wait_ns);
  SecondsCounter(out, "dreplay_server_limiter_insert_wait_seconds_total",
                 "Time ingest paused for the rate limiter (--spi_block_actors).",
                 s.limiter_insert_wait_ns);
  out->Family("dreplay_server_staged_entries_total", MetricType::kCounter,
              "Batch entries staged, by kind: payload (the slot copied), cached (a reference to "
              "what the learner holds, transfer-once).");
  out->Sample({{"kind", "payload"}}, s.staged_payloads);
  out->Sample({{"kind", "cached"}}, s.staged_cached);
  out->Counter("dreplay_server_learner_cache_resets_total",
               "Times the learner's holdings were forgotten (a learner connected).",
               s.learner_cache_resets);
  out->Counter("dreplay_server_checkpoints_written_total", "Checkpoints written.",
               s.checkpoints_written);
  out->Gauge("dreplay_server_size", "Valid transitions in the replay memory.",
             static_cast<double>(s.size));
  out->Gauge("dreplay_server_capacity", "Slots of the replay memory.",
             static_cast<double>(s.capacity));
  out->Gauge("dreplay_server_epoch", "The server's epoch (1 fresh, one more per restore).",
             static_cast<double>(s.epoch));
  out->Gauge("dreplay_server_batches_outstanding",
             "Staged batches whose staging slot is not released yet.",
             static_cast<double>(s.batches_staged >= s.batches_released
                                     ? s.batches_staged - s.batches_released
                                     : 0));
  out->Gauge(
      "dreplay_server_samples_per_insert",
      "Achieved samples per insert: sampled / inserted (0 before the first insert).",
      s.inserted > 0 ? static_cast<double>(s.sampled) / static_cast<double>(s.inserted) : 0.0);
  out->Gauge("dreplay_server_samples_per_insert_target",
             "The rate limiter's samples per insert (0: no limit).", m.samples_per_insert_target);
  // Not "priority_sum": a _sum suffix is reserved for histograms and summaries.
  out->Gauge("dreplay_server_total_priority", "Sum of priority^alpha over the replay memory.",
             s.priority_sum);
  out->Gauge("dreplay_server_max_priority", "Largest priority^alpha in the replay memory.",
             s.priority_max);
  out->Counter("dreplay_server_frame_only_records_total",
               "--frame_stack: records held as frames only, carrying no transition (this "
               "process).",
               s.frame_only_records);
  out->Counter("dreplay_server_frames_missing_total",
               "--frame_stack: transitions not inserted because a record they refer to was not "
               "held (overwritten already, or never written; this process).",
               s.frames_missing);
  out->Counter("dreplay_server_frames_evicted_total",
               "--frame_stack: transitions removed from the memory because a record they need "
               "was overwritten (this process).",
               s.frames_evicted);
  out->Counter("dreplay_server_link_packed_in_bytes_total",
               "--link_codec: copied-slot bytes of the staged batches before compression (this "
               "process).",
               s.link_packed_in_bytes);
  out->Counter("dreplay_server_link_packed_out_bytes_total",
               "--link_codec: bytes the staged batches' payload areas held, compressed where that "
               "made them smaller (this process).",
               s.link_packed_out_bytes);
  out->Counter("dreplay_server_link_pack_cpu_seconds_total",
               "--link_codec: CPU time the core thread spent compressing staged batches (this "
               "process).",
               static_cast<double>(s.link_pack_cpu_ns) * 1e-9);
  out->Counter("dreplay_server_crossing_measured_total",
               "Staged entries copied for the link whose percentile in the memory's priority "
               "distribution was measured (one batch per 50 ms; this process). A "
               "learner-placement learner READs the slot ring, not the staged batches.",
               s.crossing_percentile_count);
  out->Gauge(
      "dreplay_server_crossing_percentile_mean",
      "Mean percentile (0 to 100) of the measured crossing entries' priorities among "
      "those the memory held (about 50 for uniform or FIFO choice; NaN before the "
      "first).",
      protocol::CrossingPercentileMean(s).value_or(std::numeric_limits<double>::quiet_NaN()));
}

void RenderConnections(const ConnectionCounts& c, PrometheusText* out) {
  out->Family("dreplay_server_connections", MetricType::kGauge, "Clients connected, by role.");
  out->Sample({{"role", "actor"}}, static_cast<double>(c.actors));
  out->Sample({{"role", "learner"}}, static_cast<double>(c.learners));
  out->Sample({{"role", "monitor"}}, static_cast<double>(c.monitors));
  out->Family("dreplay_server_connections_accepted_total", MetricType::kCounter,
              "Connections accepted since the server started, by role.");
  out->Sample({{"role", "actor"}}, c.actors_accepted);
  out->Sample({{"role", "learner"}}, c.learners_accepted);
  out->Sample({{"role", "monitor"}}, c.monitors_accepted);
  out->Counter("dreplay_server_connections_rejected_total",
               "Handshakes refused since the server started (bad token, role, actor id, limits).",
               c.rejected);
}

void RenderCheckpoints(const ServerMetrics& m, PrometheusText* out) {
  out->Histogram("dreplay_server_checkpoint_core_pause_seconds",
                 "Time the core thread spent in one checkpoint step (the cut's begin, one chunk "
                 "of the cut, handing it to the writer, taking the result).",
                 m.checkpoint_core_pauses);
  out->Gauge("dreplay_server_checkpoint_core_pause_max_seconds",
             "The longest checkpoint step on the core thread, over the checkpoints finished "
             "since the server started.",
             m.checkpoint_core_pause_max_seconds);
  out->Gauge("dreplay_server_checkpoint_loop_gap_max_seconds",
             "The longest gap between two core loop iterations during a checkpoint, over the "
             "checkpoints finished since the server started.",
             m.checkpoint_loop_gap_max_seconds);
  out->Gauge("dreplay_server_last_checkpoint_duration_seconds",
             "The last checkpoint written: from its cut's begin to the file in place.",
             m.last_checkpoint_duration_seconds);
  out->Gauge("dreplay_server_last_checkpoint_bytes", "Size of the last checkpoint written.",
             static_cast<double>(m.last_checkpoint_bytes));
  out->Counter("dreplay_server_reservation_syncs_total",
               "Writes of the sequence reservations file (write, fdatasync, rename).",
               m.reservation_syncs);
  out->Counter("dreplay_server_reservation_stalls_total",
               "Times a lease's published cursor waited at its synced reservation mark.",
               m.reservation_stalls);
}

}  // namespace

ServerMetrics CollectServerMetrics(const ReplayServer& server) {
  ServerMetrics m;
  m.stats = server.ReadStats();
  m.connections = server.connections();
  m.insert_to_ingest = server.delays().insert_to_ingest.Snapshot();
  m.staging = server.delays().staging.Snapshot();
  m.samples_per_insert_target = server.options().core.sampler.rate_limiter.samples_per_insert;
  const CheckpointPauses::Snapshot pauses = server.checkpoint_pauses().Take();
  m.checkpoint_core_pauses = pauses.steps;
  m.checkpoint_core_pause_max_seconds = absl::ToDoubleSeconds(pauses.step_time.max());
  m.checkpoint_loop_gap_max_seconds = absl::ToDoubleSeconds(pauses.loop_gaps.max());
  m.last_checkpoint_duration_seconds = absl::ToDoubleSeconds(pauses.last_duration);
  m.last_checkpoint_bytes = pauses.last_bytes;
  if (const ServerCheckpoints* checkpoints = server.checkpoints()) {
    m.reservation_syncs = checkpoints->reservations().syncs();
    m.reservation_stalls = checkpoints->reservations().stalls();
  }
  return m;
}

std::string RenderServerMetrics(const ServerMetrics& metrics) {
  PrometheusText out;
  RenderFlow(metrics.stats, &out);
  RenderPolicyAndState(metrics, &out);
  RenderConnections(metrics.connections, &out);
  out.Histogram("dreplay_server_insert_to_ingest_delay_seconds",
                "Time from an actor sealing a transition (its wall clock) to ingest inserting it "
                "(the server's wall clock); as good as the hosts' clock synchronisation.",
                metrics.insert_to_ingest);
  out.Histogram("dreplay_server_staging_delay_seconds",
                "Time a staged batch held its staging slot: from staging to its priority update "
                "being consumed.",
                metrics.staging);
  RenderCheckpoints(metrics, &out);
  return out.Take();
}

}  // namespace dreplay::server
