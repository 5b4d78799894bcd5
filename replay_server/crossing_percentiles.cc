// Copyright dreplay authors.

#include "replay_server/crossing_percentiles.h"

#include <algorithm>
#include <cmath>

#include "glog/logging.h"

namespace dreplay::server {

CrossingPercentiles::CrossingPercentiles(absl::Duration period, uint32_t max_batch)
    : period_(period), batch_(max_batch), less_(max_batch + 1), equal_(max_batch + 1) {
  CHECK_GE(period, absl::ZeroDuration());
}

void CrossingPercentiles::Add(float key) {
  CHECK_LT(added_, batch_.size());
  if (std::isnan(key)) return;  // no rank key: neither ranked nor counted
  batch_[added_++] = key;
}

void CrossingPercentiles::RankAgainst(float key, double weight) {
  const auto end = batch_.begin() + added_;
  // Sorted batch keys at [i, added_) are above `key`, those at [j, i) equal.
  const auto above = std::upper_bound(batch_.begin(), end, key);
  auto equal = above;
  while (equal != batch_.begin() && *(equal - 1) == key) --equal;
  less_[above - batch_.begin()] += weight;
  equal_[equal - batch_.begin()] += weight;
  equal_[above - batch_.begin()] -= weight;
}

void CrossingPercentiles::Finish(absl::Span<const float> memory_keys, bool keys_left_memory,
                                 absl::Time now) {
  next_ = now + period_;
  if (added_ == 0) return;
  std::sort(batch_.begin(), batch_.begin() + added_);
  std::fill(less_.begin(), less_.end(), 0.0);
  std::fill(equal_.begin(), equal_.end(), 0.0);
  // Every step-th memory key stands for `step` keys: the batch's own keys,
  // read whole, count 1 / step each.
  const uint64_t step = std::max<uint64_t>(1, memory_keys.size() / kMaxRanked);
  offset_ = (offset_ + 1) % step;
  double ranked = 0;
  for (uint64_t i = offset_; i < memory_keys.size(); i += step) {
    const float key = memory_keys[i];
    if (std::isnan(key)) continue;
    RankAgainst(key, 1.0);
    ranked += 1;
  }
  if (keys_left_memory) {
    const double weight = 1.0 / static_cast<double>(step);
    for (uint32_t k = 0; k < added_; ++k) RankAgainst(batch_[k], weight);
    ranked += weight * added_;
  }
  // Nothing ranked: a memory of NaN keys only (restored), read sparsely.
  if (ranked > 0) {
    double less = 0, equal = 0;
    for (uint32_t k = 0; k < added_; ++k) {
      less += less_[k];
      equal += equal_[k];
      sum_ += 100.0 * (less + 0.5 * equal) / ranked;
    }
    count_ += added_;
  }
  added_ = 0;
}

}  // namespace dreplay::server
