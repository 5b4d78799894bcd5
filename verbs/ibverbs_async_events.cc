// Copyright dreplay authors.

#include "verbs/ibverbs_async_events.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace dreplay::verbs::ibverbs {
namespace {

AsyncEventEffect Fatal(AsyncScope scope, const std::string& what, const std::string& consequence) {
  AsyncEventEffect effect;
  effect.scope = scope;
  effect.error = absl::UnavailableError(absl::StrCat(what, ": ", consequence));
  effect.log_line = std::string(effect.error.message());
  effect.warning = true;
  return effect;
}

AsyncEventEffect Info(const std::string& what, bool warning) {
  AsyncEventEffect effect;
  effect.log_line = what;
  effect.warning = warning;
  return effect;
}

}  // namespace

AsyncEventEffect ClassifyAsyncEvent(ibv_event_type type, const std::string& device_name,
                                    const std::string& element) {
  const std::string what = absl::StrCat("asynchronous event ", ibv_event_type_str(type), " on ",
                                        device_name, element.empty() ? "" : " ", element);
  switch (type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_CQ_ERR:
      return Fatal(AsyncScope::kQueuePair, what, "the queue pair is in the error state");
    case IBV_EVENT_PORT_ERR:
      // Queue pairs are left alone: they fail by themselves (retries
      // exceeded) only if the link stays down longer than their retries.
      return Info(absl::StrCat(what,
                               ": the port went down; queue pairs are kept, and fail only "
                               "if the link stays down past their retries"),
                  /*warning=*/true);
    case IBV_EVENT_DEVICE_FATAL:
      return Fatal(AsyncScope::kDevice, what,
                   "the device failed; every queue pair is in the error state (the provider must "
                   "be recreated)");
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_WQ_FATAL:
    case IBV_EVENT_GID_CHANGE:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
      return Info(what, /*warning=*/true);
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return Info(what, /*warning=*/false);
  }
  return Info(absl::StrCat(what, " (unknown event type ", static_cast<int>(type), ")"),
              /*warning=*/true);
}

absl::Status QpFault::status() const {
  MutexLock lock(&mu_);
  return status_;
}

void QpFault::Fail(const absl::Status& why) {
  MutexLock lock(&mu_);
  if (!status_.ok()) return;
  status_ = why;
  failed_.store(true, std::memory_order_release);
}

std::shared_ptr<QpFault> FaultRegistry::Register(const void* qp, const void* cq) {
  auto fault = std::make_shared<QpFault>();
  MutexLock lock(&mu_);
  if (!all_failed_.ok()) fault->Fail(all_failed_);
  if (qp != nullptr) faults_[qp] = fault;
  if (cq != nullptr) faults_[cq] = fault;
  return fault;
}

void FaultRegistry::Unregister(const void* qp, const void* cq) {
  MutexLock lock(&mu_);
  faults_.erase(qp);
  faults_.erase(cq);
}

bool FaultRegistry::FailHandle(const void* handle, const absl::Status& why) {
  MutexLock lock(&mu_);
  auto it = faults_.find(handle);
  if (it == faults_.end()) return false;
  it->second->Fail(why);
  return true;
}

void FaultRegistry::FailAll(const absl::Status& why) {
  MutexLock lock(&mu_);
  if (all_failed_.ok()) all_failed_ = why;
  for (auto& [handle, fault] : faults_) fault->Fail(why);
}

size_t FaultRegistry::size() const {
  MutexLock lock(&mu_);
  return faults_.size();
}

void DrainAsyncEvents(ibv_context* context, const std::string& device_name, int port,
                      FaultRegistry* registry) {
  for (;;) {
    ibv_async_event event;
    std::memset(&event, 0, sizeof(event));
    if (ibv_get_async_event(context, &event) != 0) {
      // EAGAIN: nothing pending on the non-blocking fd.
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        PLOG(WARNING) << device_name << ": ibv_get_async_event";
      }
      return;
    }
    const void* handle = nullptr;
    std::string element;
    switch (event.event_type) {
      case IBV_EVENT_CQ_ERR:
        handle = event.element.cq;
        element = "(a completion queue)";
        break;
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_COMM_EST:
      case IBV_EVENT_SQ_DRAINED:
      case IBV_EVENT_PATH_MIG:
      case IBV_EVENT_PATH_MIG_ERR:
      case IBV_EVENT_QP_LAST_WQE_REACHED:
        handle = event.element.qp;
        element = absl::StrFormat("qpn 0x%x", event.element.qp->qp_num);
        break;
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_PKEY_CHANGE:
      case IBV_EVENT_SM_CHANGE:
      case IBV_EVENT_CLIENT_REREGISTER:
      case IBV_EVENT_GID_CHANGE:
        element = absl::StrCat("port ", event.element.port_num);
        break;
      default:
        break;
    }
    const AsyncEventEffect effect = ClassifyAsyncEvent(event.event_type, device_name, element);
    switch (effect.scope) {
      case AsyncScope::kQueuePair:
        registry->FailHandle(handle, effect.error);
        break;
      case AsyncScope::kDevice:
        registry->FailAll(effect.error);
        break;
      case AsyncScope::kNone:
        break;
    }
    // Acknowledged after its last use: ibv_destroy_qp/cq wait for it.
    ibv_ack_async_event(&event);
    if (effect.warning) {
      LOG(WARNING) << effect.log_line;
    } else {
      LOG(INFO) << effect.log_line;
    }
  }
}

absl::StatusOr<std::unique_ptr<AsyncEventThread>> AsyncEventThread::Start(
    int fd, std::function<void()> on_readable) {
  const int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  return std::unique_ptr<AsyncEventThread>(
      new AsyncEventThread(fd, stop_fd, std::move(on_readable)));
}

AsyncEventThread::AsyncEventThread(int fd, int stop_fd, std::function<void()> on_readable)
    : fd_(fd), stop_fd_(stop_fd), on_readable_(std::move(on_readable)) {
  thread_ = std::thread([this] { Run(); });
}

AsyncEventThread::~AsyncEventThread() {
  const uint64_t one = 1;
  // An eventfd write of 8 bytes cannot be short; it fails only on overflow.
  PCHECK(write(stop_fd_, &one, sizeof(one)) == sizeof(one)) << "eventfd write";
  thread_.join();
  close(stop_fd_);
}

void AsyncEventThread::Run() {
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int n = poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << "asynchronous event thread: poll";
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      if (!(fds[0].revents & POLLIN)) {
        LOG(WARNING) << "asynchronous event fd " << fd_ << " closed or failed; no more events";
        // Wait for the stop alone.
        pollfd stop = {stop_fd_, POLLIN, 0};
        while (poll(&stop, 1, -1) < 0 && errno == EINTR) {
        }
        return;
      }
    }
    if (fds[0].revents & POLLIN) on_readable_();
  }
}

}  // namespace dreplay::verbs::ibverbs
