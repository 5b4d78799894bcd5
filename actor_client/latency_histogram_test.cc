// Copyright dreplay authors.

#include "actor_client/latency_histogram.h"

#include "gtest/gtest.h"

namespace dreplay::actor {
namespace {

TEST(LatencyHistogramTest, EmptyHistogramReportsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.mean(), absl::ZeroDuration());
  EXPECT_EQ(h.Percentile(0.99), absl::ZeroDuration());
}

TEST(LatencyHistogramTest, PercentilesAreWithinAFactorOfTwo) {
  LatencyHistogram h;
  for (int i = 0; i < 99; ++i) h.Record(absl::Microseconds(10));
  h.Record(absl::Milliseconds(5));
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.max(), absl::Milliseconds(5));
  const absl::Duration p50 = h.Percentile(0.5);
  EXPECT_GE(p50, absl::Microseconds(5));
  EXPECT_LE(p50, absl::Microseconds(20));
  const absl::Duration p999 = h.Percentile(0.999);
  EXPECT_GE(p999, absl::Microseconds(2500));
  EXPECT_LE(p999, absl::Milliseconds(5));
  EXPECT_NEAR(absl::ToDoubleMicroseconds(h.mean()), (99 * 10 + 5000) / 100.0, 0.01);
  EXPECT_NE(h.Summary().find("n=100"), std::string::npos);
}

TEST(LatencyHistogramTest, ClearForgetsEverything) {
  LatencyHistogram h;
  h.Record(absl::Seconds(1));
  h.Clear();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.max(), absl::ZeroDuration());
}

}  // namespace
}  // namespace dreplay::actor
