#include "common/mutex.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay {
namespace {

class Counter {
 public:
  void Add() {
    MutexLock lock(&mu_);
    ++count_;
    if (count_ == target_) done_.SignalAll();
  }
  // Waits until `target` increments happened or `timeout` passed.
  bool WaitFor(int target, absl::Duration timeout) {
    MutexLock lock(&mu_);
    target_ = target;
    const absl::Time deadline = absl::Now() + timeout;
    while (count_ < target) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      done_.WaitWithTimeout(&mu_, left);
    }
    return true;
  }
  int count() {
    MutexLock lock(&mu_);
    return count_;
  }

 private:
  Mutex mu_;
  CondVar done_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
  int target_ ABSL_GUARDED_BY(mu_) = -1;
};

TEST(MutexTest, ConcurrentIncrementsAreNotLost) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10000;
  Counter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&counter] {
      for (int i = 0; i < kPerThread; ++i) counter.Add();
    });
  }
  EXPECT_TRUE(counter.WaitFor(kThreads * kPerThread, absl::Seconds(30)));
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter.count(), kThreads * kPerThread);
}

TEST(MutexTest, WaitWithTimeoutReturnsWhenNothingHappens) {
  Counter counter;
  EXPECT_FALSE(counter.WaitFor(1, absl::Milliseconds(20)));
}

}  // namespace
}  // namespace dreplay
