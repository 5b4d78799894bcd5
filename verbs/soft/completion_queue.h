// Copyright dreplay authors.
//
// completion_queue.h: the completions of one soft queue pair.
//
// The NIC thread pushes (with its channel's lock held), the application
// polls. The queue has its own lock, taken after the channel's, so that
// Poll() never waits for the NIC thread's batch of input; its size is
// readable without a lock, so that an idle Poll() takes none.
//
// Thread-safe.

#ifndef DREPLAY_VERBS_SOFT_COMPLETION_QUEUE_H_
#define DREPLAY_VERBS_SOFT_COMPLETION_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <vector>

#include "absl/types/span.h"
#include "common/mutex.h"
#include "verbs/soft/ring.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::soft {

class CompletionQueue {
 public:
  void Push(Completion c);
  // Appends every completion of `batch`, oldest first, under one lock, and
  // empties it: an acknowledgement that covers many requests completes
  // them with one hand-over to the poller.
  void PushAll(std::vector<Completion>* batch);
  // Moves up to out.size() completions into `out`, oldest first; returns
  // how many. Non-blocking.
  int Poll(absl::Span<Completion> out);
  // Drops every completion.
  void Clear();
  // How many completions are waiting; no lock taken.
  size_t ready() const { return size_.load(std::memory_order_acquire); }
  // How many were ever pushed, and polled or cleared: the position of a
  // completion in the queue's history (the same-host path orders its own
  // completions by it, shared_path.h). No lock taken.
  uint64_t pushed() const { return pushed_.load(std::memory_order_acquire); }
  uint64_t popped() const { return popped_.load(std::memory_order_acquire); }

 private:
  Mutex mu_;
  Ring<Completion> ring_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> size_{0};
  std::atomic<uint64_t> pushed_{0};
  std::atomic<uint64_t> popped_{0};
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_COMPLETION_QUEUE_H_
