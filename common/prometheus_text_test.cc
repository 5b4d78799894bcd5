// Copyright dreplay authors.

#include "common/prometheus_text.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace dreplay {
namespace {

TEST(PrometheusTextTest, WritesHelpAndTypeBeforeTheSamplesOfEachFamily) {
  PrometheusText out;
  out.Counter("x_inserted_total", "Transitions accepted.", 1234);
  out.Family("x_dropped_total", MetricType::kCounter, "Dropped, by cause.");
  out.Sample({{"cause", "torn"}}, uint64_t{3});
  out.Sample({{"cause", "overrun"}, {"where", "ingest"}}, uint64_t{0});
  out.Gauge("x_size", "Transitions held.", 17);
  EXPECT_EQ(out.Take(),
            "# HELP x_inserted_total Transitions accepted.\n"
            "# TYPE x_inserted_total counter\n"
            "x_inserted_total 1234\n"
            "# HELP x_dropped_total Dropped, by cause.\n"
            "# TYPE x_dropped_total counter\n"
            "x_dropped_total{cause=\"torn\"} 3\n"
            "x_dropped_total{cause=\"overrun\",where=\"ingest\"} 0\n"
            "# HELP x_size Transitions held.\n"
            "# TYPE x_size gauge\n"
            "x_size 17\n");
}

TEST(PrometheusTextTest, WritesHistogramsWithCumulativeBucketsSumAndCount) {
  HistogramSnapshot h;
  h.upper_bounds = {0.001, 0.5};
  h.bucket_counts = {2, 0, 1};
  h.count = 3;
  h.sum = 7.25;
  PrometheusText out;
  out.Histogram("x_delay_seconds", "A delay.", h);
  EXPECT_EQ(out.Take(),
            "# HELP x_delay_seconds A delay.\n"
            "# TYPE x_delay_seconds histogram\n"
            "x_delay_seconds_bucket{le=\"0.001\"} 2\n"
            "x_delay_seconds_bucket{le=\"0.5\"} 2\n"
            "x_delay_seconds_bucket{le=\"+Inf\"} 3\n"
            "x_delay_seconds_sum 7.25\n"
            "x_delay_seconds_count 3\n");
}

TEST(PrometheusTextTest, EscapesHelpAndLabelValues) {
  EXPECT_EQ(EscapePrometheusHelp("a\\b\nc\"d"), "a\\\\b\\nc\"d");
  EXPECT_EQ(EscapePrometheusLabelValue("a\\b\nc\"d"), "a\\\\b\\nc\\\"d");
  PrometheusText out;
  out.Family("x_info", MetricType::kGauge, "Two\nlines");
  out.Sample({{"path", "C:\\dir \"q\""}}, 1.0);
  EXPECT_EQ(out.Take(),
            "# HELP x_info Two\\nlines\n"
            "# TYPE x_info gauge\n"
            "x_info{path=\"C:\\\\dir \\\"q\\\"\"} 1\n");
}

TEST(PrometheusTextTest, FormatsValuesAsTheShortestExactDecimal) {
  EXPECT_EQ(FormatPrometheusValue(0), "0");
  EXPECT_EQ(FormatPrometheusValue(100), "100");
  EXPECT_EQ(FormatPrometheusValue(1500), "1500");
  EXPECT_EQ(FormatPrometheusValue(1e-5), "1e-05");
  EXPECT_EQ(FormatPrometheusValue(0.1), "0.1");
  EXPECT_EQ(FormatPrometheusValue(2.5e-5), "2.5e-05");
  EXPECT_EQ(FormatPrometheusValue(-3.75), "-3.75");
  EXPECT_EQ(FormatPrometheusValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FormatPrometheusValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatPrometheusValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatPrometheusValue(std::nan("")), "NaN");
}

TEST(PrometheusTextTest, ChecksNames) {
  EXPECT_TRUE(IsPrometheusMetricName("dreplay_server_inserted_total"));
  EXPECT_TRUE(IsPrometheusMetricName("job:rate5m"));
  EXPECT_FALSE(IsPrometheusMetricName(""));
  EXPECT_FALSE(IsPrometheusMetricName("9lives"));
  EXPECT_FALSE(IsPrometheusMetricName("has-dash"));
  EXPECT_TRUE(IsPrometheusLabelName("cause"));
  EXPECT_FALSE(IsPrometheusLabelName("__reserved"));
  EXPECT_FALSE(IsPrometheusLabelName("a:b"));
}

TEST(PrometheusTextDeathTest, RefusesABadNameAFamilyTwiceAndASampleWithoutFamily) {
  EXPECT_DEATH(PrometheusText().Counter("bad name", "h", 1), "bad metric name");
  EXPECT_DEATH(
      {
        PrometheusText out;
        out.Counter("x_total", "h", 1);
        out.Counter("x_total", "h", 2);
      },
      "twice");
  EXPECT_DEATH(PrometheusText().Sample({}, 1.0), "before any metric family");
}

TEST(PrometheusTextTest, TakeEmptiesTheWriter) {
  PrometheusText out;
  out.Counter("x_total", "h", 1);
  EXPECT_FALSE(out.Take().empty());
  EXPECT_EQ(out.Take(), "");
  out.Counter("x_total", "h", 2);  // a new rendering may reuse the names
  EXPECT_NE(out.Take().find("x_total 2"), std::string::npos);
}

}  // namespace
}  // namespace dreplay
