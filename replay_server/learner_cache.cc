// Copyright dreplay authors.

#include "replay_server/learner_cache.h"

#include <algorithm>

namespace dreplay::server {

void LearnerHoldings::Clear() { std::fill(held_.begin(), held_.end(), 0); }

uint64_t LearnerHoldings::CountHeld() const {
  return static_cast<uint64_t>(
      std::count_if(held_.begin(), held_.end(), [](uint64_t w) { return w != 0; }));
}

uint64_t LearnerEvents::Post(bool learner_cache) {
  uint64_t old = posted_.load(std::memory_order_relaxed);
  uint64_t word;
  do {
    word = (((old >> 1) + 1) << 1) | (learner_cache ? 1 : 0);
  } while (!posted_.compare_exchange_weak(old, word, std::memory_order_acq_rel,
                                          std::memory_order_relaxed));
  return word >> 1;
}

bool LearnerEvents::Take(Event* event) {
  const uint64_t word = posted_.load(std::memory_order_acquire);
  if ((word >> 1) == taken_) return false;
  taken_ = word >> 1;
  event->generation = taken_;
  event->learner_cache = (word & 1) != 0;
  return true;
}

void LearnerEvents::Ack(uint64_t generation) {
  acked_.store(generation, std::memory_order_release);
}

bool LearnerEvents::WaitAcked(uint64_t generation, absl::Duration timeout) const {
  constexpr absl::Duration kPollInterval = absl::Microseconds(100);
  const absl::Time deadline = absl::Now() + timeout;
  while (acked_.load(std::memory_order_acquire) < generation) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(kPollInterval);
  }
  return true;
}

}  // namespace dreplay::server
