// Copyright dreplay authors.

#include "common/stop_signals.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/time/clock.h"
#include "glog/logging.h"

namespace dreplay {
namespace {

// Process-wide: a signal handler reaches nothing else. The pipe wakes
// WaitFor() in kFlagThenDefault mode (write() is async-signal-safe); it is
// made once and never closed, so a late handler never writes to a closed
// descriptor.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
std::atomic<bool> g_active{false};
int g_wake_pipe[2] = {-1, -1};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
static_assert(std::atomic<int>::is_always_lock_free, "set from a signal handler");

void Wake() {
  const char byte = 1;
  // Non-blocking: a full pipe already holds a wake-up.
  [[maybe_unused]] const ssize_t n = write(g_wake_pipe[1], &byte, 1);
}

void OnSignal(int signal_number) {
  const int saved_errno = errno;
  g_signal.store(signal_number);
  g_stop.store(true);
  Wake();
  errno = saved_errno;
}

// Makes the pipe the first time; empties it of an earlier StopSignals'
// wake-ups after that.
void MakeOrDrainWakePipe() {
  if (g_wake_pipe[0] < 0) {
    PCHECK(pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) == 0) << "pipe2";
    return;
  }
  char drain[64];
  while (read(g_wake_pipe[0], drain, sizeof(drain)) > 0) {
  }
}

sigset_t StopSignalSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// kBlockAndWait: the stop signals and the request signal.
sigset_t BlockedSignalSet() {
  sigset_t set = StopSignalSet();
  sigaddset(&set, SIGUSR1);
  return set;
}

}  // namespace

StopSignals::StopSignals(Mode mode) : mode_(mode) {
  CHECK(!g_active.exchange(true)) << "one StopSignals at a time";
  g_stop.store(false);
  g_signal.store(0);
  MakeOrDrainWakePipe();
  if (mode_ == Mode::kBlockAndWait) {
    // The actions stay as they are (the default); sigtimedwait() takes the
    // blocked signals.
    const sigset_t set = BlockedSignalSet();
    pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
    sigaction(SIGINT, nullptr, &old_int_);
    sigaction(SIGTERM, nullptr, &old_term_);
    sigaction(SIGUSR1, nullptr, &old_usr1_);
    return;
  }
  struct sigaction action = {};
  action.sa_handler = &OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;  // the second signal takes the default action
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

StopSignals::~StopSignals() {
  if (mode_ == Mode::kBlockAndWait) {
    // Ignoring a signal discards it where pending, so that signals sent
    // while stopping do not act once unblocked.
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGINT, &ignore, nullptr);
    sigaction(SIGTERM, &ignore, nullptr);
    sigaction(SIGUSR1, &ignore, nullptr);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    sigaction(SIGUSR1, &old_usr1_, nullptr);
  }
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  g_active.store(false);
}

const std::atomic<bool>& StopSignals::flag() const { return g_stop; }

int StopSignals::signal_number() const { return g_signal.load(); }

void StopSignals::RequestStop() {
  g_stop.store(true);
  Wake();
}

bool StopSignals::WaitFor(absl::Duration timeout) {
  return WaitUntil(timeout, /*take_requests=*/false) == Event::kStop;
}

StopSignals::Event StopSignals::WaitForEvent(absl::Duration timeout) {
  return WaitUntil(timeout, /*take_requests=*/mode_ == Mode::kBlockAndWait);
}

StopSignals::Event StopSignals::WaitUntil(absl::Duration timeout, bool take_requests) {
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  const sigset_t set = take_requests ? BlockedSignalSet() : StopSignalSet();
  while (!g_stop.load()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    if (mode_ == Mode::kBlockAndWait) {
      // In slices, so that RequestStop() from another thread is noticed.
      const absl::Duration slice = std::min(left, absl::Milliseconds(100));
      const timespec ts = absl::ToTimespec(slice);
      const int signal_number = sigtimedwait(&set, nullptr, &ts);
      if (signal_number == SIGUSR1) return Event::kRequest;
      if (signal_number > 0) {
        g_signal.store(signal_number);
        g_stop.store(true);
      }
    } else {
      const int ms =
          left == absl::InfiniteDuration()
              ? -1
              : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 60 * 1000));
      pollfd fd = {g_wake_pipe[0], POLLIN, 0};
      if (poll(&fd, 1, ms) > 0) {
        char drain[64];
        while (read(g_wake_pipe[0], drain, sizeof(drain)) > 0) {
        }
      }
    }
  }
  return g_stop.load() ? Event::kStop : Event::kTimeout;
}

}  // namespace dreplay
