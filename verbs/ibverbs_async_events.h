// Copyright dreplay authors.
//
// ibverbs_async_events.h: the device's asynchronous events
// (ibv_get_async_event: a queue pair's fatal error, port down, device
// fatal) turned into queue-pair errors and log lines.
//
//  * ClassifyAsyncEvent (pure) says what an event means: which queue pairs
//    it kills (one, or all of the device's) and the status they fail with.
//  * FaultRegistry (thread-safe) holds one QpFault per live queue pair,
//    found by its ibv_qp and ibv_cq handles. The event thread fails them;
//    each queue pair checks its own (one atomic load) in PostSend,
//    PostRecv and Poll, and then enters its error state with that status:
//    error() returns it and every outstanding request completes with
//    kFlushed, its detail naming the event.
//  * A port going down (IBV_EVENT_PORT_ERR) is logged and fails nothing: a
//    link flap shorter than the queue pairs' retries costs nothing, a
//    longer one fails each queue pair through its own retry-exceeded
//    completion, and once the port is ACTIVE again new connections work
//    without a restart (the provider keeps no port-wide failure).
//  * AsyncEventThread watches a non-blocking fd with poll() and an eventfd
//    to stop it, calling a handler whenever the fd is readable; the
//    provider runs DrainAsyncEvents on the context's async_fd there. The
//    thread is owned and joined by the object's destructor.

#ifndef DREPLAY_VERBS_IBVERBS_ASYNC_EVENTS_H_
#define DREPLAY_VERBS_IBVERBS_ASYNC_EVENTS_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace dreplay::verbs::ibverbs {

// What an asynchronous event reaches.
enum class AsyncScope {
  kNone,       // informational: logged only
  kQueuePair,  // the queue pair (or its completion queue) named by the event
  kDevice,     // every queue pair of the device
};

struct AsyncEventEffect {
  AsyncScope scope = AsyncScope::kNone;
  // Set for kQueuePair and kDevice: what the queue pairs fail with
  // (kUnavailable), naming the event, the device and the element.
  absl::Status error;
  // The log line; `warning` says whether it is logged as a warning.
  std::string log_line;
  bool warning = false;
};

// What `type` on `device_name` means. `element` names what the event is
// about in the log line and the status ("qpn 0x12", "port 1"). Pure.
AsyncEventEffect ClassifyAsyncEvent(ibv_event_type type, const std::string& device_name,
                                    const std::string& element);

// One queue pair's asynchronous failure: set once by the event thread, read
// by the queue pair's own thread. Thread-safe.
class QpFault {
 public:
  // Cheap (one acquire load).
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The first failure; OK while !failed().
  absl::Status status() const;
  // Records `why` unless a failure is already recorded.
  void Fail(const absl::Status& why);

 private:
  mutable Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
};

// The faults of a device's live queue pairs, by their libibverbs handles
// (the ibv_qp and the ibv_cq: a CQ error kills the queue pair that owns
// the CQ). Thread-safe.
class FaultRegistry {
 public:
  // A fault for a new queue pair with handles `qp` and `cq`; already failed
  // if the device or port has failed. The caller unregisters it before the
  // handles are destroyed.
  std::shared_ptr<QpFault> Register(const void* qp, const void* cq);
  void Unregister(const void* qp, const void* cq);
  // Fails the queue pair registered under `handle`; false if none is.
  bool FailHandle(const void* handle, const absl::Status& why);
  // Fails every registered queue pair and every later one.
  void FailAll(const absl::Status& why);
  // Registered handles (two per queue pair).
  size_t size() const;

 private:
  mutable Mutex mu_;
  std::map<const void*, std::shared_ptr<QpFault>> faults_ ABSL_GUARDED_BY(mu_);
  absl::Status all_failed_ ABSL_GUARDED_BY(mu_);
};

// Reads every pending event of `context` (whose async_fd is non-blocking),
// acknowledges each, logs it and applies its effect to `registry`:
// kQueuePair fails the QP or CQ named, kDevice fails all. Returns when no
// event is pending. `port` is the provider's port, named in log lines.
void DrainAsyncEvents(ibv_context* context, const std::string& device_name, int port,
                      FaultRegistry* registry);

// Calls `on_readable` on its own thread whenever `fd` (non-blocking, owned
// by the caller, open until this object is destroyed) is readable, until
// destruction. `on_readable` must read what is pending (or the thread
// spins). Destruction stops and joins the thread; it waits for a running
// `on_readable` to return.
class AsyncEventThread {
 public:
  // kInternal if the eventfd cannot be made.
  static absl::StatusOr<std::unique_ptr<AsyncEventThread>> Start(int fd,
                                                                 std::function<void()> on_readable);
  ~AsyncEventThread();
  AsyncEventThread(const AsyncEventThread&) = delete;
  AsyncEventThread& operator=(const AsyncEventThread&) = delete;

 private:
  AsyncEventThread(int fd, int stop_fd, std::function<void()> on_readable);
  void Run();

  const int fd_;
  const int stop_fd_;  // an eventfd; written once to stop
  const std::function<void()> on_readable_;
  std::thread thread_;
};

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_ASYNC_EVENTS_H_
