// Copyright dreplay authors.

#include "verbs/soft/completion_queue.h"

#include <sched.h>

#include <algorithm>
#include <utility>

namespace dreplay::verbs::soft {

void CompletionQueue::Push(Completion c) {
  MutexLock lock(&mu_);
  ring_.push_back(std::move(c));
  pushed_.fetch_add(1, std::memory_order_release);
  size_.store(ring_.size(), std::memory_order_release);
}

void CompletionQueue::PushAll(std::vector<Completion>* batch) {
  if (batch->empty()) return;
  {
    MutexLock lock(&mu_);
    for (Completion& c : *batch) ring_.push_back(std::move(c));
    pushed_.fetch_add(batch->size(), std::memory_order_release);
    size_.store(ring_.size(), std::memory_order_release);
  }
  batch->clear();
}

int CompletionQueue::Poll(absl::Span<Completion> out) {
  if (out.empty()) return 0;
  if (size_.load(std::memory_order_acquire) == 0) {
    // An application that polls in a tight loop leaves the processor to the
    // NIC thread for a moment; on a small machine they share the cores.
    sched_yield();
    return 0;
  }
  MutexLock lock(&mu_);
  const size_t n = std::min(out.size(), ring_.size());
  for (size_t i = 0; i < n; ++i) {
    out[i] = std::move(ring_.front());
    ring_.pop_front();
  }
  popped_.fetch_add(n, std::memory_order_release);
  size_.store(ring_.size(), std::memory_order_release);
  return static_cast<int>(n);
}

void CompletionQueue::Clear() {
  MutexLock lock(&mu_);
  ring_.clear();
  popped_.store(pushed_.load(std::memory_order_relaxed), std::memory_order_release);
  size_.store(0, std::memory_order_release);
}

}  // namespace dreplay::verbs::soft
