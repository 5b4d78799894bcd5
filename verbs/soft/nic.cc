// Copyright dreplay authors.

#include "verbs/soft/nic.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verbs/soft/link.h"

namespace dreplay::verbs::soft {
namespace {

// The epoll id of the wake-up eventfd; channel ids start at 1.
constexpr uint64_t kWakeId = 0;
constexpr int kMaxEvents = 64;

thread_local bool tls_on_nic_thread = false;

}  // namespace

absl::StatusOr<std::unique_ptr<Nic>> Nic::Start(const std::string& name) {
  Fd epoll_fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd.valid()) {
    return absl::InternalError(absl::StrCat("epoll_create1: ", strerror(errno)));
  }
  Fd wake_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd.valid()) {
    return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  }
  epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  if (epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, wake_fd.get(), &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", strerror(errno)));
  }
  std::unique_ptr<Nic> nic(new Nic(name, std::move(epoll_fd), std::move(wake_fd)));
  nic->thread_ = std::thread([n = nic.get()] { n->Loop(); });
  // Visible in top and perf; a name longer than 15 bytes is refused, which
  // is harmless.
  pthread_setname_np(nic->thread_.native_handle(), "soft-nic");
  return nic;
}

Nic::Nic(const std::string& name, Fd epoll_fd, Fd wake_fd)
    : name_(name), epoll_fd_(std::move(epoll_fd)), wake_fd_(std::move(wake_fd)) {}

Nic::~Nic() { Stop(); }

void Nic::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stop_.store(true, std::memory_order_release);
  Wake();
  if (thread_.joinable()) thread_.join();
  std::vector<std::shared_ptr<Channel>> attached;
  {
    MutexLock lock(&mu_);
    for (auto& [id, channel] : channels_) attached.push_back(channel);
    channels_.clear();
    generation_.fetch_add(1, std::memory_order_release);
  }
  for (auto& channel : attached) channel->OnNicStopped();
}

absl::StatusOr<uint64_t> Nic::Add(std::shared_ptr<Channel> channel) {
  uint64_t id = 0;
  {
    MutexLock lock(&mu_);
    if (stopped_) {
      return absl::FailedPreconditionError(absl::StrCat(name_, ": the provider is shutting down"));
    }
    id = next_id_++;
    channels_.emplace(id, channel);
    generation_.fetch_add(1, std::memory_order_release);
  }
  channel->Attach(this, id);
  return id;
}

void Nic::Remove(uint64_t id) {
  MutexLock lock(&mu_);
  if (channels_.erase(id) > 0) {
    generation_.fetch_add(1, std::memory_order_release);
  }
}

std::vector<std::shared_ptr<Channel>> Nic::Channels() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Channel>> result;
  result.reserve(channels_.size());
  for (const auto& [id, channel] : channels_) result.push_back(channel);
  return result;
}

void Nic::SetInterest(int fd, uint64_t id, uint32_t old_events, uint32_t new_events) {
  epoll_event ev = {};
  ev.events = new_events;
  ev.data.u64 = id;
  const int op = old_events == 0 ? EPOLL_CTL_ADD : new_events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
  if (epoll_ctl(epoll_fd_.get(), op, fd, &ev) != 0) {
    LOG(ERROR) << name_ << ": epoll_ctl(" << op << ", fd " << fd << "): " << strerror(errno);
  }
}

void Nic::TimerMoved(uint64_t id) {
  if (OnNicThread()) return;  // it looks at the channels it serves anyway
  {
    MutexLock lock(&moved_mu_);
    moved_.push_back(id);
  }
  any_moved_.store(true, std::memory_order_release);
  Wake();
}

void Nic::Wake() {
  const uint64_t one = 1;
  // A full counter (EAGAIN) already means "wake up"; nothing else can fail.
  ssize_t ignored = write(wake_fd_.get(), &one, sizeof(one));
  (void)ignored;
}

bool Nic::OnNicThread() { return tls_on_nic_thread; }

struct Nic::LoopState {
  std::vector<std::shared_ptr<Channel>> active;
  absl::flat_hash_map<uint64_t, Channel*> by_id;
  uint64_t seen_generation = std::numeric_limits<uint64_t>::max();
  // Min-heap of timers; an entry is stale unless `scheduled` holds its
  // wake_ns for its id.
  std::vector<TimerEntry> heap;
  absl::flat_hash_map<uint64_t, int64_t> scheduled;
  std::vector<uint64_t> moved;       // scratch
  std::vector<TimerEntry> spinning;  // scratch
};

void Nic::RefreshChannels(LoopState* state) {
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  if (generation == state->seen_generation) return;
  {
    MutexLock lock(&mu_);
    state->seen_generation = generation_.load(std::memory_order_acquire);
    state->active.clear();
    state->by_id.clear();
    for (const auto& [id, channel] : channels_) {
      state->active.push_back(channel);
      state->by_id.emplace(id, channel.get());
    }
  }
  state->heap.clear();
  state->scheduled.clear();
  for (const auto& [id, channel] : state->by_id) Schedule(state, id, channel);
}

void Nic::Schedule(LoopState* state, uint64_t id, Channel* channel) {
  const Channel::Timer timer = channel->timer();
  if (timer.due_ns == 0) return;
  auto [it, inserted] = state->scheduled.try_emplace(id, timer.wake_ns);
  if (!inserted) {
    if (it->second <= timer.wake_ns) return;  // an earlier entry will look
    it->second = timer.wake_ns;
  }
  state->heap.push_back(TimerEntry{timer.wake_ns, id});
  std::push_heap(state->heap.begin(), state->heap.end(), std::greater<TimerEntry>());
}

int64_t Nic::RunTimers(LoopState* state) {
  if (any_moved_.exchange(false, std::memory_order_acq_rel)) {
    {
      MutexLock lock(&moved_mu_);
      state->moved.swap(moved_);
    }
    for (const uint64_t id : state->moved) {
      auto it = state->by_id.find(id);
      if (it != state->by_id.end()) Schedule(state, id, it->second);
    }
    state->moved.clear();
  }
  auto& heap = state->heap;
  auto pop = [&heap] {
    std::pop_heap(heap.begin(), heap.end(), std::greater<TimerEntry>());
    heap.pop_back();
  };
  // Entries whose wake time passed but whose frame is not due yet (the
  // thread spins for them); set aside so that the entries behind them,
  // whose frames may be due earlier, are looked at too.
  std::vector<TimerEntry>& spinning = state->spinning;
  int64_t next_wake = std::numeric_limits<int64_t>::max();
  while (!heap.empty()) {
    const TimerEntry top = heap.front();
    auto sched = state->scheduled.find(top.id);
    auto channel = state->by_id.find(top.id);
    if (sched == state->scheduled.end() || sched->second != top.wake_ns ||
        channel == state->by_id.end()) {
      pop();  // stale
      continue;
    }
    const int64_t now = MonotonicNowNs();
    if (top.wake_ns > now) {
      next_wake = top.wake_ns;  // and every other entry wakes later
      break;
    }
    pop();
    const Channel::Timer timer = channel->second->timer();
    if (timer.due_ns != 0 && timer.due_ns > now + kSendAheadNs && timer.wake_ns == top.wake_ns) {
      spinning.push_back(top);  // stands: looked at again next loop
      continue;
    }
    if (timer.due_ns != 0 && timer.due_ns <= now + kSendAheadNs) channel->second->OnTimer();
    state->scheduled.erase(sched);
    Schedule(state, top.id, channel->second);
  }
  for (const TimerEntry& e : spinning) {
    heap.push_back(e);
    std::push_heap(heap.begin(), heap.end(), std::greater<TimerEntry>());
    next_wake = std::min(next_wake, e.wake_ns);
  }
  spinning.clear();
  return next_wake;
}

void Nic::Loop() {
  tls_on_nic_thread = true;
  UsePreciseTimers();
  LoopState state;
  epoll_event events[kMaxEvents];

  while (!stop_.load(std::memory_order_acquire)) {
    RefreshChannels(&state);
    // Send the held frames that are due; find when to look again. Until
    // then the thread sleeps; from then on it spins (still serving sockets).
    const int64_t next_wake = RunTimers(&state);

    timespec timeout = {};
    timespec* timeout_ptr = nullptr;  // block until an event
    if (next_wake != std::numeric_limits<int64_t>::max()) {
      const int64_t sleep_ns = std::max<int64_t>(0, next_wake - MonotonicNowNs());
      timeout.tv_sec = sleep_ns / 1000000000;
      timeout.tv_nsec = sleep_ns % 1000000000;
      timeout_ptr = &timeout;
    }
    int n = epoll_pwait2(epoll_fd_.get(), events, kMaxEvents, timeout_ptr, nullptr);
    if (n < 0 && errno == ENOSYS) {
      // Kernels before 5.11: millisecond timeouts, rounded up.
      const int ms = timeout_ptr == nullptr
                         ? -1
                         : static_cast<int>(
                               (timeout.tv_sec * 1000000000 + timeout.tv_nsec + 999999) / 1000000);
      n = epoll_wait(epoll_fd_.get(), events, kMaxEvents, ms);
    }
    if (n < 0) {
      if (errno != EINTR) {
        LOG(ERROR) << name_ << ": epoll_pwait2: " << strerror(errno);
      }
      continue;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        uint64_t count;
        ssize_t ignored = read(wake_fd_.get(), &count, sizeof(count));
        (void)ignored;
        continue;
      }
      // An id not (yet) in the copy: removed, or added after the copy was
      // made; level-triggered epoll reports it again after the refresh.
      auto it = state.by_id.find(id);
      if (it == state.by_id.end()) continue;
      it->second->OnEvents(events[i].events);
      Schedule(&state, id, it->second);
    }
  }
}

}  // namespace dreplay::verbs::soft
