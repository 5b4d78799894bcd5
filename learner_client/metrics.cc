// Copyright dreplay authors.

#include "learner_client/metrics.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_writer.h"

namespace dreplay::learner {
namespace {

// printf-style formatting into a std::string.
template <typename... Args>
std::string Format(const char* format, Args... args) {
  const int size = std::snprintf(nullptr, 0, format, args...);
  if (size <= 0) return std::string();
  std::string out(static_cast<size_t>(size) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, args...);
  out.resize(static_cast<size_t>(size));
  return out;
}

// The fields both records have, first in either: what the record is, and
// where the run stands at wall_s.
template <typename Record>
JsonObject RecordJson(const char* type, const Record& r) {
  return JsonObject()
      .Add("type", type)
      .Add("replay_placement", r.replay_placement)
      .Add("seed", r.seed)
      .Add("wall_s", r.wall_s)
      .Add("train_steps", r.train_steps)
      .Add("env_steps", r.env_steps)
      .Add("episodes", r.episodes)
      .Add("link_bytes_total", r.link_bytes_total)
      .Add("link_transitions_total", r.link_transitions_total);
}

// The link bytes by class and the fetched counts, after the other fields.
JsonObject& AddLink(JsonObject& json, const LinkStats& link) {
  return json.Add("link_bytes_experience", link.experience)
      .Add("link_bytes_metadata", link.metadata)
      .Add("link_bytes_polling", link.polling)
      .Add("link_bytes_priorities", link.priorities)
      .Add("link_bytes_params", link.params)
      .Add("link_bytes_control", link.control)
      .Add("transitions_fetched_total", link.transitions_fetched)
      .Add("distinct_transitions_fetched_total", link.distinct_transitions_fetched)
      .Add("server_ingested_total", link.server_ingested);
}

// The q-quantile (0..1) of `values` (nearest rank); reorders them.
double Quantile(std::vector<double>* values, double q) {
  const size_t rank =
      std::min(values->size() - 1, static_cast<size_t>(q * static_cast<double>(values->size())));
  std::nth_element(values->begin(), values->begin() + static_cast<std::ptrdiff_t>(rank),
                   values->end());
  return (*values)[rank];
}

std::string Optional(const std::optional<double>& value, const char* format) {
  if (!value.has_value() || !std::isfinite(*value)) return "-";
  return Format(format, *value);
}

// "12.3 MB" style.
std::string Bytes(double bytes) {
  constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 4) {
    bytes /= 1000;
    ++unit;
  }
  return Format(unit == 0 ? "%.0f %s" : "%.1f %s", bytes, kUnits[unit]);
}

}  // namespace

std::string ProgressRecord::ToJson() const {
  JsonObject json = RecordJson("progress", *this);
  json.Add("loss", loss)
      .Add("transferred", transferred)
      .Add("transferred_priority", transferred_priority)
      .Add("link_bytes_per_s", link_bytes_per_s)
      .Add("link_transitions_per_s", link_transitions_per_s)
      .Add("actor_return_mean", actor_return_mean)
      .Add("eval_return_mean", eval_return_mean)
      .Add("trained_abs_td_error", trained_abs_td_error)
      .Add("probe_loss", probe_loss)
      .Add("samples_per_insert", samples_per_insert)
      .Add("data_age_mean_s", data_age_mean_s)
      .Add("data_age_p50_s", data_age_p50_s)
      .Add("data_age_p95_s", data_age_p95_s)
      .Add("policy_lag_mean", policy_lag_mean)
      .Add("crossing_percentile", crossing_percentile);
  return AddLink(json, link).Done();
}

std::string ProgressRecord::ToText() const {
  return Format(
      "[%s %6.1fs] train %llu  env %llu  loss %s  probe %s  link %s (%s/s, %.0f tr/s)  "
      "prio %s  spi %s  age %s s  actor return %s  eval %s",
      replay_placement.c_str(), wall_s, static_cast<unsigned long long>(train_steps),
      static_cast<unsigned long long>(env_steps), Optional(loss, "%.4g").c_str(),
      Optional(probe_loss, "%.4g").c_str(), Bytes(static_cast<double>(link_bytes_total)).c_str(),
      Bytes(link_bytes_per_s).c_str(), link_transitions_per_s,
      Optional(transferred_priority, "%.3g").c_str(), Optional(samples_per_insert, "%.2f").c_str(),
      Optional(data_age_mean_s, "%.3g").c_str(), Optional(actor_return_mean, "%.1f").c_str(),
      Optional(eval_return_mean, "%.1f").c_str());
}

std::string SummaryRecord::ToJson() const {
  JsonObject json = RecordJson("summary", *this);
  json.Add("solved", solved)
      .Add("time_to_solve_s", time_to_solve_s)
      .Add("env_steps_to_solve", env_steps_to_solve)
      .Add("loss_mean_last_half", loss_mean_last_half)
      .Add("transferred_priority_mean_last_half", transferred_priority_mean_last_half)
      .Add("eval_return_mean", eval_return_mean)
      .Add("eval_return_best", eval_return_best)
      .Add("evaluations", evaluations)
      .Add("probe_loss", probe_loss)
      .Add("samples_per_insert", samples_per_insert)
      .Add("data_age_mean_s", data_age_mean_s)
      .Add("policy_lag_mean", policy_lag_mean)
      .Add("crossing_percentile", crossing_percentile);
  return AddLink(json, link).Done();
}

std::string SummaryRecord::ToText() const {
  std::string text = Format(
      "%s: %s after %.1f s; %llu train steps, %llu env steps; across the link %llu "
      "transitions, %s; loss (last half) %s, transferred priority (last half) %s; "
      "last eval %s, best %s; probe loss %s, samples per insert %s, data age %s s, policy "
      "lag %s versions; link "
      "bytes: experience %s, metadata %s, polling %s, priorities %s, params %s, control %s",
      replay_placement.c_str(), solved ? "solved" : "not solved", wall_s,
      static_cast<unsigned long long>(train_steps), static_cast<unsigned long long>(env_steps),
      static_cast<unsigned long long>(link_transitions_total),
      Bytes(static_cast<double>(link_bytes_total)).c_str(),
      Optional(loss_mean_last_half, "%.4g").c_str(),
      Optional(transferred_priority_mean_last_half, "%.3g").c_str(),
      Optional(eval_return_mean, "%.1f").c_str(), Optional(eval_return_best, "%.1f").c_str(),
      Optional(probe_loss, "%.4g").c_str(), Optional(samples_per_insert, "%.2f").c_str(),
      Optional(data_age_mean_s, "%.3g").c_str(), Optional(policy_lag_mean, "%.3g").c_str(),
      Bytes(static_cast<double>(link.experience)).c_str(),
      Bytes(static_cast<double>(link.metadata)).c_str(),
      Bytes(static_cast<double>(link.polling)).c_str(),
      Bytes(static_cast<double>(link.priorities)).c_str(),
      Bytes(static_cast<double>(link.params)).c_str(),
      Bytes(static_cast<double>(link.control)).c_str());
  if (solved) {
    text += Format("; solved at %.1f s after %llu env steps", *time_to_solve_s,
                   static_cast<unsigned long long>(*env_steps_to_solve));
  }
  return text;
}

MetricsRecorder::MetricsRecorder(std::string replay_placement, uint64_t seed, double solve_return)
    : replay_placement_(std::move(replay_placement)), seed_(seed), solve_return_(solve_return) {}

void MetricsRecorder::RecordTrainStep(double loss, absl::Span<const float> abs_td_errors) {
  loss_by_step_.push_back(static_cast<float>(loss));
  interval_loss_sum_ += loss;
  for (float e : abs_td_errors) interval_trained_error_sum_ += e;
  interval_trained_count_ += abs_td_errors.size();
}

void MetricsRecorder::RecordPolicyLag(int64_t versions) {
  policy_lag_sum_ += static_cast<double>(versions);
  ++policy_lag_count_;
  interval_lag_sum_ += static_cast<double>(versions);
  ++interval_lag_count_;
}

void MetricsRecorder::RecordDataAge(double seconds) {
  data_age_sum_ += seconds;
  ++data_age_count_;
  interval_ages_.push_back(seconds);
}

void MetricsRecorder::RecordArrived(uint64_t count) {
  transferred_total_ += count;
  interval_transferred_ += count;
}

void MetricsRecorder::RecordFirstUse(absl::Span<const float> abs_td_errors) {
  if (abs_td_errors.empty()) return;
  double sum = 0;
  for (float e : abs_td_errors) sum += e;
  first_uses_.push_back({train_steps(), sum, abs_td_errors.size()});
  first_uses_total_ += abs_td_errors.size();
  interval_priority_sum_ += sum;
  interval_priority_count_ += abs_td_errors.size();
}

void MetricsRecorder::RecordTransferred(absl::Span<const float> abs_td_errors) {
  RecordArrived(abs_td_errors.size());
  RecordFirstUse(abs_td_errors);
}

bool MetricsRecorder::RecordEvaluation(double wall_s, double mean_return) {
  ++evaluations_;
  last_eval_ = mean_return;
  if (!best_eval_.has_value() || mean_return > *best_eval_) best_eval_ = mean_return;
  if (solved_ || !(mean_return >= solve_return_)) return false;
  solved_ = true;
  time_to_solve_s_ = wall_s;
  env_steps_to_solve_ = actors_.env_steps;
  return true;
}

ProgressRecord MetricsRecorder::Progress(double wall_s) {
  ProgressRecord r;
  r.replay_placement = replay_placement_;
  r.seed = seed_;
  r.wall_s = wall_s;
  r.train_steps = train_steps();
  r.env_steps = actors_.env_steps;
  const uint64_t steps = train_steps() - interval_first_step_;
  if (steps > 0) r.loss = interval_loss_sum_ / static_cast<double>(steps);
  r.transferred = interval_transferred_;
  if (interval_priority_count_ > 0) {
    r.transferred_priority = interval_priority_sum_ / static_cast<double>(interval_priority_count_);
  }
  r.link_bytes_total = link_.total_bytes();
  r.link_transitions_total = transferred_total_;
  r.link = link_;
  r.transitions_dropped = transitions_dropped_;
  r.params_withheld = params_withheld_;
  if (interval_trained_count_ > 0) {
    r.trained_abs_td_error =
        interval_trained_error_sum_ / static_cast<double>(interval_trained_count_);
  }
  r.probe_loss = probe_loss_;
  r.samples_per_insert = samples_per_insert_;
  r.crossing_percentile = crossing_percentile_;
  if (!interval_ages_.empty()) {
    double sum = 0;
    for (double age : interval_ages_) sum += age;
    r.data_age_mean_s = sum / static_cast<double>(interval_ages_.size());
    r.data_age_p50_s = Quantile(&interval_ages_, 0.5);
    r.data_age_p95_s = Quantile(&interval_ages_, 0.95);
  }
  if (interval_lag_count_ > 0) {
    r.policy_lag_mean = interval_lag_sum_ / static_cast<double>(interval_lag_count_);
  }
  const double seconds = wall_s - interval_start_s_;
  if (seconds > 0) {
    r.link_bytes_per_s =
        static_cast<double>(link_.total_bytes() - interval_link_bytes_start_) / seconds;
    r.link_transitions_per_s =
        static_cast<double>(transferred_total_ - interval_transitions_start_) / seconds;
  }
  r.episodes = actors_.episodes;
  if (actors_.returns_count > 0) {
    r.actor_return_mean = actors_.returns_sum / static_cast<double>(actors_.returns_count);
  }
  r.eval_return_mean = last_eval_;

  interval_start_s_ = wall_s;
  interval_first_step_ = train_steps();
  interval_loss_sum_ = 0;
  interval_transferred_ = 0;
  interval_priority_sum_ = 0;
  interval_priority_count_ = 0;
  interval_link_bytes_start_ = link_.total_bytes();
  interval_transitions_start_ = transferred_total_;
  interval_trained_error_sum_ = 0;
  interval_trained_count_ = 0;
  interval_ages_.clear();
  interval_lag_sum_ = 0;
  interval_lag_count_ = 0;
  return r;
}

SummaryRecord MetricsRecorder::Summary(double wall_s) const {
  SummaryRecord s;
  s.replay_placement = replay_placement_;
  s.seed = seed_;
  s.wall_s = wall_s;
  s.solved = solved_;
  if (solved_) {
    s.time_to_solve_s = time_to_solve_s_;
    s.env_steps_to_solve = env_steps_to_solve_;
  }
  s.train_steps = train_steps();
  s.env_steps = actors_.env_steps;
  s.episodes = actors_.episodes;
  s.link_bytes_total = link_.total_bytes();
  s.link_transitions_total = transferred_total_;
  s.link = link_;
  s.probe_loss = probe_loss_;
  s.samples_per_insert = samples_per_insert_;
  s.crossing_percentile = crossing_percentile_;
  if (data_age_count_ > 0) s.data_age_mean_s = data_age_sum_ / static_cast<double>(data_age_count_);
  if (policy_lag_count_ > 0) {
    s.policy_lag_mean = policy_lag_sum_ / static_cast<double>(policy_lag_count_);
  }
  // The last half of training: train steps k (1-based) with k >= final / 2.
  const double half = static_cast<double>(train_steps()) / 2.0;
  double loss_sum = 0;
  uint64_t loss_count = 0;
  for (size_t i = 0; i < loss_by_step_.size(); ++i) {
    if (static_cast<double>(i + 1) >= half) {
      loss_sum += loss_by_step_[i];
      ++loss_count;
    }
  }
  if (loss_count > 0) s.loss_mean_last_half = loss_sum / static_cast<double>(loss_count);
  double priority_sum = 0;
  uint64_t priority_count = 0;
  for (const FirstUse& a : first_uses_) {
    if (static_cast<double>(a.train_steps) >= half) {
      priority_sum += a.priority_sum;
      priority_count += a.count;
    }
  }
  if (priority_count > 0) {
    s.transferred_priority_mean_last_half = priority_sum / static_cast<double>(priority_count);
  }
  s.eval_return_mean = last_eval_;
  s.eval_return_best = best_eval_;
  s.evaluations = evaluations_;
  return s;
}

absl::StatusOr<std::unique_ptr<MetricsFile>> MetricsFile::Open(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("metrics file: empty path");
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create metrics file ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<MetricsFile>(new MetricsFile(path, file));
}

MetricsFile::~MetricsFile() { std::fclose(file_); }

absl::Status MetricsFile::Write(const std::string& json) {
  if (std::fputs(json.c_str(), file_) < 0 || std::fputc('\n', file_) == EOF ||
      std::fflush(file_) != 0) {
    return absl::DataLossError(
        absl::StrCat("cannot write metrics file ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::learner
