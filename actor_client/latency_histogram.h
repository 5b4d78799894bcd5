// Copyright dreplay authors.
//
// latency_histogram.h: a fixed-size latency histogram with power-of-two
// buckets (relative error of a percentile at most a factor of 2, reported as
// the bucket's geometric middle), exact count, mean and max.
//
//   LatencyHistogram h;
//   h.Record(absl::Microseconds(35));
//   absl::Duration p99 = h.Percentile(0.99);
//
// No allocation; not thread-safe.

#ifndef DREPLAY_ACTOR_CLIENT_LATENCY_HISTOGRAM_H_
#define DREPLAY_ACTOR_CLIENT_LATENCY_HISTOGRAM_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace dreplay::actor {

class LatencyHistogram {
 public:
  // Bucket b holds latencies in [2^b, 2^(b+1)) ns; bucket 0 also holds 0;
  // the last bucket everything longer (2^40 ns is about 18 minutes).
  static constexpr int kBuckets = 41;

  void Record(absl::Duration latency);
  void Clear() { *this = LatencyHistogram(); }

  uint64_t count() const { return count_; }
  absl::Duration mean() const;
  absl::Duration max() const { return absl::Nanoseconds(max_ns_); }
  // The latency below which a fraction `q` (in [0, 1]) of the samples lie,
  // to within a factor of two; zero when empty.
  absl::Duration Percentile(double q) const;
  // "n=... mean=... p50=... p99=... max=..." for logs.
  std::string Summary() const;

 private:
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  double sum_ns_ = 0;
  int64_t max_ns_ = 0;
};

}  // namespace dreplay::actor

#endif  // DREPLAY_ACTOR_CLIENT_LATENCY_HISTOGRAM_H_
