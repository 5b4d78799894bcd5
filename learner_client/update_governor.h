// Copyright dreplay authors.
//
// update_governor.h: caps the learner's train steps per second, so that
// placements can be compared at equal updates (learner --max_updates_per_s).
//
// Update n may start once the schedule allows it: each update moves the
// schedule on by 1 / rate, and a learner that fell behind (a slow step, a
// wait for data) may catch up by at most `burst` updates at once, so it
// never trains faster than the rate over any window longer than burst /
// rate.
//
//   UpdateGovernor governor(200, start);   // 200 updates/s
//   absl::Duration wait = governor.Delay(absl::Now());
//   if (wait == absl::ZeroDuration()) { Train(); governor.Updated(absl::Now()); }
//
// Thread safety: none; the loop's thread owns it.

#ifndef DREPLAY_LEARNER_CLIENT_UPDATE_GOVERNOR_H_
#define DREPLAY_LEARNER_CLIENT_UPDATE_GOVERNOR_H_

#include "absl/time/time.h"

namespace dreplay::learner {

class UpdateGovernor {
 public:
  // `rate`: updates per second, 0 for no limit (Delay() is always zero);
  // REQUIRES: rate >= 0 and finite, burst >= 1.
  UpdateGovernor(double rate, absl::Time start, double burst = 1);

  // How long to wait at `now` before the next update may start (zero: now).
  absl::Duration Delay(absl::Time now) const;
  // An update started at `now`.
  void Updated(absl::Time now);

  double rate() const { return rate_; }

 private:
  const double rate_;
  const absl::Duration interval_;  // 1 / rate
  const absl::Duration burst_;     // burst / rate
  absl::Time next_;                // when the next update may start
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_UPDATE_GOVERNOR_H_
