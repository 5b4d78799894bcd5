// Copyright dreplay authors.

#include "tools/replay_monitor.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_writer.h"

namespace dreplay::tools {

using protocol::ActorLine;
using protocol::StatsBlock;

namespace {

constexpr double kNanosPerSecond = 1e9;

// replay_top --json writes doubles with %.6g.
constexpr int kDoubleDigits = 6;

double Rate(uint64_t before, uint64_t now, double seconds) {
  return now >= before ? static_cast<double>(now - before) / seconds : 0;
}

const ActorLine* FindActor(const MonitorSnapshot* snapshot, uint32_t actor_id) {
  if (snapshot == nullptr) return nullptr;
  for (const ActorLine& line : snapshot->actors) {
    if (line.actor_id == actor_id) return &line;
  }
  return nullptr;
}

std::optional<double> MeanReturn(const ActorLine& line) {
  if (line.returns_count == 0) return std::nullopt;
  return line.returns_sum / line.returns_count;
}

// Seconds since the actor last published, by the monitor's wall clock
// (negative clock skew shows as 0).
double AgeSeconds(const ActorLine& line, absl::Time now) {
  const double age =
      absl::ToDoubleSeconds(now - absl::FromUnixNanos(static_cast<int64_t>(line.updated_ns)));
  return age > 0 ? age : 0;
}

// 1234567 -> "1.23M"; small values as integers.
std::string Human(double value) {
  if (!std::isfinite(value)) return "-";
  const double a = std::fabs(value);
  if (a >= 1e9) return absl::StrFormat("%.2fG", value / 1e9);
  if (a >= 1e6) return absl::StrFormat("%.2fM", value / 1e6);
  if (a >= 1e4) return absl::StrFormat("%.1fk", value / 1e3);
  if (a == std::floor(a)) return absl::StrFormat("%.0f", value);
  return absl::StrFormat("%.3g", value);
}

std::string HumanOpt(const std::optional<double>& value) {
  return value.has_value() ? Human(*value) : "-";
}

// Two decimals, or "-".
std::string FixedOpt(const std::optional<double>& value) {
  if (!value.has_value() || !std::isfinite(*value)) return "-";
  return absl::StrFormat("%.2f", *value);
}

}  // namespace

std::optional<MonitorRates> ComputeRates(const MonitorSnapshot* before,
                                         const MonitorSnapshot& now) {
  if (before == nullptr) return std::nullopt;
  const StatsBlock& a = before->stats;
  const StatsBlock& b = now.stats;
  if (a.epoch != b.epoch || b.server_time_ns <= a.server_time_ns) return std::nullopt;
  MonitorRates r;
  r.window_s = static_cast<double>(b.server_time_ns - a.server_time_ns) / kNanosPerSecond;
  r.inserts_per_s = Rate(a.inserted, b.inserted, r.window_s);
  r.samples_per_s = Rate(a.sampled, b.sampled, r.window_s);
  r.batches_per_s = Rate(a.batches_staged, b.batches_staged, r.window_s);
  r.updates_per_s = Rate(a.batches_released, b.batches_released, r.window_s);
  r.priorities_per_s = Rate(a.priority_updates_applied, b.priority_updates_applied, r.window_s);
  return r;
}

std::optional<double> AchievedSamplesPerInsert(const StatsBlock& stats) {
  if (stats.inserted == 0) return std::nullopt;
  return static_cast<double>(stats.sampled) / static_cast<double>(stats.inserted);
}

std::optional<double> CachedFraction(const StatsBlock& stats) {
  const uint64_t staged = stats.staged_payloads + stats.staged_cached;
  if (staged == 0) return std::nullopt;
  return static_cast<double>(stats.staged_cached) / static_cast<double>(staged);
}

std::vector<std::string> MonitorWarnings(const MonitorSnapshot* before,
                                         const MonitorSnapshot& now) {
  const StatsBlock& b = now.stats;
  if (b.priority_updates_invalid == 0) return {};
  if (const std::optional<MonitorRates> r = ComputeRates(before, now)) {
    const StatsBlock& a = before->stats;
    const uint64_t invalid = b.priority_updates_invalid >= a.priority_updates_invalid
                                 ? b.priority_updates_invalid - a.priority_updates_invalid
                                 : 0;
    const uint64_t applied = b.priority_updates_applied >= a.priority_updates_applied
                                 ? b.priority_updates_applied - a.priority_updates_applied
                                 : 0;
    if (invalid > 0 && applied == 0) {
      return {absl::StrFormat(
          "every priority record of the last %.1f s was invalid (%d NaN, infinite, negative or "
          "not of the batch): "
          "the learner's priorities are frozen",
          r->window_s, invalid)};
    }
    if (invalid > 0) {
      return {absl::StrFormat(
          "%d of %d priority records of the last %.1f s were invalid (NaN, infinite, "
          "negative or not of the batch) and left their priorities unchanged",
          invalid, invalid + applied, r->window_s)};
    }
  }
  return {absl::StrFormat(
      "%d priority records of this epoch were invalid (NaN, infinite, negative or not of the "
      "batch) and left their priorities unchanged",
      b.priority_updates_invalid)};
}

std::optional<double> PriorityMean(const StatsBlock& stats) {
  if (stats.size == 0) return std::nullopt;
  return stats.priority_sum / static_cast<double>(stats.size);
}

std::optional<double> ActorStepRate(const MonitorSnapshot* before, const ActorLine& line) {
  const ActorLine* old = FindActor(before, line.actor_id);
  if (old == nullptr || line.updated_ns <= old->updated_ns || line.env_steps < old->env_steps) {
    return std::nullopt;
  }
  return static_cast<double>(line.env_steps - old->env_steps) * kNanosPerSecond /
         static_cast<double>(line.updated_ns - old->updated_ns);
}

namespace {

// PolicyLine::forward by name (protocol::ForwardMode).
const char* ForwardName(uint32_t forward) {
  switch (forward) {
    case 0:
      return "off";
    case 1:
      return "priority";
    case 2:
      return "uniform";
    case 3:
      return "fifo";
    default:
      return "unknown";
  }
}

const char* LeaseStateName(uint32_t state) {
  switch (static_cast<protocol::LeaseState>(state)) {
    case protocol::LeaseState::kNeverHeld:
      return "free";
    case protocol::LeaseState::kHeld:
      return "held";
    case protocol::LeaseState::kReleased:
      return "released";
  }
  return "unknown";
}

// "leases    H held of N" and one line per lease ever held.
std::string RenderLeasesText(const MonitorSnapshot& now) {
  uint32_t held = 0;
  for (const protocol::LeaseLine& line : now.leases) {
    held += line.state == static_cast<uint32_t>(protocol::LeaseState::kHeld) ? 1 : 0;
  }
  std::string out = absl::StrFormat("leases    %d held of %d\n", held, now.leases.size());
  bool header = false;
  for (uint32_t l = 0; l < now.leases.size(); ++l) {
    const protocol::LeaseLine& line = now.leases[l];
    if (line.state == static_cast<uint32_t>(protocol::LeaseState::kNeverHeld)) continue;
    if (!header) {
      absl::StrAppendFormat(&out, "          %5s %-8s %6s %12s %12s %8s %8s %8s %8s\n", "lease",
                            "state", "actor", "cursor", "inserted", "torn", "overrun", "invalid",
                            "bounded");
      header = true;
    }
    absl::StrAppendFormat(&out, "          %5d %-8s %6d %12d %12d %8d %8d %8d %8d\n", l,
                          LeaseStateName(line.state), line.holder_actor_id, line.ingest_cursor,
                          line.inserted, line.torn, line.overrun, line.transitions_invalid,
                          line.priorities_bounded);
  }
  return out;
}

}  // namespace

std::string RenderMonitorJson(const MonitorInfo& info, const MonitorSnapshot& now,
                              const MonitorSnapshot* before) {
  const StatsBlock& s = now.stats;
  const protocol::LayoutConfig& c = info.config;

  const std::string config = JsonObject(kDoubleDigits)
                                 .Add("capacity", c.capacity)
                                 .Add("slot_size", c.slot_size)
                                 .Add("batch_size", c.batch_size)
                                 .Add("staging_depth", c.staging_depth)
                                 .Add("max_actors", c.max_actors)
                                 .Add("actor_window", protocol::ActorWindow(c))
                                 .Add("transition_spec", c.spec())
                                 .Done();
  const std::string memory = JsonObject(kDoubleDigits)
                                 .Add("size", s.size)
                                 .Add("capacity", s.capacity)
                                 .Add("ingest_cursor", s.ingest_cursor)
                                 .Add("priority_mean", PriorityMean(s))
                                 .Add("priority_max", s.priority_max)
                                 .Done();
  const std::string totals = JsonObject(kDoubleDigits)
                                 .Add("inserted", s.inserted)
                                 .Add("sampled", s.sampled)
                                 .Add("batches_staged", s.batches_staged)
                                 .Add("batches_released", s.batches_released)
                                 .Add("priority_updates_applied", s.priority_updates_applied)
                                 .Add("checkpoints_written", s.checkpoints_written)
                                 .Done();
  const protocol::PolicyLine& p = info.policy;
  const std::string policy = JsonObject(kDoubleDigits)
                                 .Add("samples_per_insert", p.samples_per_insert)
                                 .Add("spi_error_buffer", p.spi_error_buffer)
                                 .Add("min_size_to_sample", p.min_size_to_sample)
                                 .Add("spi_block_actors", p.spi_block_actors)
                                 .Add("forward", ForwardName(p.forward))
                                 .Add("forward_queue", p.forward_queue)
                                 .Done();
  const std::string ratio =
      JsonObject(kDoubleDigits)
          .Add("achieved_samples_per_insert", AchievedSamplesPerInsert(s))
          .Add("limiter_sample_waits", s.limiter_sample_waits)
          .Add("limiter_sample_wait_s", s.limiter_sample_wait_ns / kNanosPerSecond)
          .Add("limiter_insert_wait_s", s.limiter_insert_wait_ns / kNanosPerSecond)
          .Done();
  const std::string transfer =
      JsonObject(kDoubleDigits)
          .Add("staged_payloads", s.staged_payloads)
          .Add("staged_cached", s.staged_cached)
          .Add("cached_fraction", CachedFraction(s))
          .Add("learner_cache_resets", s.learner_cache_resets)
          .Add("crossing_percentile_mean", protocol::CrossingPercentileMean(s))
          .Add("crossing_measured", s.crossing_percentile_count)
          .Done();
  std::string rates = "null";
  if (const std::optional<MonitorRates> r = ComputeRates(before, now)) {
    rates = JsonObject(kDoubleDigits)
                .Add("window_s", r->window_s)
                .Add("inserts_per_s", r->inserts_per_s)
                .Add("samples_per_s", r->samples_per_s)
                .Add("batches_per_s", r->batches_per_s)
                .Add("updates_per_s", r->updates_per_s)
                .Add("priorities_per_s", r->priorities_per_s)
                .Done();
  }
  const std::string drops = JsonObject(kDoubleDigits)
                                .Add("torn_slots", s.torn_slots)
                                .Add("overrun_slots", s.overrun_slots)
                                .Add("sample_copy_rejects", s.sample_copy_rejects)
                                .Add("priority_updates_stale", s.priority_updates_stale)
                                .Add("priority_updates_invalid", s.priority_updates_invalid)
                                .Add("mailbox_rejects", s.mailbox_rejects)
                                .Add("updates_timed_out", s.updates_timed_out)
                                .Add("restore_dropped", s.restore_dropped)
                                .Add("staging_stalls", s.staging_stalls)
                                .Add("priorities_bounded", s.priorities_bounded)
                                .Add("transitions_invalid", s.transitions_invalid)
                                .Add("forward_dropped", s.forward_dropped)
                                .Add("frame_only_records", s.frame_only_records)
                                .Add("frames_missing", s.frames_missing)
                                .Add("frames_evicted", s.frames_evicted)
                                .Add("link_packed_in_bytes", s.link_packed_in_bytes)
                                .Add("link_packed_out_bytes", s.link_packed_out_bytes)
                                .Add("link_pack_cpu_ns", s.link_pack_cpu_ns)
                                .Done();
  const std::string clients = JsonObject(kDoubleDigits)
                                  .Add("actors", s.actors_connected)
                                  .Add("learners", s.learners_connected)
                                  .Add("monitors", s.monitors_connected)
                                  .Add("connections_total", s.connections_total)
                                  .Add("connections_rejected", s.connections_rejected)
                                  .Done();
  std::string warnings = "[";
  for (const std::string& warning : MonitorWarnings(before, now)) {
    if (warnings.size() > 1) warnings += ",";
    warnings += JsonString(warning);
  }
  warnings += "]";
  std::string leases = "[";
  for (uint32_t l = 0; l < now.leases.size(); ++l) {
    const protocol::LeaseLine& line = now.leases[l];
    if (line.state == static_cast<uint32_t>(protocol::LeaseState::kNeverHeld)) continue;
    if (leases.size() > 1) leases += ",";
    leases += JsonObject(kDoubleDigits)
                  .Add("lease", l)
                  .Add("state", LeaseStateName(line.state))
                  .Add("holder_actor_id", line.holder_actor_id)
                  .Add("ingest_cursor", line.ingest_cursor)
                  .Add("inserted", line.inserted)
                  .Add("torn", line.torn)
                  .Add("overrun", line.overrun)
                  .Add("priorities_bounded", line.priorities_bounded)
                  .Add("transitions_invalid", line.transitions_invalid)
                  .Add("grants", line.grants)
                  .Done();
  }
  leases += "]";
  std::string actors = "[";
  for (const ActorLine& line : now.actors) {
    if (actors.size() > 1) actors += ",";
    actors += JsonObject(kDoubleDigits)
                  .Add("actor_id", line.actor_id)
                  .Add("env_steps", line.env_steps)
                  .Add("episodes", line.episodes)
                  .Add("transitions", line.transitions)
                  .Add("mean_return", MeanReturn(line))
                  .Add("returns_count", line.returns_count)
                  .Add("last_return",
                       line.episodes > 0 ? std::optional<double>(line.last_return) : std::nullopt)
                  .Add("age_s", AgeSeconds(line, now.taken))
                  .Add("env_steps_per_s", ActorStepRate(before, line))
                  .Done();
  }
  actors += "]";

  return JsonObject(kDoubleDigits)
      .Add("server", info.server)
      .Add("epoch", s.epoch)
      .Add("server_time_ns", s.server_time_ns)
      .AddRaw("warnings", warnings)
      .AddRaw("config", config)
      .AddRaw("policy", policy)
      .AddRaw("memory", memory)
      .AddRaw("totals", totals)
      .AddRaw("rates", rates)
      .AddRaw("replay_ratio", ratio)
      .AddRaw("transfer", transfer)
      .AddRaw("drops", drops)
      .AddRaw("clients", clients)
      .AddRaw("actors", actors)
      .AddRaw("leases", leases)
      .Done();
}

std::string RenderMonitorText(const MonitorInfo& info, const MonitorSnapshot& now,
                              const MonitorSnapshot* before) {
  const StatsBlock& s = now.stats;
  std::string out;
  absl::StrAppendFormat(&out, "replay_top  %s  epoch %d  %s\n", info.server, s.epoch,
                        absl::FormatTime("%Y-%m-%d %H:%M:%S", now.taken, absl::LocalTimeZone()));
  for (const std::string& warning : MonitorWarnings(before, now)) {
    absl::StrAppend(&out, "WARNING   ", warning, "\n");
  }
  const double fill = s.capacity > 0 ? 100.0 * s.size / s.capacity : 0;
  absl::StrAppendFormat(&out, "memory    size %d / %d (%.1f%%)  ingest_cursor %d\n", s.size,
                        s.capacity, fill, s.ingest_cursor);
  const std::optional<MonitorRates> r = ComputeRates(before, now);
  if (r.has_value()) {
    absl::StrAppendFormat(&out,
                          "rates     inserts/s %s  samples/s %s  batches/s %s  updates/s %s  "
                          "(over %.2f s)\n",
                          Human(r->inserts_per_s), Human(r->samples_per_s), Human(r->batches_per_s),
                          Human(r->updates_per_s), r->window_s);
  } else {
    out += "rates     inserts/s -  samples/s -  batches/s -  updates/s -\n";
  }
  const std::optional<double> mean = PriorityMean(s);
  absl::StrAppendFormat(&out, "priority  mean %s  max %s  (p^alpha)\n",
                        mean.has_value() ? absl::StrFormat("%.4g", *mean) : "-",
                        s.size > 0 ? absl::StrFormat("%.4g", s.priority_max) : "-");
  absl::StrAppendFormat(&out,
                        "totals    inserted %d  sampled %d  batches %d staged / %d released  "
                        "checkpoints %d\n",
                        s.inserted, s.sampled, s.batches_staged, s.batches_released,
                        s.checkpoints_written);
  const protocol::PolicyLine& p = info.policy;
  const std::string target =
      p.forward != 0 ? absl::StrFormat("forwarding %s, the learner limits", ForwardName(p.forward))
      : p.samples_per_insert > 0
          ? absl::StrFormat("target %.3g +- %.4g%s", p.samples_per_insert, p.spi_error_buffer,
                            p.spi_block_actors != 0 ? ", blocks actors" : "")
          : std::string("no limit");
  absl::StrAppendFormat(&out,
                        "ratio     samples/insert %s (%s, min_size %d)  limiter waits %d "
                        "(%.2f s)  insert waits %.2f s\n",
                        FixedOpt(AchievedSamplesPerInsert(s)), target, p.min_size_to_sample,
                        s.limiter_sample_waits, s.limiter_sample_wait_ns / kNanosPerSecond,
                        s.limiter_insert_wait_ns / kNanosPerSecond);
  const std::optional<double> cached = CachedFraction(s);
  const std::optional<double> crossing = protocol::CrossingPercentileMean(s);
  absl::StrAppendFormat(&out,
                        "transfer  payloads %d  cached %d (%s)  cache_resets %d  crossing "
                        "percentile %s\n",
                        s.staged_payloads, s.staged_cached,
                        cached.has_value() ? absl::StrFormat("%.1f%%", 100 * *cached) : "-",
                        s.learner_cache_resets,
                        crossing.has_value() ? absl::StrFormat("%.1f", *crossing) : "-");
  absl::StrAppendFormat(&out,
                        "drops     torn %d  overrun %d  invalid_transitions %d  copy_rejects %d  "
                        "stale_updates %d  invalid_updates %d\n"
                        "          mailbox_rejects %d  update_timeouts %d  restore_dropped %d  "
                        "staging_stalls %d  priorities_bounded %d  forward_dropped %d\n",
                        s.torn_slots, s.overrun_slots, s.transitions_invalid, s.sample_copy_rejects,
                        s.priority_updates_stale, s.priority_updates_invalid, s.mailbox_rejects,
                        s.updates_timed_out, s.restore_dropped, s.staging_stalls,
                        s.priorities_bounded, s.forward_dropped);
  absl::StrAppendFormat(&out,
                        "clients   actors %d  learners %d  monitors %d  (connections %d, "
                        "rejected %d)\n",
                        s.actors_connected, s.learners_connected, s.monitors_connected,
                        s.connections_total, s.connections_rejected);
  out += RenderLeasesText(now);
  if (now.actors.empty()) {
    out += "actors    (none published)\n";
    return out;
  }
  absl::StrAppendFormat(&out, "actors    %5s %12s %9s %9s %11s %11s %12s %7s\n", "id", "env_steps",
                        "steps/s", "episodes", "mean_ret", "last_ret", "transitions", "age_s");
  for (const ActorLine& line : now.actors) {
    const std::optional<double> last =
        line.episodes > 0 ? std::optional<double>(line.last_return) : std::nullopt;
    absl::StrAppendFormat(&out, "          %5d %12d %9s %9d %11s %11s %12d %7.1f\n", line.actor_id,
                          line.env_steps, HumanOpt(ActorStepRate(before, line)), line.episodes,
                          FixedOpt(MeanReturn(line)), FixedOpt(last), line.transitions,
                          AgeSeconds(line, now.taken));
  }
  return out;
}

NodeTotals CombineNodes(const std::vector<NodeView>& nodes) {
  NodeTotals t;
  t.nodes = nodes.size();
  bool all_rates = true;
  double inserts_per_s = 0;
  double samples_per_s = 0;
  for (const NodeView& node : nodes) {
    if (!node.error.empty()) continue;
    const StatsBlock& s = node.now.stats;
    ++t.reachable;
    t.size += s.size;
    t.capacity += s.capacity;
    t.inserted += s.inserted;
    t.sampled += s.sampled;
    t.priority_sum += s.priority_sum;
    const std::optional<MonitorRates> r =
        ComputeRates(node.before.has_value() ? &*node.before : nullptr, node.now);
    all_rates = all_rates && r.has_value();
    if (r.has_value()) {
      inserts_per_s += r->inserts_per_s;
      samples_per_s += r->samples_per_s;
    }
  }
  if (t.reachable > 0 && all_rates) {
    t.inserts_per_s = inserts_per_s;
    t.samples_per_s = samples_per_s;
  }
  for (const NodeView& node : nodes) {
    const bool share = node.error.empty() && t.priority_sum > 0;
    t.priority_share.push_back(
        share ? std::optional<double>(node.now.stats.priority_sum / t.priority_sum) : std::nullopt);
  }
  return t;
}

std::string RenderNodesJson(const std::vector<NodeView>& nodes) {
  const NodeTotals t = CombineNodes(nodes);
  std::string views = "[";
  std::string shares = "[";
  for (size_t k = 0; k < nodes.size(); ++k) {
    const NodeView& node = nodes[k];
    if (k > 0) {
      views += ",";
      shares += ",";
    }
    views += node.error.empty()
                 ? RenderMonitorJson(node.info, node.now,
                                     node.before.has_value() ? &*node.before : nullptr)
                 : JsonObject().Add("server", node.server).Add("error", node.error).Done();
    shares += t.priority_share[k].has_value()
                  ? absl::StrFormat("%.*g", kDoubleDigits, *t.priority_share[k])
                  : "null";
  }
  views += "]";
  shares += "]";
  const std::string totals = JsonObject(kDoubleDigits)
                                 .Add("nodes", t.nodes)
                                 .Add("reachable", t.reachable)
                                 .Add("size", t.size)
                                 .Add("capacity", t.capacity)
                                 .Add("inserted", t.inserted)
                                 .Add("sampled", t.sampled)
                                 .Add("inserts_per_s", t.inserts_per_s)
                                 .Add("samples_per_s", t.samples_per_s)
                                 .Add("priority_sum", t.priority_sum)
                                 .AddRaw("priority_share", shares)
                                 .Done();
  return JsonObject().AddRaw("nodes", views).AddRaw("totals", totals).Done();
}

std::string RenderNodesText(const std::vector<NodeView>& nodes) {
  const NodeTotals t = CombineNodes(nodes);
  std::string out = absl::StrFormat("replay_top  %d nodes, %d reachable\n", t.nodes, t.reachable);
  const double fill = t.capacity > 0 ? 100.0 * t.size / t.capacity : 0;
  absl::StrAppendFormat(&out,
                        "total     inserts/s %s  samples/s %s  size %d / %d (%.1f%%)  inserted %d  "
                        "sampled %d\n",
                        HumanOpt(t.inserts_per_s), HumanOpt(t.samples_per_s), t.size, t.capacity,
                        fill, t.inserted, t.sampled);
  out += "share    ";
  for (size_t k = 0; k < nodes.size(); ++k) {
    const std::optional<double>& share = t.priority_share[k];
    absl::StrAppend(&out, " ", nodes[k].server, " ",
                    share.has_value() ? absl::StrFormat("%.1f%%", 100 * *share) : "-", " ");
  }
  absl::StrAppendFormat(&out, " (of sum p^alpha %.4g)\n", t.priority_sum);
  for (const NodeView& node : nodes) {
    out += "\n";
    if (node.error.empty()) {
      out +=
          RenderMonitorText(node.info, node.now, node.before.has_value() ? &*node.before : nullptr);
    } else {
      absl::StrAppend(&out, "replay_top  ", node.server, "  unreachable\n", "error     ",
                      node.error, "\n");
    }
  }
  return out;
}

}  // namespace dreplay::tools
