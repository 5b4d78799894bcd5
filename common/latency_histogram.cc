// Copyright dreplay authors.

#include "common/latency_histogram.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace dreplay {
namespace {

constexpr int kSub = 1 << LatencyHistogram::kSubBits;
constexpr uint64_t kLargest = (uint64_t{1} << LatencyHistogram::kMaxBits) - 1;

int BucketOf(uint64_t ns) {
  ns = std::min(ns, kLargest);
  if (ns < kSub) return static_cast<int>(ns);
  const int msb = 63 - __builtin_clzll(ns);
  const int shift = msb - LatencyHistogram::kSubBits;
  return (shift + 1) * kSub + static_cast<int>((ns >> shift) & (kSub - 1));
}

// The lowest latency of bucket b, in ns (b == kBuckets: the end of the last).
double LowerBound(int b) {
  if (b < kSub) return b;
  return std::ldexp(static_cast<double>(kSub + b % kSub), b / kSub - 1);
}

}  // namespace

void LatencyHistogram::Record(absl::Duration latency) {
  const int64_t ns = std::max<int64_t>(0, absl::ToInt64Nanoseconds(latency));
  ++buckets_[BucketOf(static_cast<uint64_t>(ns))];
  ++count_;
  sum_ns_ += static_cast<double>(ns);
  min_ns_ = std::min(min_ns_, ns);
  max_ns_ = std::max(max_ns_, ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int b = 0; b < kBuckets; ++b) buckets_[b] += other.buckets_[b];
  count_ += other.count_;
  sum_ns_ += other.sum_ns_;
  min_ns_ = std::min(min_ns_, other.min_ns_);
  max_ns_ = std::max(max_ns_, other.max_ns_);
}

absl::Duration LatencyHistogram::mean() const {
  return count_ == 0 ? absl::ZeroDuration()
                     : absl::Nanoseconds(sum_ns_ / static_cast<double>(count_));
}

absl::Duration LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return absl::ZeroDuration();
  q = std::clamp(q, 0.0, 1.0);
  const uint64_t rank =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[b];
    if (seen >= rank) {
      const absl::Duration middle = absl::Nanoseconds((LowerBound(b) + LowerBound(b + 1)) / 2);
      return std::clamp(middle, min(), max());
    }
  }
  return max();
}

std::string LatencyHistogram::Summary() const {
  return absl::StrCat("n=", count_, " mean=", absl::FormatDuration(mean()),
                      " p50=", absl::FormatDuration(Percentile(0.5)),
                      " p99=", absl::FormatDuration(Percentile(0.99)),
                      " max=", absl::FormatDuration(max()));
}

}  // namespace dreplay
