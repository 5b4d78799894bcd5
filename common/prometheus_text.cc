// Copyright dreplay authors.

#include "common/prometheus_text.h"

#include <charconv>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace dreplay {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string EscapePrometheusHelp(absl::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapePrometheusLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatPrometheusValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // The shortest text that reads back exactly, in fixed or exponent form,
  // whichever is shorter ("100", "0.25", "2.5e-05").
  char buffer[32];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, r.ptr);
}

bool IsPrometheusMetricName(absl::string_view name) {
  if (name.empty() || !(IsNameStart(name[0]) || name[0] == ':')) return false;
  for (char c : name) {
    if (!(IsNameStart(c) || IsDigit(c) || c == ':')) return false;
  }
  return true;
}

bool IsPrometheusLabelName(absl::string_view name) {
  if (name.empty() || !IsNameStart(name[0]) || absl::StartsWith(name, "__")) return false;
  for (char c : name) {
    if (!(IsNameStart(c) || IsDigit(c))) return false;
  }
  return true;
}

void PrometheusText::Family(absl::string_view name, MetricType type, absl::string_view help) {
  CHECK(IsPrometheusMetricName(name)) << "bad metric name '" << name << "'";
  CHECK(families_.insert(std::string(name)).second) << "metric family '" << name << "' twice";
  family_ = std::string(name);
  type_ = type;
  absl::StrAppend(&out_, "# HELP ", name, " ", EscapePrometheusHelp(help), "\n", "# TYPE ", name,
                  " ", TypeName(type), "\n");
}

void PrometheusText::Line(absl::string_view suffix, const MetricLabels& labels,
                          absl::string_view value) {
  CHECK(!family_.empty()) << "a sample before any metric family";
  absl::StrAppend(&out_, family_, suffix);
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      CHECK(IsPrometheusLabelName(labels[i].first))
          << "bad label name '" << labels[i].first << "' in " << family_;
      absl::StrAppend(&out_, i > 0 ? "," : "", labels[i].first, "=\"",
                      EscapePrometheusLabelValue(labels[i].second), "\"");
    }
    out_ += '}';
  }
  absl::StrAppend(&out_, " ", value, "\n");
}

void PrometheusText::Sample(const MetricLabels& labels, double value) {
  CHECK(type_ != MetricType::kHistogram) << family_ << ": histograms are written by Histogram()";
  Line("", labels, FormatPrometheusValue(value));
}

void PrometheusText::Sample(const MetricLabels& labels, uint64_t value) {
  CHECK(type_ != MetricType::kHistogram) << family_ << ": histograms are written by Histogram()";
  Line("", labels, absl::StrCat(value));
}

void PrometheusText::Counter(absl::string_view name, absl::string_view help, uint64_t value) {
  Family(name, MetricType::kCounter, help);
  Sample({}, value);
}

void PrometheusText::Gauge(absl::string_view name, absl::string_view help, double value) {
  Family(name, MetricType::kGauge, help);
  Sample({}, value);
}

void PrometheusText::Histogram(absl::string_view name, absl::string_view help,
                               const HistogramSnapshot& h) {
  Family(name, MetricType::kHistogram, help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
    if (i < h.bucket_counts.size()) cumulative += h.bucket_counts[i];
    const std::string le = FormatPrometheusValue(h.upper_bounds[i]);
    Line("_bucket", {{"le", le}}, absl::StrCat(cumulative));
  }
  Line("_bucket", {{"le", "+Inf"}}, absl::StrCat(h.count));
  Line("_sum", {}, FormatPrometheusValue(h.sum));
  Line("_count", {}, absl::StrCat(h.count));
}

std::string PrometheusText::Take() {
  std::string out = std::move(out_);
  out_.clear();
  family_.clear();
  families_.clear();
  return out;
}

}  // namespace dreplay
