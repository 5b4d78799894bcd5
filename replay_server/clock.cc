// Copyright dreplay authors.

#include "replay_server/clock.h"

#include <chrono>
#include <thread>

namespace dreplay::server {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() override {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count();
    return absl::UnixEpoch() + absl::Nanoseconds(ns);
  }
  absl::Time WallNow() override { return absl::Now(); }
  void SleepFor(absl::Duration d) override {
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(d));
  }
};

}  // namespace

Clock* Clock::Real() {
  static RealClock* const clock = new RealClock();
  return clock;
}

absl::Time FakeClock::Now() {
  MutexLock lock(&mu_);
  return now_;
}

void FakeClock::Advance(absl::Duration d) {
  MutexLock lock(&mu_);
  now_ += d;
}

}  // namespace dreplay::server
