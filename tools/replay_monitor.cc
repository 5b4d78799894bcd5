// Copyright dreplay authors.

#include "tools/replay_monitor.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::tools {

using protocol::ActorLine;
using protocol::StatsBlock;

namespace {

constexpr double kNanosPerSecond = 1e9;

// `s` as a JSON string, quotes included.
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Builds one JSON object, field by field.
class JsonObject {
 public:
  JsonObject& Int(const char* key, uint64_t value) {
    Key(key);
    absl::StrAppend(&out_, value);
    return *this;
  }
  JsonObject& Num(const char* key, double value) {
    Key(key);
    AppendNumber(value);
    return *this;
  }
  JsonObject& OptNum(const char* key, const std::optional<double>& value) {
    Key(key);
    if (value.has_value()) {
      AppendNumber(*value);
    } else {
      out_ += "null";
    }
    return *this;
  }
  JsonObject& Str(const char* key, const std::string& value) {
    Key(key);
    AppendString(value);
    return *this;
  }
  // `json` is already a JSON value.
  JsonObject& Raw(const char* key, const std::string& json) {
    Key(key);
    out_ += json;
    return *this;
  }
  std::string Done() const { return out_ + "}"; }

 private:
  void Key(const char* key) {
    out_ += first_ ? "" : ",";
    first_ = false;
    AppendString(key);
    out_ += ":";
  }
  void AppendNumber(double value) {
    if (std::isfinite(value)) {
      absl::StrAppendFormat(&out_, "%.6g", value);
    } else {
      out_ += "null";
    }
  }
  void AppendString(const std::string& s) { out_ += JsonString(s); }

  std::string out_ = "{";
  bool first_ = true;
};

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
          "every priority record of the last %.1f s was invalid (%d NaN, infinite or negative): "
          "the learner's priorities are frozen",
          r->window_s, invalid)};
    }
    if (invalid > 0) {
      return {absl::StrFormat(
          "%d of %d priority records of the last %.1f s were invalid (NaN, infinite or "
          "negative) and left their priorities unchanged",
          invalid, invalid + applied, r->window_s)};
    }
  }
  return {absl::StrFormat(
      "%d priority records of this epoch were invalid (NaN, infinite or negative) and left their "
      "priorities unchanged",
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
      absl::StrAppendFormat(&out, "          %5s %-8s %6s %12s %12s %8s %8s %8s\n", "lease",
                            "state", "actor", "cursor", "inserted", "torn", "overrun", "bounded");
      header = true;
    }
    absl::StrAppendFormat(&out, "          %5d %-8s %6d %12d %12d %8d %8d %8d\n", l,
                          LeaseStateName(line.state), line.holder_actor_id, line.ingest_cursor,
                          line.inserted, line.torn, line.overrun, line.priorities_bounded);
  }
  return out;
}

}  // namespace

std::string RenderMonitorJson(const MonitorInfo& info, const MonitorSnapshot& now,
                              const MonitorSnapshot* before) {
  const StatsBlock& s = now.stats;
  const protocol::LayoutConfig& c = info.config;

  const std::string config = JsonObject()
                                 .Int("capacity", c.capacity)
                                 .Int("slot_size", c.slot_size)
                                 .Int("batch_size", c.batch_size)
                                 .Int("staging_depth", c.staging_depth)
                                 .Int("max_actors", c.max_actors)
                                 .Int("actor_window", protocol::ActorWindow(c))
                                 .Str("transition_spec", c.spec())
                                 .Done();
  const std::string memory = JsonObject()
                                 .Int("size", s.size)
                                 .Int("capacity", s.capacity)
                                 .Int("ingest_cursor", s.ingest_cursor)
                                 .Int("tail", s.tail_seen)
                                 .OptNum("priority_mean", PriorityMean(s))
                                 .Num("priority_max", s.priority_max)
                                 .Done();
  const std::string totals = JsonObject()
                                 .Int("inserted", s.inserted)
                                 .Int("sampled", s.sampled)
                                 .Int("batches_staged", s.batches_staged)
                                 .Int("batches_released", s.batches_released)
                                 .Int("priority_updates_applied", s.priority_updates_applied)
                                 .Int("checkpoints_written", s.checkpoints_written)
                                 .Done();
  const protocol::PolicyLine& p = info.policy;
  const std::string policy = JsonObject()
                                 .Num("samples_per_insert", p.samples_per_insert)
                                 .Num("spi_error_buffer", p.spi_error_buffer)
                                 .Int("min_size_to_sample", p.min_size_to_sample)
                                 .Int("spi_block_actors", p.spi_block_actors)
                                 .Done();
  const std::string ratio =
      JsonObject()
          .OptNum("achieved_samples_per_insert", AchievedSamplesPerInsert(s))
          .Int("limiter_sample_waits", s.limiter_sample_waits)
          .Num("limiter_sample_wait_s", s.limiter_sample_wait_ns / kNanosPerSecond)
          .Num("limiter_insert_wait_s", s.limiter_insert_wait_ns / kNanosPerSecond)
          .Done();
  const std::string transfer = JsonObject()
                                   .Int("staged_payloads", s.staged_payloads)
                                   .Int("staged_cached", s.staged_cached)
                                   .OptNum("cached_fraction", CachedFraction(s))
                                   .Int("learner_cache_resets", s.learner_cache_resets)
                                   .Done();
  std::string rates = "null";
  if (const std::optional<MonitorRates> r = ComputeRates(before, now)) {
    rates = JsonObject()
                .Num("window_s", r->window_s)
                .Num("inserts_per_s", r->inserts_per_s)
                .Num("samples_per_s", r->samples_per_s)
                .Num("batches_per_s", r->batches_per_s)
                .Num("updates_per_s", r->updates_per_s)
                .Num("priorities_per_s", r->priorities_per_s)
                .Done();
  }
  const std::string drops = JsonObject()
                                .Int("torn_slots", s.torn_slots)
                                .Int("overrun_slots", s.overrun_slots)
                                .Int("sample_copy_rejects", s.sample_copy_rejects)
                                .Int("priority_updates_stale", s.priority_updates_stale)
                                .Int("priority_updates_invalid", s.priority_updates_invalid)
                                .Int("mailbox_rejects", s.mailbox_rejects)
                                .Int("updates_timed_out", s.updates_timed_out)
                                .Int("restore_dropped", s.restore_dropped)
                                .Int("staging_stalls", s.staging_stalls)
                                .Int("priorities_bounded", s.priorities_bounded)
                                .Done();
  const std::string clients = JsonObject()
                                  .Int("actors", s.actors_connected)
                                  .Int("learners", s.learners_connected)
                                  .Int("monitors", s.monitors_connected)
                                  .Int("connections_total", s.connections_total)
                                  .Int("connections_rejected", s.connections_rejected)
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
    leases += JsonObject()
                  .Int("lease", l)
                  .Str("state", LeaseStateName(line.state))
                  .Int("holder_actor_id", line.holder_actor_id)
                  .Int("ingest_cursor", line.ingest_cursor)
                  .Int("inserted", line.inserted)
                  .Int("torn", line.torn)
                  .Int("overrun", line.overrun)
                  .Int("priorities_bounded", line.priorities_bounded)
                  .Int("grants", line.grants)
                  .Done();
  }
  leases += "]";
  std::string actors = "[";
  for (const ActorLine& line : now.actors) {
    if (actors.size() > 1) actors += ",";
    actors += JsonObject()
                  .Int("actor_id", line.actor_id)
                  .Int("env_steps", line.env_steps)
                  .Int("episodes", line.episodes)
                  .Int("transitions", line.transitions)
                  .OptNum("mean_return", MeanReturn(line))
                  .Int("returns_count", line.returns_count)
                  .OptNum("last_return", line.episodes > 0 ? std::optional<double>(line.last_return)
                                                           : std::nullopt)
                  .Num("age_s", AgeSeconds(line, now.taken))
                  .OptNum("env_steps_per_s", ActorStepRate(before, line))
                  .Done();
  }
  actors += "]";

  return JsonObject()
      .Str("server", info.server)
      .Int("epoch", s.epoch)
      .Int("server_time_ns", s.server_time_ns)
      .Raw("warnings", warnings)
      .Raw("config", config)
      .Raw("policy", policy)
      .Raw("memory", memory)
      .Raw("totals", totals)
      .Raw("rates", rates)
      .Raw("replay_ratio", ratio)
      .Raw("transfer", transfer)
      .Raw("drops", drops)
      .Raw("clients", clients)
      .Raw("actors", actors)
      .Raw("leases", leases)
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
  absl::StrAppendFormat(&out, "memory    size %d / %d (%.1f%%)  ingest_cursor %d  tail %d\n",
                        s.size, s.capacity, fill, s.ingest_cursor, s.tail_seen);
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
      p.samples_per_insert > 0
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
  absl::StrAppendFormat(&out, "transfer  payloads %d  cached %d (%s)  cache_resets %d\n",
                        s.staged_payloads, s.staged_cached,
                        cached.has_value() ? absl::StrFormat("%.1f%%", 100 * *cached) : "-",
                        s.learner_cache_resets);
  absl::StrAppendFormat(&out,
                        "drops     torn %d  overrun %d  copy_rejects %d  "
                        "stale_updates %d  invalid_updates %d\n"
                        "          mailbox_rejects %d  update_timeouts %d  restore_dropped %d  "
                        "staging_stalls %d  priorities_bounded %d\n",
                        s.torn_slots, s.overrun_slots, s.sample_copy_rejects,
                        s.priority_updates_stale, s.priority_updates_invalid, s.mailbox_rejects,
                        s.updates_timed_out, s.restore_dropped, s.staging_stalls,
                        s.priorities_bounded);
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

}  // namespace dreplay::tools
