// Copyright dreplay authors.

#include "actor_client/latency_histogram.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace dreplay::actor {
namespace {

int BucketOf(int64_t ns) {
  if (ns <= 1) return 0;
  const int b = 63 - __builtin_clzll(static_cast<uint64_t>(ns));
  return std::min(b, LatencyHistogram::kBuckets - 1);
}

}  // namespace

void LatencyHistogram::Record(absl::Duration latency) {
  const int64_t ns = std::max<int64_t>(0, absl::ToInt64Nanoseconds(latency));
  ++buckets_[BucketOf(ns)];
  ++count_;
  sum_ns_ += static_cast<double>(ns);
  max_ns_ = std::max(max_ns_, ns);
}

absl::Duration LatencyHistogram::mean() const {
  return count_ == 0 ? absl::ZeroDuration()
                     : absl::Nanoseconds(sum_ns_ / static_cast<double>(count_));
}

absl::Duration LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return absl::ZeroDuration();
  q = std::clamp(q, 0.0, 1.0);
  const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[b];
    if (seen >= std::max<uint64_t>(rank, 1)) {
      // The geometric middle of [2^b, 2^(b+1)), capped by the maximum seen.
      const double middle = std::ldexp(std::sqrt(2.0), b);
      return std::min(absl::Nanoseconds(middle), max());
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

}  // namespace dreplay::actor
