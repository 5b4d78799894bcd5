// Copyright dreplay authors.

#include "verbs/ibverbs_async_events.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dreplay::verbs::ibverbs {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWaitTimeout = absl::Seconds(10);

TEST(ClassifyAsyncEventTest, QueuePairFatalEventsFailThatQueuePair) {
  for (ibv_event_type type :
       {IBV_EVENT_QP_FATAL, IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR, IBV_EVENT_CQ_ERR}) {
    const AsyncEventEffect effect = ClassifyAsyncEvent(type, "mlx5_0", "qpn 0x12");
    EXPECT_EQ(effect.scope, AsyncScope::kQueuePair) << ibv_event_type_str(type);
    EXPECT_TRUE(absl::IsUnavailable(effect.error));
    EXPECT_THAT(effect.error.message(), HasSubstr("mlx5_0 qpn 0x12"));
    EXPECT_THAT(effect.error.message(), HasSubstr(ibv_event_type_str(type)));
    EXPECT_TRUE(effect.warning);
  }
}

TEST(ClassifyAsyncEventTest, PortDownIsAWarningThatFailsNothing) {
  // A link flap must not need a restart: no queue pair is failed, and
  // nothing is remembered that would fail the ones made later.
  const AsyncEventEffect effect = ClassifyAsyncEvent(IBV_EVENT_PORT_ERR, "rxe0", "port 1");
  EXPECT_EQ(effect.scope, AsyncScope::kNone);
  EXPECT_TRUE(effect.error.ok());
  EXPECT_TRUE(effect.warning);
  EXPECT_THAT(effect.log_line, HasSubstr("rxe0 port 1"));
  EXPECT_THAT(effect.log_line, HasSubstr("port went down"));
}

TEST(ClassifyAsyncEventTest, DeviceFatalFailsEveryQueuePair) {
  const AsyncEventEffect effect = ClassifyAsyncEvent(IBV_EVENT_DEVICE_FATAL, "mlx5_0", "");
  EXPECT_EQ(effect.scope, AsyncScope::kDevice);
  EXPECT_TRUE(absl::IsUnavailable(effect.error));
  EXPECT_THAT(effect.error.message(), HasSubstr("device failed"));
}

TEST(ClassifyAsyncEventTest, InformationalEventsAreOnlyLogged) {
  for (ibv_event_type type : {IBV_EVENT_PORT_ACTIVE, IBV_EVENT_COMM_EST, IBV_EVENT_SQ_DRAINED,
                              IBV_EVENT_GID_CHANGE, IBV_EVENT_LID_CHANGE}) {
    const AsyncEventEffect effect = ClassifyAsyncEvent(type, "mlx5_0", "port 1");
    EXPECT_EQ(effect.scope, AsyncScope::kNone) << ibv_event_type_str(type);
    EXPECT_TRUE(effect.error.ok());
    EXPECT_THAT(effect.log_line, HasSubstr(ibv_event_type_str(type)));
  }
  EXPECT_FALSE(ClassifyAsyncEvent(IBV_EVENT_PORT_ACTIVE, "d", "").warning);
  EXPECT_TRUE(ClassifyAsyncEvent(IBV_EVENT_GID_CHANGE, "d", "").warning);
}

TEST(FaultRegistryTest, FailsTheQueuePairByItsQpOrCqHandle) {
  FaultRegistry registry;
  int qp1, cq1, qp2, cq2;  // stand-ins for libibverbs handles
  std::shared_ptr<QpFault> a = registry.Register(&qp1, &cq1);
  std::shared_ptr<QpFault> b = registry.Register(&qp2, &cq2);
  EXPECT_EQ(registry.size(), 4u);
  EXPECT_FALSE(a->failed());
  EXPECT_TRUE(registry.FailHandle(&cq1, absl::UnavailableError("cq error")));
  EXPECT_TRUE(a->failed());
  EXPECT_EQ(a->status().message(), "cq error");
  EXPECT_FALSE(b->failed());
  // The first failure wins.
  registry.FailHandle(&qp1, absl::UnavailableError("later"));
  EXPECT_EQ(a->status().message(), "cq error");
}

TEST(FaultRegistryTest, AnUnregisteredHandleIsIgnored) {
  FaultRegistry registry;
  int qp, cq;
  std::shared_ptr<QpFault> a = registry.Register(&qp, &cq);
  registry.Unregister(&qp, &cq);
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_FALSE(registry.FailHandle(&qp, absl::UnavailableError("gone")));
  EXPECT_FALSE(a->failed());
}

TEST(FaultRegistryTest, FailAllFailsEveryQueuePairAndLaterOnes) {
  FaultRegistry registry;
  int qp1, cq1, qp2, cq2;
  std::shared_ptr<QpFault> a = registry.Register(&qp1, &cq1);
  registry.FailAll(absl::UnavailableError("device fatal"));
  EXPECT_TRUE(a->failed());
  std::shared_ptr<QpFault> later = registry.Register(&qp2, &cq2);
  EXPECT_TRUE(later->failed());
  EXPECT_EQ(later->status().message(), "device fatal");
}

// A pipe stands in for the context's async_fd.
class Pipe {
 public:
  Pipe() { PCHECK(pipe2(fds_, O_NONBLOCK | O_CLOEXEC) == 0); }
  ~Pipe() {
    close(fds_[0]);
    close(fds_[1]);
  }
  int read_fd() const { return fds_[0]; }
  void Write(char c) { PCHECK(write(fds_[1], &c, 1) == 1); }
  // Reads what is pending; the count of bytes read.
  int Drain() {
    int n = 0;
    char buf[64];
    for (;;) {
      const ssize_t got = read(fds_[0], buf, sizeof(buf));
      if (got <= 0) return n;
      n += static_cast<int>(got);
    }
  }

 private:
  int fds_[2];
};

// Counts what the handler read; waits for a count with a named timeout.
class Seen {
 public:
  void Add(int n) {
    MutexLock lock(&mu_);
    seen_ += n;
    cv_.SignalAll();
  }
  bool WaitFor(int want) {
    const absl::Time deadline = absl::Now() + kWaitTimeout;
    MutexLock lock(&mu_);
    while (seen_ != want) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      cv_.WaitWithTimeout(&mu_, left);
    }
    return true;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int seen_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(AsyncEventThreadTest, CallsTheHandlerForEachReadableFdAndStopsOnDestruction) {
  Pipe pipe;
  Seen seen;
  auto thread = AsyncEventThread::Start(pipe.read_fd(), [&] { seen.Add(pipe.Drain()); });
  ASSERT_TRUE(thread.ok()) << thread.status();
  pipe.Write('a');
  pipe.Write('b');
  ASSERT_TRUE(seen.WaitFor(2));
  pipe.Write('c');
  ASSERT_TRUE(seen.WaitFor(3));
  thread->reset();  // joins
}

TEST(AsyncEventThreadTest, StopsWithoutAnyEvent) {
  Pipe pipe;
  std::atomic<int> calls{0};
  auto thread = AsyncEventThread::Start(pipe.read_fd(), [&] {
    pipe.Drain();
    ++calls;
  });
  ASSERT_TRUE(thread.ok()) << thread.status();
  thread->reset();  // returns: the stop eventfd woke the thread
  EXPECT_EQ(calls.load(), 0);
}

}  // namespace
}  // namespace dreplay::verbs::ibverbs
