// Copyright dreplay authors.
//
// nic.h: the soft provider's "NIC": one thread per provider that serves
// the sockets of all its queue pairs with epoll. It reads and executes the
// peers' requests, receives the responses to this side's requests, sends
// what the sockets would not take at once, and sends frames held by the link
// emulator when they are due: it sleeps until shortly before the next one
// (timer slack set to the minimum), then spins, so that 50 us delays are
// kept to a few microseconds. The channels' timers are kept in a heap, so a
// loop costs the same with one channel or a thousand.
//
// The thread never runs application code. Channels are added when a
// connection is set up and removed when their queue pair is destroyed; Stop()
// (or the destructor) joins the thread and fails the channels still attached.
//
// Thread-safe.

#ifndef DREPLAY_VERBS_SOFT_NIC_H_
#define DREPLAY_VERBS_SOFT_NIC_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "verbs/soft/channel.h"
#include "verbs/soft/socket.h"

namespace dreplay::verbs::soft {

// The NIC thread wakes this long before a frame that must leave on time and
// spins until then; a timed sleep on a busy machine often oversleeps by
// 5 to 20 us.
inline constexpr int64_t kTimerLeadNs = 15000;
// A frame this close to its time is sent now.
inline constexpr int64_t kSendAheadNs = 1000;

class Nic {
 public:
  // Starts the thread. kInternal when epoll or eventfd cannot be created.
  static absl::StatusOr<std::unique_ptr<Nic>> Start(const std::string& name);
  ~Nic();
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;

  // Joins the thread; channels still attached move to the error state.
  // Idempotent.
  void Stop();

  // Starts serving `channel`; returns its id for Remove(). kFailedPrecondition
  // after Stop().
  absl::StatusOr<uint64_t> Add(std::shared_ptr<Channel> channel);
  // Stops serving the channel with `id` (its queue pair is going away). The
  // caller then calls Channel::Detach().
  void Remove(uint64_t id);
  // The channels being served.
  std::vector<std::shared_ptr<Channel>> Channels() const;

  // For channels: changes the epoll events of `fd` from `old_events` to
  // `new_events` (0: not registered).
  void SetInterest(int fd, uint64_t id, uint32_t old_events, uint32_t new_events);
  // Makes the thread look at the timer of the channel with `id` again: its
  // first held frame became due earlier. Cheap on the NIC thread itself
  // (which looks at the timers of the channels it served anyway).
  void TimerMoved(uint64_t id);
  // Wakes the thread.
  void Wake();
  // True on a NIC thread (which needs no Wake()).
  static bool OnNicThread();

 private:
  // A channel's timer as the thread last scheduled it.
  struct TimerEntry {
    int64_t wake_ns;
    uint64_t id;
    bool operator>(const TimerEntry& o) const { return wake_ns > o.wake_ns; }
  };
  // The thread's own view of the channels and their timers.
  struct LoopState;

  Nic(const std::string& name, Fd epoll_fd, Fd wake_fd);
  void Loop();
  // Refreshes the thread's copy of the channels when they changed.
  void RefreshChannels(LoopState* state);
  // (Re)schedules the timer of channel `id` from its current value.
  static void Schedule(LoopState* state, uint64_t id, Channel* channel);
  // Sends what is due; returns when the thread should wake next (max:
  // never).
  int64_t RunTimers(LoopState* state);

  const std::string name_;
  const Fd epoll_fd_;
  const Fd wake_fd_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  // Bumped whenever channels_ changes, so the thread refreshes its copy.
  std::atomic<uint64_t> generation_{0};

  mutable Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Channel>> channels_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;

  // Channels whose timers moved earlier, told by other threads.
  Mutex moved_mu_;
  std::vector<uint64_t> moved_ ABSL_GUARDED_BY(moved_mu_);
  std::atomic<bool> any_moved_{false};
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_NIC_H_
