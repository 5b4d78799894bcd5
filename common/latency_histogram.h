// Copyright dreplay authors.
//
// latency_histogram.h: a fixed-size latency histogram with log-linear
// buckets: exact count, mean, min and max, and percentiles to within 1 %.
//
//   LatencyHistogram h;
//   h.Record(absl::Microseconds(35));
//   absl::Duration p99 = h.Percentile(0.99);
//
// Every power of two of nanoseconds is split into 2^kSubBits equal buckets
// (latencies below 2^kSubBits ns get one bucket each), so a bucket spans at
// most 1/64 of its lower bound, and a percentile, reported as the middle of
// its bucket, is off by at most half of that. Latencies of 2^kMaxBits ns
// (about 18 minutes) and more share the last bucket.
//
// Used by the actors' experience writer (the latency of each insert) and by
// the benchmarks in tools/, which merge one histogram per thread.
//
// No allocation (about 18 kB inline); not thread-safe.

#ifndef DREPLAY_COMMON_LATENCY_HISTOGRAM_H_
#define DREPLAY_COMMON_LATENCY_HISTOGRAM_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace dreplay {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;
  static constexpr int kMaxBits = 40;
  static constexpr int kBuckets = (kMaxBits - kSubBits + 1) << kSubBits;

  // Negative latencies count as zero.
  void Record(absl::Duration latency);
  // Adds every sample of `other`.
  void Merge(const LatencyHistogram& other);
  void Clear() { *this = LatencyHistogram(); }

  uint64_t count() const { return count_; }
  // Zero when empty (also min and max).
  absl::Duration mean() const;
  absl::Duration min() const { return absl::Nanoseconds(count_ == 0 ? 0 : min_ns_); }
  absl::Duration max() const { return absl::Nanoseconds(max_ns_); }
  // The latency below which a fraction `q` (clamped to [0, 1]) of the
  // samples lie, by the nearest-rank method: the middle of the bucket of the
  // ceil(q * count)-th smallest sample (at least the first), kept within
  // [min(), max()]. Zero when empty.
  absl::Duration Percentile(double q) const;
  // "n=... mean=... p50=... p99=... max=..." for logs.
  std::string Summary() const;

 private:
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  double sum_ns_ = 0;
  int64_t min_ns_ = INT64_MAX;
  int64_t max_ns_ = 0;
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_LATENCY_HISTOGRAM_H_
