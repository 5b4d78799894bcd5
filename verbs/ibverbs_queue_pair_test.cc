// Copyright dreplay authors.
//
// The ibverbs queue pair's datapath and setup attributes against the strict
// fake device (ibverbs_fake.h), in its default mlx5 profile: no hardware
// needed.

#include "verbs/ibverbs_queue_pair.h"

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verbs/ibverbs_async_events.h"
#include "verbs/ibverbs_attributes.h"
#include "verbs/ibverbs_fake.h"

namespace dreplay::verbs::ibverbs {
namespace {

using ::testing::HasSubstr;

class FakeRegion : public MemoryRegion {
 public:
  explicit FakeRegion(size_t length) : bytes_(length) {}
  void* addr() const override { return const_cast<char*>(bytes_.data()); }
  size_t length() const override { return bytes_.size(); }
  uint32_t lkey() const override { return 0x1234; }
  uint32_t rkey() const override { return 0x5678; }
  uint32_t access() const override { return kLocalWrite | kRemoteRead | kRemoteWrite; }
  char* data() { return bytes_.data(); }

 private:
  std::vector<char> bytes_;
};

// A region the fake registered (ibv_reg_mr), as the provider's regions are.
class FakeIbvRegion : public MemoryRegion, public IbvRegionHandle {
 public:
  FakeIbvRegion(StrictFakeIbv* fake, size_t length, uint32_t access)
      : bytes_(length),
        access_(access),
        mr_(fake->RegisterMr(bytes_.data(), length, ToIbvAccess(access))) {}
  void* addr() const override { return const_cast<char*>(bytes_.data()); }
  size_t length() const override { return bytes_.size(); }
  uint32_t lkey() const override { return mr_->lkey; }
  uint32_t rkey() const override { return mr_->rkey; }
  uint32_t access() const override { return access_; }
  ibv_mr* ibv_region() const override { return mr_; }

 private:
  std::vector<char> bytes_;
  const uint32_t access_;
  ibv_mr* const mr_;
};

PeerInfo Peer(uint32_t qpn) {
  PeerInfo peer;
  peer.qpn = qpn;
  peer.psn = 77;
  peer.gid.raw[10] = 0xff;
  peer.gid.raw[11] = 0xff;
  peer.gid.raw[15] = 2;
  peer.initiator_depth = 4;
  peer.responder_resources = 4;
  return peer;
}

class IbverbsQueuePairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = std::make_shared<Device>();
    device_->name = "fake0";
    device_->api = &fake_;
    // The device as OpenDevice would see the one the fake plays.
    fake_.profile().Describe(device_.get());
  }

  // A queue pair taken RESET -> INIT -> RTR -> RTS by the attribute
  // builders through the strict fake.
  std::unique_ptr<IbverbsQueuePair> MakeQp(int max_send_wr, uint32_t max_inline) {
    StrictFakeIbv::QpConfig config;
    config.max_send_wr = max_send_wr;
    config.max_recv_wr = 8;
    config.max_inline_data = max_inline;
    config.cqe = max_send_wr + 8;
    QpObjects objects(device_->name, &fake_);
    EXPECT_EQ(fake_.CreateQp(config, &objects.qp, &objects.cq), 0);
    objects.max_inline_data = max_inline;
    raw_qp_ = objects.qp;
    raw_cq_ = objects.cq;
    options_.max_send_wr = max_send_wr;
    options_.max_recv_wr = 8;
    const PeerInfo local = Peer(objects.qp->qp_num);
    const PeerInfo remote = Peer(0x999);
    QpTransition init = BuildInitTransition(*device_);
    EXPECT_EQ(fake_.ModifyQp(objects.qp, &init.attr, init.mask), 0);
    absl::StatusOr<QpTransition> rtr =
        BuildRtrTransition(*device_, options_, local, remote, IBV_MTU_1024);
    EXPECT_TRUE(rtr.ok()) << rtr.status();
    EXPECT_EQ(fake_.ModifyQp(objects.qp, &rtr->attr, rtr->mask), 0);
    QpTransition rts = BuildRtsTransition(options_, local, 4);
    EXPECT_EQ(fake_.ModifyQp(objects.qp, &rts.attr, rts.mask), 0);
    EXPECT_EQ(fake_.state(objects.qp), IBV_QPS_RTS);
    return std::make_unique<IbverbsQueuePair>(device_, options_, std::move(objects), remote, 4);
  }

  WorkRequest Write(uint64_t wr_id, uint32_t length, bool signaled) {
    WorkRequest wr;
    wr.wr_id = wr_id;
    wr.opcode = Opcode::kWrite;
    wr.signaled = signaled;
    wr.local = &region_;
    wr.local_addr = region_.data();
    wr.length = length;
    wr.remote_addr = 0x10000;
    wr.rkey = 1;
    return wr;
  }

  // Polls until nothing more comes; what came.
  std::vector<Completion> PollAll(QueuePair* qp) {
    std::vector<Completion> all;
    Completion batch[16];
    for (;;) {
      const int n = qp->Poll(absl::MakeSpan(batch));
      if (n == 0) return all;
      all.insert(all.end(), batch, batch + n);
    }
  }

  StrictFakeIbv fake_;  // outlives every queue pair
  std::shared_ptr<Device> device_;
  QueuePairOptions options_;
  FakeRegion region_{4096};
  ibv_qp* raw_qp_ = nullptr;
  ibv_cq* raw_cq_ = nullptr;
};

TEST_F(IbverbsQueuePairTest, TheStrictFakeRefusesAMissingMaskOrASkippedState) {
  QpObjects objects(device_->name, &fake_);
  ASSERT_EQ(fake_.CreateQp(StrictFakeIbv::QpConfig(), &objects.qp, &objects.cq), 0);
  QpTransition init = BuildInitTransition(*device_);
  QpTransition early = init;
  early.attr.qp_state = IBV_QPS_RTR;  // RESET -> RTR skips INIT
  EXPECT_EQ(fake_.ModifyQp(objects.qp, &early.attr, early.mask), EINVAL);
  init.mask &= ~IBV_QP_PORT;
  EXPECT_EQ(fake_.ModifyQp(objects.qp, &init.attr, init.mask), EINVAL);
  EXPECT_EQ(fake_.state(objects.qp), IBV_QPS_RESET);
}

TEST_F(IbverbsQueuePairTest, SetupTransitionsCarryTheTrafficClassAndAFiniteRnrRetry) {
  device_->traffic_class = 106;
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, 64);
  const ibv_qp_attr& rtr = fake_.attr_for(raw_qp_, IBV_QPS_RTR);
  EXPECT_EQ(rtr.ah_attr.is_global, 1);
  EXPECT_EQ(rtr.ah_attr.grh.traffic_class, 106);
  EXPECT_EQ(fake_.attr_for(raw_qp_, IBV_QPS_RTS).rnr_retry, kDefaultRnrRetry);
}

TEST_F(IbverbsQueuePairTest, UnsignalledRunsNeverStickTheSendQueue) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(/*max_send_wr=*/8, 64);
  for (int round = 0; round < 200; ++round) {
    const WorkRequest wrs[3] = {Write(3 * round, 16, false), Write(3 * round + 1, 16, false),
                                Write(3 * round + 2, 16, false)};
    ASSERT_TRUE(qp->PostSend(wrs).ok()) << "round " << round;
    ASSERT_LE(fake_.outstanding_sends(raw_qp_), 8);
    // The caller asked for no completion: forced signals are not reported.
    EXPECT_TRUE(PollAll(qp.get()).empty());
    // ... but they retired every WQE the device holds.
    ASSERT_EQ(fake_.outstanding_sends(raw_qp_), 0) << "round " << round;
  }
  EXPECT_FALSE(fake_.cq_overrun(raw_cq_));
  EXPECT_EQ(qp->state(), QpState::kReady);
}

TEST_F(IbverbsQueuePairTest, SignalledRequestsCompleteWithTheirLength) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, 64);
  const WorkRequest wrs[2] = {Write(1, 100, false), Write(2, 200, true)};
  ASSERT_TRUE(qp->PostSend(wrs).ok());
  const std::vector<Completion> done = PollAll(qp.get());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].wr_id, 2u);
  EXPECT_EQ(done[0].status, WcStatus::kSuccess);
  EXPECT_EQ(done[0].byte_len, 200u);
}

TEST_F(IbverbsQueuePairTest, AReadCompletionReportsTheRequestedLength) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, 64);
  WorkRequest read = Write(3, 300, true);
  read.opcode = Opcode::kRead;
  ASSERT_TRUE(qp->PostSend({&read, 1}).ok());
  const std::vector<Completion> done = PollAll(qp.get());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].opcode, Opcode::kRead);
  // The device's wc.byte_len is defined for receives only (0 here).
  EXPECT_EQ(done[0].byte_len, 300u);
}

TEST_F(IbverbsQueuePairTest, AnErrorCompletionFlushesTheRestInPostingOrder) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, 64);
  const WorkRequest first = Write(1, 8, true);
  ASSERT_TRUE(qp->PostSend({&first, 1}).ok());
  fake_.InjectSendError(raw_qp_, IBV_WC_REM_ACCESS_ERR);
  const WorkRequest rest[3] = {Write(2, 8, false), Write(3, 8, true), Write(4, 8, false)};
  ASSERT_TRUE(qp->PostSend(rest).ok());
  const std::vector<Completion> done = PollAll(qp.get());
  ASSERT_EQ(done.size(), 4u);
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[0].status, WcStatus::kSuccess);
  // The failed request is reported although it was unsignalled.
  EXPECT_EQ(done[1].wr_id, 2u);
  EXPECT_EQ(done[1].status, WcStatus::kRemoteAccessError);
  EXPECT_EQ(done[2].wr_id, 3u);
  EXPECT_EQ(done[2].status, WcStatus::kFlushed);
  EXPECT_EQ(done[3].wr_id, 4u);
  EXPECT_EQ(done[3].status, WcStatus::kFlushed);
  EXPECT_EQ(qp->state(), QpState::kError);
  EXPECT_FALSE(qp->error().ok());
  EXPECT_FALSE(fake_.cq_overrun(raw_cq_));
}

TEST_F(IbverbsQueuePairTest, OnlyWritesWithinTheInlineLimitAreSentInline) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, /*max_inline=*/64);
  const WorkRequest wrs[2] = {Write(1, 64, true), Write(2, 65, true)};
  ASSERT_TRUE(qp->PostSend(wrs).ok());
  const auto& sent = fake_.accepted_sends(raw_qp_);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_NE(sent[0].send_flags & IBV_SEND_INLINE, 0u);
  EXPECT_EQ(sent[1].send_flags & IBV_SEND_INLINE, 0u);
  EXPECT_EQ(PollAll(qp.get()).size(), 2u);
}

TEST_F(IbverbsQueuePairTest, OnlyAFencedRequestCarriesIbvSendFence) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, /*max_inline=*/64);
  WorkRequest read = Write(1, 128, false);
  read.opcode = Opcode::kRead;
  WorkRequest fenced = Write(2, 128, true);
  fenced.fence = true;  // must not overtake the READ at the responder
  const WorkRequest wrs[2] = {read, fenced};
  ASSERT_TRUE(qp->PostSend(wrs).ok());
  const auto& sent = fake_.accepted_sends(raw_qp_);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].send_flags & IBV_SEND_FENCE, 0u);
  EXPECT_NE(sent[1].send_flags & IBV_SEND_FENCE, 0u);
  EXPECT_EQ(PollAll(qp.get()).size(), 1u);
}

TEST_F(IbverbsQueuePairTest, MisalignedAtomicFailsLocallyAndLeavesTheQueuePairUp) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, 64);
  WorkRequest add;
  add.wr_id = 9;
  add.opcode = Opcode::kFetchAdd;
  add.local = &region_;
  add.local_addr = region_.data();
  add.length = 8;
  add.remote_addr = 0x10004;  // not 8-byte aligned
  add.rkey = 1;
  add.compare_add = 1;
  EXPECT_TRUE(absl::IsInvalidArgument(qp->PostSend({&add, 1})));
  EXPECT_TRUE(fake_.accepted_sends(raw_qp_).empty());
  EXPECT_EQ(fake_.state(raw_qp_), IBV_QPS_RTS);
  EXPECT_EQ(qp->state(), QpState::kReady);
}

TEST_F(IbverbsQueuePairTest, AnAsynchronousQpFatalEventFailsTheQueuePairAtItsNextPoll) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, 64);
  const WorkRequest wr = Write(5, 32, true);
  ASSERT_TRUE(qp->PostSend({&wr, 1}).ok());
  const AsyncEventEffect effect = ClassifyAsyncEvent(IBV_EVENT_QP_FATAL, "fake0", "qpn 0x100");
  ASSERT_TRUE(device_->faults.FailHandle(raw_qp_, effect.error));
  const std::vector<Completion> done = PollAll(qp.get());
  EXPECT_EQ(qp->state(), QpState::kError);
  EXPECT_TRUE(absl::IsUnavailable(qp->error()));
  EXPECT_THAT(
      qp->error().message(),
      HasSubstr("asynchronous event local work queue catastrophic error on fake0 qpn 0x100"));
  EXPECT_EQ(fake_.state(raw_qp_), IBV_QPS_ERR);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].wr_id, 5u);
  EXPECT_EQ(done[0].status, WcStatus::kFlushed);
  EXPECT_THAT(
      done[0].detail,
      HasSubstr("asynchronous event local work queue catastrophic error on fake0 qpn 0x100"));
  // Later posts are flushed at once.
  const WorkRequest later = Write(6, 32, true);
  ASSERT_TRUE(qp->PostSend({&later, 1}).ok());
  const std::vector<Completion> flushed = PollAll(qp.get());
  ASSERT_EQ(flushed.size(), 1u);
  EXPECT_EQ(flushed[0].status, WcStatus::kFlushed);
}

TEST_F(IbverbsQueuePairTest, ADeviceFatalEventFailsEveryQueuePairAtItsNextPost) {
  std::unique_ptr<IbverbsQueuePair> a = MakeQp(8, 64);
  std::unique_ptr<IbverbsQueuePair> b = MakeQp(8, 64);
  device_->faults.FailAll(ClassifyAsyncEvent(IBV_EVENT_DEVICE_FATAL, "fake0", "").error);
  const WorkRequest wr = Write(1, 8, true);
  ASSERT_TRUE(a->PostSend({&wr, 1}).ok());
  EXPECT_EQ(a->state(), QpState::kError);
  EXPECT_THAT(a->error().message(), HasSubstr("device failed"));
  EXPECT_EQ(b->Poll({}), 0);
  Completion c;
  EXPECT_EQ(b->Poll({&c, 1}), 0);
  EXPECT_EQ(b->state(), QpState::kError);
}

TEST_F(IbverbsQueuePairTest, AWindowIsBoundWithAFreshKeyAndAdmitsItsQueuePairOnly) {
  std::unique_ptr<IbverbsQueuePair> a = MakeQp(8, 64);
  ibv_qp* qp_a = raw_qp_;
  std::unique_ptr<IbverbsQueuePair> b = MakeQp(8, 64);
  ibv_qp* qp_b = raw_qp_;
  FakeIbvRegion memory(&fake_, 4096, kLocalWrite | kMemoryWindowBind);
  absl::StatusOr<RemoteRegion> wa = a->BindWindow(memory, 512, 256, kRemoteRead | kRemoteWrite);
  ASSERT_TRUE(wa.ok()) << wa.status();
  absl::StatusOr<RemoteRegion> wb = b->BindWindow(memory, 512, 256, kRemoteRead);
  ASSERT_TRUE(wb.ok()) << wb.status();
  EXPECT_NE(wa->rkey, wb->rkey);
  EXPECT_EQ(wa->addr, reinterpret_cast<uint64_t>(memory.addr()) + 512);
  // The bind is an unsignalled send request with the window's next key.
  const ibv_send_wr& bind = fake_.accepted_sends(qp_a).back();
  EXPECT_EQ(bind.opcode, IBV_WR_BIND_MW);
  EXPECT_EQ(bind.bind_mw.rkey, wa->rkey);
  EXPECT_EQ(bind.bind_mw.bind_info.mw_access_flags,
            static_cast<unsigned>(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(a->state(), QpState::kReady);
  EXPECT_TRUE(PollAll(a.get()).empty());
  // A's key on A, inside the window: admitted. On B, or outside: refused.
  EXPECT_TRUE(fake_.WindowAllows(qp_a, wa->rkey, wa->addr, 256, IBV_ACCESS_REMOTE_WRITE));
  EXPECT_FALSE(fake_.WindowAllows(qp_b, wa->rkey, wa->addr, 8, IBV_ACCESS_REMOTE_READ));
  EXPECT_FALSE(fake_.WindowAllows(qp_a, wa->rkey, wa->addr + 255, 8, IBV_ACCESS_REMOTE_READ));
  EXPECT_FALSE(fake_.WindowAllows(qp_b, wb->rkey, wb->addr, 8, IBV_ACCESS_REMOTE_WRITE));
  // Destroying the queue pair unbinds and frees its windows.
  EXPECT_EQ(fake_.windows_allocated(), 2);
  a.reset();
  EXPECT_FALSE(fake_.WindowAllows(qp_a, wa->rkey, wa->addr, 8, IBV_ACCESS_REMOTE_READ));
  EXPECT_EQ(fake_.windows_allocated(), 1);
  // Windows were deallocated before their queue pair was destroyed.
  EXPECT_TRUE(fake_.violations().empty()) << fake_.violations().front();
}

TEST_F(IbverbsQueuePairTest, TheStrictFakeRecordsAQueuePairDestroyedUnderItsWindows) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, 64);
  FakeIbvRegion memory(&fake_, 4096, kLocalWrite | kMemoryWindowBind);
  ASSERT_TRUE(qp->BindWindow(memory, 0, 64, kRemoteRead).ok());
  // What the provider must never do: the raw QP destroyed first, and the
  // region deregistered under a bound window.
  EXPECT_EQ(fake_.DeregMr(memory.ibv_region()), EBUSY);
  EXPECT_EQ(fake_.DestroyQp(raw_qp_), 0);
  EXPECT_EQ(fake_.violations().size(), 2u);
  qp.reset();  // its second ibv_destroy_qp is refused (EINVAL) and logged
}

TEST_F(IbverbsQueuePairTest, BindWindowRefusesWhatTheRegionCannotBack) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, 64);
  FakeIbvRegion no_bind(&fake_, 4096, kLocalWrite | kRemoteRead);
  EXPECT_TRUE(absl::IsInvalidArgument(qp->BindWindow(no_bind, 0, 64, kRemoteRead).status()));
  FakeIbvRegion read_only(&fake_, 4096, kMemoryWindowBind);
  EXPECT_TRUE(absl::IsInvalidArgument(qp->BindWindow(read_only, 0, 64, kRemoteWrite).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(qp->BindWindow(read_only, 4090, 64, kRemoteRead).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(qp->BindWindow(region_, 0, 64, kRemoteRead).status()))
      << "a region of no ibverbs provider";
  EXPECT_EQ(fake_.windows_allocated(), 0);
  EXPECT_EQ(qp->state(), QpState::kReady);
}

TEST_F(IbverbsQueuePairTest, AFailedBindFailsTheQueuePair) {
  std::unique_ptr<IbverbsQueuePair> qp = MakeQp(8, 64);
  FakeIbvRegion memory(&fake_, 4096, kLocalWrite | kMemoryWindowBind);
  fake_.InjectSendError(raw_qp_, IBV_WC_MW_BIND_ERR);
  ASSERT_TRUE(qp->BindWindow(memory, 0, 64, kRemoteRead).ok());
  const std::vector<Completion> done = PollAll(qp.get());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].ok());
  EXPECT_THAT(done[0].detail, HasSubstr("memory window bind"));
  EXPECT_EQ(qp->state(), QpState::kError);
  EXPECT_TRUE(absl::IsFailedPrecondition(qp->BindWindow(memory, 0, 64, kRemoteRead).status()));
}

}  // namespace
}  // namespace dreplay::verbs::ibverbs
