// Copyright dreplay authors.

#include "verbs/soft/nic.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

void Nic::Wake() {
  const uint64_t one = 1;
  // A full counter (EAGAIN) already means "wake up"; nothing else can fail.
  ssize_t ignored = write(wake_fd_.get(), &one, sizeof(one));
  (void)ignored;
}

bool Nic::OnNicThread() { return tls_on_nic_thread; }

void Nic::Loop() {
  tls_on_nic_thread = true;
  UsePreciseTimers();
  std::vector<std::shared_ptr<Channel>> active;
  absl::flat_hash_map<uint64_t, Channel*> by_id;
  uint64_t seen_generation = std::numeric_limits<uint64_t>::max();
  epoll_event events[kMaxEvents];

  while (!stop_.load(std::memory_order_acquire)) {
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    if (generation != seen_generation) {
      MutexLock lock(&mu_);
      seen_generation = generation_.load(std::memory_order_acquire);
      active.clear();
      by_id.clear();
      for (const auto& [id, channel] : channels_) {
        active.push_back(channel);
        by_id.emplace(id, channel.get());
      }
    }

    // Send the held frames that are due; find when to look again. Until
    // then the thread sleeps; from then on it spins (still serving sockets).
    int64_t now = MonotonicNowNs();
    int64_t next_wake = std::numeric_limits<int64_t>::max();
    for (const auto& channel : active) {
      Channel::Timer timer = channel->timer();
      if (timer.due_ns != 0 && timer.due_ns <= now + kSendAheadNs) {
        channel->OnTimer();
        timer = channel->timer();
      }
      if (timer.due_ns != 0) next_wake = std::min(next_wake, timer.wake_ns);
    }

    timespec timeout = {};
    timespec* timeout_ptr = nullptr;  // block until an event
    if (next_wake != std::numeric_limits<int64_t>::max()) {
      now = MonotonicNowNs();
      const int64_t sleep_ns = std::max<int64_t>(0, next_wake - now);
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
      auto it = by_id.find(id);
      if (it != by_id.end()) it->second->OnEvents(events[i].events);
    }
  }
}

}  // namespace dreplay::verbs::soft
