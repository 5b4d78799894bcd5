// Copyright dreplay authors.

#include "verbs/send_queue_accounting.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace dreplay::verbs {

SendQueueAccounting::SendQueueAccounting(int capacity, int signal_every)
    : capacity_(capacity), signal_every_(signal_every), wire_signaled_(std::max(capacity, 1)) {
  CHECK_GE(signal_every, 1) << "signal_every";
  CHECK_LE(signal_every, capacity) << "a forced signal must fall within one send queue";
}

uint64_t SendQueueAccounting::uncovered() const {
  return posted_ - std::max(retired_, covered_end_);
}

absl::Status SendQueueAccounting::CheckRoom(size_t n) const {
  if (outstanding() + n <= static_cast<uint64_t>(capacity_)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "send queue full: ", outstanding(), " outstanding + ", n, " new > max_send_wr ", capacity_));
}

bool SendQueueAccounting::PlanNext(bool user_signaled, bool last) {
  if (planned_ == 0) plan_covered_end_ = covered_end_;
  const uint64_t seq = posted_ + planned_;
  CHECK_LT(seq - retired_, static_cast<uint64_t>(capacity_)) << "planned past the free room";
  // Unsignalled requests since the last signalled one, this one included.
  const uint64_t run = seq + 1 - plan_covered_end_;
  const bool signaled = user_signaled || last || run >= static_cast<uint64_t>(signal_every_);
  wire_signaled_[seq % capacity_] = signaled ? 1 : 0;
  if (signaled) plan_covered_end_ = seq + 1;
  ++planned_;
  return signaled;
}

void SendQueueAccounting::EndPost(size_t taken) {
  CHECK_LE(taken, planned_) << "the device took more requests than were planned";
  const uint64_t first = posted_;
  posted_ += taken;
  if (taken == planned_) {
    covered_end_ = std::max(covered_end_, plan_covered_end_);
  } else {
    for (uint64_t seq = posted_; seq > first; --seq) {
      if (wire_signaled_[(seq - 1) % capacity_] != 0) {
        covered_end_ = seq;
        break;
      }
    }
  }
  planned_ = 0;
}

bool SendQueueAccounting::IsSignaled(uint64_t seq) const {
  CHECK(seq >= retired_ && seq < posted_) << "request " << seq << " is not outstanding";
  return wire_signaled_[seq % capacity_] != 0;
}

bool SendQueueAccounting::Retire(uint64_t seq) {
  if (seq < retired_ || seq >= posted_) return false;
  retired_ = seq + 1;
  return true;
}

}  // namespace dreplay::verbs
