// Copyright dreplay authors.

#include "common/bucket_histogram.h"

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay {
namespace {

TEST(BucketHistogramTest, CountsEachValueInTheFirstBucketWhoseBoundHoldsIt) {
  BucketHistogram h({1, 2, 5});
  h.Record(0.5);
  h.Record(1);  // "le": a value equal to a bound is in that bound's bucket
  h.Record(1.5);
  h.Record(5);
  h.Record(7);
  h.Record(-3);
  const HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.upper_bounds, (std::vector<double>{1, 2, 5}));
  EXPECT_EQ(s.bucket_counts, (std::vector<uint64_t>{3, 1, 1, 1}));
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.sum, 0.5 + 1 + 1.5 + 5 + 7 - 3);
}

TEST(BucketHistogramTest, ACountedRecordIsThatManySamples) {
  BucketHistogram h({1, 2});
  h.Record(1.5, 4);
  h.Record(0.5, 0);  // nothing
  h.Record(3, 1);
  const HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.bucket_counts, (std::vector<uint64_t>{0, 4, 1}));
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.sum, 1.5 * 4 + 3);
}

TEST(BucketHistogramTest, CumulativeCountsAddTheBucketsUpToTheBound) {
  BucketHistogram h({1, 2});
  for (double v : {0.1, 0.2, 1.5, 9.0}) h.Record(v);
  const HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.CumulativeCount(0), 2u);
  EXPECT_EQ(s.CumulativeCount(1), 3u);
  EXPECT_EQ(s.CumulativeCount(2), 4u);
  EXPECT_EQ(s.CumulativeCount(2), s.count);
}

TEST(BucketHistogramTest, IgnoresNaN) {
  BucketHistogram h({1});
  h.Record(std::nan(""));
  EXPECT_EQ(h.Snapshot().count, 0u);
  EXPECT_EQ(h.Snapshot().sum, 0);
}

TEST(BucketHistogramTest, DelayBoundsAscendFromTenMicrosecondsToTenSeconds) {
  const std::vector<double> b = BucketHistogram::DelayBoundsSeconds();
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front(), 1e-5);
  EXPECT_EQ(b.back(), 10);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
}

TEST(BucketHistogramDeathTest, RefusesBoundsThatDoNotAscend) {
  EXPECT_DEATH({ BucketHistogram h(std::vector<double>{2, 1}); }, "ascend");
  EXPECT_DEATH({ BucketHistogram h(std::vector<double>{}); }, "at least one");
}

TEST(BucketHistogramTest, SnapshotsWhileOneThreadRecordsAgreeWithTheirBuckets) {
  BucketHistogram h(BucketHistogram::DelayBoundsSeconds());
  constexpr int kSamples = 200000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < kSamples; ++i) h.Record((i % 1000) * 1e-4);
    done.store(true, std::memory_order_release);
  });
  uint64_t last = 0;
  while (!done.load(std::memory_order_acquire)) {
    const HistogramSnapshot s = h.Snapshot();
    EXPECT_GE(s.count, last);  // counts never go back
    EXPECT_EQ(s.CumulativeCount(s.upper_bounds.size()), s.count);
    last = s.count;
  }
  writer.join();
  EXPECT_EQ(h.Snapshot().count, static_cast<uint64_t>(kSamples));
}

}  // namespace
}  // namespace dreplay
