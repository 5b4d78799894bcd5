// Copyright dreplay authors.
//
// clock.h: the time source of the replay core, injectable for tests.
//
// Clock::Real() reads a monotonic clock (its epoch is arbitrary: compare and
// subtract times, do not print them as dates) for Now(), and the wall clock
// (CLOCK_REALTIME) for WallNow(), which is what other processes stamp their
// data with (SlotHeader::insert_time_ns). FakeClock only moves when told
// to (Advance) or when the code under test sleeps on it (SleepFor advances it
// instead of blocking), so timeouts are tested deterministically.

#ifndef DREPLAY_REPLAY_SERVER_CLOCK_H_
#define DREPLAY_REPLAY_SERVER_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace dreplay::server {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic. Thread-safe.
  virtual absl::Time Now() = 0;
  // The wall clock (may jump), to compare with other processes' time stamps.
  // Thread-safe.
  virtual absl::Time WallNow() = 0;
  // Blocks the caller for about `d` (Real) or advances time by `d` (Fake).
  virtual void SleepFor(absl::Duration d) = 0;

  // The process-wide monotonic clock; never null, never destroyed.
  static Clock* Real();
};

// Thread-safe manual clock, starting at an arbitrary fixed time. Its wall
// clock is the same time (one hour after the Unix epoch at the start).
class FakeClock : public Clock {
 public:
  absl::Time Now() override;
  absl::Time WallNow() override { return Now(); }
  void SleepFor(absl::Duration d) override { Advance(d); }
  void Advance(absl::Duration d);

 private:
  Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch() + absl::Hours(1);
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CLOCK_H_
