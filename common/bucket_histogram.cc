// Copyright dreplay authors.

#include "common/bucket_histogram.h"

#include <algorithm>
#include <cmath>

#include "glog/logging.h"

namespace dreplay {

uint64_t HistogramSnapshot::CumulativeCount(size_t i) const {
  uint64_t total = 0;
  for (size_t b = 0; b <= i && b < bucket_counts.size(); ++b) total += bucket_counts[b];
  return total;
}

BucketHistogram::BucketHistogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  CHECK(!bounds_.empty()) << "a histogram needs at least one bucket bound";
  for (size_t i = 0; i < bounds_.size(); ++i) {
    CHECK(std::isfinite(bounds_[i])) << "bucket bound " << i << " is not finite";
    CHECK(i == 0 || bounds_[i - 1] < bounds_[i]) << "bucket bounds must ascend (bound " << i << ")";
  }
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void BucketHistogram::Record(double value, uint64_t count) {
  if (std::isnan(value) || count == 0) return;
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  // One writer: a load and a store, no read-modify-write.
  std::atomic<uint64_t>& bucket = buckets_[i];
  bucket.store(bucket.load(std::memory_order_relaxed) + count, std::memory_order_relaxed);
  sum_.store(sum_.load(std::memory_order_relaxed) + value * static_cast<double>(count),
             std::memory_order_relaxed);
}

HistogramSnapshot BucketHistogram::Snapshot() const {
  HistogramSnapshot s;
  s.upper_bounds = bounds_;
  s.bucket_counts.resize(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    s.bucket_counts[i] = buckets_[i].load(std::memory_order_relaxed);
    s.count += s.bucket_counts[i];
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> BucketHistogram::DelayBoundsSeconds() {
  // Literals, so that the bounds print exactly ("0.0001", not a product's
  // rounding error).
  return {1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
          2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1,    2.5,  5,      10};
}

}  // namespace dreplay
