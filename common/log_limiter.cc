// Copyright dreplay authors.

#include "common/log_limiter.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace dreplay {

LogLimiter::LogLimiter(uint32_t lines, absl::Duration interval)
    : lines_(lines), interval_(interval) {
  CHECK_GE(lines_, 1u);
  CHECK_GT(interval_, absl::ZeroDuration());
}

bool LogLimiter::Allow(absl::Time now, uint64_t* held_back) {
  if (now - window_start_ >= interval_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= lines_) {
    ++held_back_;
    ++held_back_total_;
    return false;
  }
  ++in_window_;
  *held_back = held_back_;
  held_back_ = 0;
  return true;
}

std::string LogLimiter::HeldBackNote(uint64_t held_back) {
  if (held_back == 0) return "";
  return absl::StrCat(" (", held_back, " similar lines held back)");
}

}  // namespace dreplay
