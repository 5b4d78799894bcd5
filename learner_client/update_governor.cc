// Copyright dreplay authors.

#include "learner_client/update_governor.h"

#include <algorithm>

#include "glog/logging.h"

namespace dreplay::learner {

UpdateGovernor::UpdateGovernor(double rate, absl::Time start, double burst)
    : rate_(rate),
      interval_(rate > 0 ? absl::Seconds(1.0 / rate) : absl::ZeroDuration()),
      burst_(rate > 0 ? absl::Seconds(burst / rate) : absl::ZeroDuration()),
      next_(start) {
  CHECK(rate >= 0 && rate < 1e12) << "rate " << rate;
  CHECK_GE(burst, 1.0);
}

absl::Duration UpdateGovernor::Delay(absl::Time now) const {
  if (rate_ == 0 || now >= next_) return absl::ZeroDuration();
  return next_ - now;
}

void UpdateGovernor::Updated(absl::Time now) {
  if (rate_ == 0) return;
  // Behind by more than the burst: what was missed is forgone.
  next_ = std::max(next_, now - burst_ + interval_) + interval_;
}

}  // namespace dreplay::learner
