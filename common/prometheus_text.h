// Copyright dreplay authors.
//
// prometheus_text.h: metrics written in the Prometheus text exposition
// format (version 0.0.4), the body of a GET /metrics.
//
//   PrometheusText out;
//   out.Counter("dreplay_server_inserted_total", "Transitions accepted.", 1234);
//   out.Family("dreplay_server_dropped_total", MetricType::kCounter,
//              "Transitions dropped, by cause.");
//   out.Sample({{"cause", "torn"}}, 3);
//   out.Sample({{"cause", "overrun"}}, 0);
//   out.Histogram("dreplay_server_staging_delay_seconds", "...", snapshot);
//   std::string body = out.Take();
//
// Every family gets its "# HELP" and "# TYPE" lines, once; samples follow
// their family. Help text and label values are escaped as the format
// requires (backslash, newline, and in label values the double quote).
// Values print as the shortest decimal that reads back exactly, "+Inf",
// "-Inf" or "NaN"; counters given as integers print as integers.
//
// Metric and label names are the caller's constants: a name that is not
// valid in the format, a family written twice or a sample before any family
// is a bug and CHECK-fails.
//
// Not thread-safe; one PrometheusText per rendering.

#ifndef DREPLAY_COMMON_PROMETHEUS_TEXT_H_
#define DREPLAY_COMMON_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "common/bucket_histogram.h"

namespace dreplay {

// The Content-Type of a response that holds this format.
inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram };

// Label name and value pairs of one sample, in the order they print.
using MetricLabels = std::vector<std::pair<absl::string_view, absl::string_view>>;

class PrometheusText {
 public:
  // Starts family `name`: its HELP and TYPE lines.
  void Family(absl::string_view name, MetricType type, absl::string_view help);
  // One sample of the current counter or gauge family.
  void Sample(const MetricLabels& labels, double value);
  void Sample(const MetricLabels& labels, uint64_t value);

  // A family with one unlabelled sample.
  void Counter(absl::string_view name, absl::string_view help, uint64_t value);
  void Gauge(absl::string_view name, absl::string_view help, double value);
  // A histogram family: cumulative NAME_bucket{le=...} lines (the last one
  // le="+Inf"), NAME_sum and NAME_count.
  void Histogram(absl::string_view name, absl::string_view help, const HistogramSnapshot& h);

  // The text so far; the writer is empty afterwards.
  std::string Take();

 private:
  void Line(absl::string_view suffix, const MetricLabels& labels, absl::string_view value);

  std::string out_;
  std::string family_;  // the current family's name
  MetricType type_ = MetricType::kCounter;
  absl::flat_hash_set<std::string> families_;
};

// The pieces, for tests and other writers.
// A help text with '\' and newline escaped.
std::string EscapePrometheusHelp(absl::string_view help);
// A label value with '\', '"' and newline escaped.
std::string EscapePrometheusLabelValue(absl::string_view value);
// A sample value: the shortest decimal that reads back exactly, "+Inf",
// "-Inf" or "NaN".
std::string FormatPrometheusValue(double value);
// True for a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or label name
// ([a-zA-Z_][a-zA-Z0-9_]*, and not starting with "__", which is reserved).
bool IsPrometheusMetricName(absl::string_view name);
bool IsPrometheusLabelName(absl::string_view name);

}  // namespace dreplay

#endif  // DREPLAY_COMMON_PROMETHEUS_TEXT_H_
