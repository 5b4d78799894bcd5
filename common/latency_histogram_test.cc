// Copyright dreplay authors.

#include "common/latency_histogram.h"

#include <string>

#include "gtest/gtest.h"

namespace dreplay {
namespace {

// The histogram's promise: a percentile within 1 % of the true sample.
void ExpectWithinOnePercent(absl::Duration got, absl::Duration want) {
  EXPECT_NEAR(absl::ToDoubleNanoseconds(got), absl::ToDoubleNanoseconds(want),
              absl::ToDoubleNanoseconds(want) * 0.01)
      << absl::FormatDuration(got) << " vs " << absl::FormatDuration(want);
}

TEST(LatencyHistogramTest, EmptyHistogramReportsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.mean(), absl::ZeroDuration());
  EXPECT_EQ(h.min(), absl::ZeroDuration());
  EXPECT_EQ(h.max(), absl::ZeroDuration());
  EXPECT_EQ(h.Percentile(0.99), absl::ZeroDuration());
}

TEST(LatencyHistogramTest, PercentilesAreWithinOnePercentAndMeanIsExact) {
  LatencyHistogram h;
  for (int i = 0; i < 99; ++i) h.Record(absl::Microseconds(10));
  h.Record(absl::Milliseconds(5));
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.min(), absl::Microseconds(10));
  EXPECT_EQ(h.max(), absl::Milliseconds(5));
  ExpectWithinOnePercent(h.Percentile(0.5), absl::Microseconds(10));
  EXPECT_EQ(h.Percentile(0.999), absl::Milliseconds(5)) << "kept within the maximum";
  EXPECT_NEAR(absl::ToDoubleMicroseconds(h.mean()), (99 * 10 + 5000) / 100.0, 0.01);
  EXPECT_NE(h.Summary().find("n=100"), std::string::npos);
}

TEST(LatencyHistogramTest, PercentilesFollowTheNearestRank) {
  LatencyHistogram h;
  for (int us = 1; us <= 1000; ++us) h.Record(absl::Microseconds(us));
  ExpectWithinOnePercent(h.Percentile(0.5), absl::Microseconds(500));
  ExpectWithinOnePercent(h.Percentile(0.99), absl::Microseconds(990));
  ExpectWithinOnePercent(h.Percentile(0.01), absl::Microseconds(10));
  ExpectWithinOnePercent(h.Percentile(0), absl::Microseconds(1));
  EXPECT_EQ(h.Percentile(1), absl::Microseconds(1000));
}

TEST(LatencyHistogramTest, ShortLatenciesAreExact) {
  LatencyHistogram h;
  h.Record(absl::Nanoseconds(3));
  h.Record(absl::Nanoseconds(-5));  // counted as zero
  EXPECT_EQ(h.min(), absl::ZeroDuration());
  EXPECT_EQ(h.max(), absl::Nanoseconds(3));
  EXPECT_LE(h.Percentile(0.5), absl::Nanoseconds(1));
}

TEST(LatencyHistogramTest, LatenciesBeyondTheLastBucketStayWithinMinAndMax) {
  LatencyHistogram h;
  h.Record(absl::Hours(2));
  EXPECT_EQ(h.Percentile(0.5), absl::Hours(2));
}

TEST(LatencyHistogramTest, MergeAddsTheOtherSamples) {
  LatencyHistogram a;
  LatencyHistogram b;
  for (int i = 0; i < 10; ++i) a.Record(absl::Microseconds(100));
  for (int i = 0; i < 30; ++i) b.Record(absl::Microseconds(300));
  a.Merge(b);
  EXPECT_EQ(a.count(), 40u);
  EXPECT_EQ(a.min(), absl::Microseconds(100));
  EXPECT_EQ(a.max(), absl::Microseconds(300));
  EXPECT_EQ(a.mean(), absl::Microseconds(250));
  ExpectWithinOnePercent(a.Percentile(0.25), absl::Microseconds(100));
  ExpectWithinOnePercent(a.Percentile(0.5), absl::Microseconds(300));
  a.Merge(LatencyHistogram());
  EXPECT_EQ(a.min(), absl::Microseconds(100)) << "an empty histogram changes nothing";
}

TEST(LatencyHistogramTest, ClearForgetsEverything) {
  LatencyHistogram h;
  h.Record(absl::Seconds(1));
  h.Clear();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.max(), absl::ZeroDuration());
  EXPECT_EQ(h.min(), absl::ZeroDuration());
}

}  // namespace
}  // namespace dreplay
