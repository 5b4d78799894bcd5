// Copyright dreplay authors.
//
// bucket_histogram.h: a histogram with fixed bucket bounds, written by one
// thread and read by any other: the shape of a Prometheus histogram (a count
// per bucket "value <= bound", a sum and a count).
//
//   BucketHistogram delays(BucketHistogram::DelayBoundsSeconds());
//   delays.Record(0.0003);                      // the owner thread
//   HistogramSnapshot s = delays.Snapshot();    // any thread
//
// Unlike LatencyHistogram (latency_histogram.h: about 2,000 buckets, for
// percentiles within 1 %, one thread), this one has a few buckets chosen by
// the caller and may be read while it is written, so a metrics endpoint can
// expose what a busy thread measures without stopping it.
//
// Thread safety: Record() from one thread at a time (the writer: it does a
// relaxed load and store per word, no read-modify-write, no lock);
// Snapshot() from any thread at any time. A snapshot taken during Record()
// may see the sample in its bucket but not yet in the sum: fine for
// monitoring. Its count is the sum of the buckets it read, so buckets and
// count always agree. Nothing allocates after construction.

#ifndef DREPLAY_COMMON_BUCKET_HISTOGRAM_H_
#define DREPLAY_COMMON_BUCKET_HISTOGRAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace dreplay {

// A copy of a BucketHistogram, or one made by hand for tests.
struct HistogramSnapshot {
  // Ascending, finite upper bounds of the buckets.
  std::vector<double> upper_bounds;
  // Samples per bucket, not cumulative: bucket i holds the values in
  // (upper_bounds[i-1], upper_bounds[i]]; the last one (index
  // upper_bounds.size()) those above every bound.
  std::vector<uint64_t> bucket_counts;
  uint64_t count = 0;  // the sum of bucket_counts
  double sum = 0;      // the sum of the values recorded

  // Samples <= upper_bounds[i] (i == upper_bounds.size(): every sample), as
  // Prometheus' cumulative "le" buckets count them.
  uint64_t CumulativeCount(size_t i) const;
};

class BucketHistogram {
 public:
  // REQUIRES (CHECKed): upper_bounds non-empty, finite and strictly
  // ascending.
  explicit BucketHistogram(std::vector<double> upper_bounds);
  BucketHistogram(const BucketHistogram&) = delete;
  BucketHistogram& operator=(const BucketHistogram&) = delete;

  // Counts `value` in the first bucket whose bound is >= value (or the last
  // bucket). NaN is ignored. One writer thread (see the file comment).
  void Record(double value) { Record(value, 1); }
  // Counts `count` samples of `value` at once (a batch stamped alike).
  void Record(double value, uint64_t count);

  // Thread-safe.
  HistogramSnapshot Snapshot() const;

  const std::vector<double>& upper_bounds() const { return bounds_; }

  // Bounds for delays in seconds, 10 microseconds to 10 seconds in 1-2.5-5
  // steps: a local insert takes microseconds, a long link milliseconds, a
  // stalled learner seconds.
  static std::vector<double> DelayBoundsSeconds();

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1
  std::atomic<double> sum_{0.0};
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_BUCKET_HISTOGRAM_H_
