// Copyright dreplay authors.
//
// mutex.h: a std::mutex with Clang thread-safety annotations.
//
// dreplay links Debian's prebuilt Abseil, which is not built with
// ThreadSanitizer; absl::Mutex's lock operations would then be invisible to
// TSAN and every guarded access would be reported as a race. This wrapper
// locks a std::mutex (pthreads, which TSAN intercepts) and carries the same
// capability annotations, so `ABSL_GUARDED_BY(mu_)` is still checked by
// `--config=clang` at compile time.
//
//   dreplay::Mutex mu_;
//   int count_ ABSL_GUARDED_BY(mu_);
//   ...
//   dreplay::MutexLock lock(&mu_);
//   ++count_;
//
// For waiting on a condition, use dreplay::CondVar with a MutexLock held.

#ifndef DREPLAY_COMMON_MUTEX_H_
#define DREPLAY_COMMON_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dreplay {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Documents (for the analysis) that the calling thread holds this mutex.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for the lifetime of the object.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable for dreplay::Mutex. Wait* must be called with `mu`
// held; they release it while blocked and hold it again on return.
class CondVar {
 public:
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }

  // Returns true if the wait timed out.
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const auto status = cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout));
    lock.release();
    return status == std::cv_status::timeout;
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_MUTEX_H_
