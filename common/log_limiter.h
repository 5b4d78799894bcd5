// Copyright dreplay authors.
//
// log_limiter.h: at most `lines` log lines per `interval`, and a count of
// those held back, so that a flood of events (refused connections, bad
// transitions) cannot fill the log disk. A full log disk is not harmless:
// it fails the syncs of everything else written there.
//
//   LogLimiter limiter(10, absl::Seconds(10));
//   uint64_t held_back = 0;
//   if (limiter.Allow(absl::Now(), &held_back)) {
//     LOG(WARNING) << "refused " << peer << ": " << reason
//                  << LogLimiter::HeldBackNote(held_back);
//   }
//
// Not thread-safe: one owner (or guard it).

#ifndef DREPLAY_COMMON_LOG_LIMITER_H_
#define DREPLAY_COMMON_LOG_LIMITER_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace dreplay {

class LogLimiter {
 public:
  // REQUIRES: lines >= 1, interval > 0.
  LogLimiter(uint32_t lines, absl::Duration interval);

  // True when a line may be written at `now`: fewer than `lines` were allowed
  // in the window that started at the first line allowed after the last
  // window ended. On true, `*held_back` is the number of calls answered
  // false since the previous true (0 on the first), for the line to say.
  bool Allow(absl::Time now, uint64_t* held_back);

  // Total calls answered false.
  uint64_t held_back_total() const { return held_back_total_; }

  // " (N similar lines held back)" when N > 0, else "".
  static std::string HeldBackNote(uint64_t held_back);

 private:
  const uint32_t lines_;
  const absl::Duration interval_;
  absl::Time window_start_ = absl::InfinitePast();
  uint32_t in_window_ = 0;
  uint64_t held_back_ = 0;
  uint64_t held_back_total_ = 0;
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_LOG_LIMITER_H_
