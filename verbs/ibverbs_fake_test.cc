// Copyright dreplay authors.
//
// The strict fake device (ibverbs_fake.h) tells the truth: each profile
// refuses what its device refuses, with the device's errno or completion,
// and the error state flushes what a device flushes.

#include "verbs/ibverbs_fake.h"

#include <cerrno>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "verbs/ibverbs_attributes.h"
#include "verbs/ibverbs_device.h"

namespace dreplay::verbs::ibverbs {
namespace {

using Profile = StrictFakeIbv::DeviceProfile;

std::vector<Profile> AllProfiles() {
  return {Profile::Mlx5(), Profile::Rxe(), Profile::RxeBefore514(), Profile::Siw()};
}

PeerInfo Peer(uint32_t qpn) {
  PeerInfo peer;
  peer.qpn = qpn;
  peer.psn = 77;
  peer.gid.raw[0] = 0xfe;
  peer.gid.raw[1] = 0x80;
  peer.gid.raw[15] = 2;
  peer.initiator_depth = 4;
  peer.responder_resources = 4;
  return peer;
}

// A fake playing `profile`, with a Device that describes it, as the
// provider would see it after OpenDevice.
class FakeDevice {
 public:
  explicit FakeDevice(const Profile& profile) : fake(profile) {
    profile.Describe(&device);
    device.name = profile.name;
    device.api = &fake;
  }

  // A QP in RESET.
  ibv_qp* Create(StrictFakeIbv::QpConfig config = {}) {
    ibv_qp* qp = nullptr;
    ibv_cq* cq = nullptr;
    EXPECT_EQ(fake.CreateQp(config, &qp, &cq), 0);
    return qp;
  }

  // The provider's INIT and RTR transitions, `rtr` adjusted by the caller.
  QpTransition Init() { return BuildInitTransition(device); }
  QpTransition Rtr(ibv_qp* qp) {
    absl::StatusOr<QpTransition> rtr = BuildRtrTransition(
        device, QueuePairOptions(), Peer(qp->qp_num), Peer(0x999), device.port_attr.active_mtu);
    EXPECT_TRUE(rtr.ok()) << rtr.status();
    return *rtr;
  }
  QpTransition Rts() { return BuildRtsTransition(QueuePairOptions(), Peer(1), 4); }

  int Modify(ibv_qp* qp, QpTransition t) { return fake.ModifyQp(qp, &t.attr, t.mask); }

  // A QP taken RESET -> INIT -> RTR -> RTS by the provider's builders.
  ibv_qp* Ready(StrictFakeIbv::QpConfig config = {}) {
    ibv_qp* qp = Create(config);
    EXPECT_EQ(Modify(qp, Init()), 0);
    EXPECT_EQ(Modify(qp, Rtr(qp)), 0);
    EXPECT_EQ(Modify(qp, Rts()), 0);
    EXPECT_EQ(fake.state(qp), IBV_QPS_RTS);
    return qp;
  }

  std::vector<ibv_wc> PollAll(ibv_qp* qp) {
    std::vector<ibv_wc> all;
    ibv_wc wc[8];
    for (int n; (n = fake.PollCq(qp->send_cq, 8, wc)) > 0;) all.insert(all.end(), wc, wc + n);
    return all;
  }

  StrictFakeIbv fake;
  Device device;
};

// One WRITE of `length` bytes from nowhere: the fake touches no memory.
ibv_send_wr Write(uint64_t wr_id, uint32_t length, bool signaled, ibv_sge* sge) {
  *sge = ibv_sge{0x1000, length, 1};
  ibv_send_wr wr = {};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  wr.wr.rdma.remote_addr = 0x20000;
  wr.wr.rdma.rkey = 7;
  return wr;
}

TEST(StrictFakeIbvTest, TheDefaultProfileIsMlx5) {
  StrictFakeIbv fake;
  EXPECT_EQ(fake.profile().name, "mlx5");
}

TEST(StrictFakeIbvTest, EveryProfileAcceptsTheProvidersOwnSetup) {
  for (const Profile& profile : AllProfiles()) {
    SCOPED_TRACE(profile.name);
    FakeDevice d(profile);
    d.Ready();
  }
}

TEST(StrictFakeIbvTest, TheProviderFindsWhatEachProfileLacks) {
  for (const Profile& profile : AllProfiles()) {
    FakeDevice d(profile);
    const bool usable = profile.name == "mlx5" || profile.name == "rxe";
    EXPECT_EQ(MissingCapabilities(d.device.attr, profile.transport).empty(), usable)
        << profile.name;
  }
}

TEST(StrictFakeIbvTest, AQueuePairBeyondTheDevicesLimitsIsNotCreated) {
  ibv_qp* qp = nullptr;
  ibv_cq* cq = nullptr;
  StrictFakeIbv::QpConfig deep;
  deep.max_send_wr = Profile::Mlx5().max_qp_wr + 1;
  EXPECT_EQ(StrictFakeIbv(Profile::Mlx5()).CreateQp(deep, &qp, &cq), EINVAL);
  StrictFakeIbv::QpConfig inline_heavy;
  inline_heavy.max_inline_data = 81;  // SIW_MAX_INLINE is 80
  EXPECT_EQ(StrictFakeIbv(Profile::Siw()).CreateQp(inline_heavy, &qp, &cq), EINVAL);
  inline_heavy.max_inline_data = 80;
  EXPECT_EQ(StrictFakeIbv(Profile::Siw()).CreateQp(inline_heavy, &qp, &cq), 0);
}

TEST(StrictFakeIbvTest, APathMtuAboveTheActiveMtuIsRefused) {
  FakeDevice d(Profile::Rxe());
  ibv_qp* qp = d.Create();
  ASSERT_EQ(d.Modify(qp, d.Init()), 0);
  QpTransition rtr = d.Rtr(qp);
  rtr.attr.path_mtu = IBV_MTU_2048;  // the netdev's 1500 bytes give 1024
  EXPECT_EQ(d.Modify(qp, rtr), EINVAL);
  EXPECT_EQ(d.fake.state(qp), IBV_QPS_INIT);
  rtr.attr.path_mtu = IBV_MTU_1024;
  EXPECT_EQ(d.Modify(qp, rtr), 0);
}

TEST(StrictFakeIbvTest, ReadAndAtomicDepthsBeyondTheDeviceAreRefused) {
  FakeDevice d(Profile::Mlx5());
  ibv_qp* qp = d.Create();
  ASSERT_EQ(d.Modify(qp, d.Init()), 0);
  QpTransition rtr = d.Rtr(qp);
  rtr.attr.max_dest_rd_atomic = 17;  // ConnectX: 1 << log_max_ra_res_qp = 16
  EXPECT_EQ(d.Modify(qp, rtr), EINVAL);
  rtr.attr.max_dest_rd_atomic = 16;
  ASSERT_EQ(d.Modify(qp, rtr), 0);
  QpTransition rts = d.Rts();
  rts.attr.max_rd_atomic = 17;
  EXPECT_EQ(d.Modify(qp, rts), EINVAL);
  rts.attr.max_rd_atomic = 16;
  EXPECT_EQ(d.Modify(qp, rts), 0);
}

TEST(StrictFakeIbvTest, ARoceAddressMustNameAGidOfTheTable) {
  FakeDevice d(Profile::Rxe());
  ibv_qp* qp = d.Create();
  ASSERT_EQ(d.Modify(qp, d.Init()), 0);
  QpTransition rtr = d.Rtr(qp);
  rtr.attr.ah_attr.grh.sgid_index = 200;  // inside the table, empty
  EXPECT_EQ(d.Modify(qp, rtr), ENODATA);
  QpTransition no_grh = d.Rtr(qp);
  no_grh.attr.ah_attr.is_global = 0;  // RoCE has no LIDs
  EXPECT_EQ(d.Modify(qp, no_grh), EINVAL);
  EXPECT_EQ(d.fake.state(qp), IBV_QPS_INIT);
  EXPECT_EQ(d.Modify(qp, d.Rtr(qp)), 0);
}

TEST(StrictFakeIbvTest, AGidIndexOutsideTheTableIsRefused) {
  Profile one_gid = Profile::Rxe();
  one_gid.gid_table.resize(1);
  FakeDevice d(one_gid);
  ibv_qp* qp = d.Create();
  ASSERT_EQ(d.Modify(qp, d.Init()), 0);
  QpTransition rtr = d.Rtr(qp);
  rtr.attr.ah_attr.grh.sgid_index = 1;
  EXPECT_EQ(d.Modify(qp, rtr), EINVAL);
}

TEST(StrictFakeIbvTest, TheRxeBefore514ProfileRefusesAWindow) {
  FakeDevice d(Profile::RxeBefore514());
  errno = 0;
  EXPECT_EQ(d.fake.AllocMw(nullptr, IBV_MW_TYPE_2), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(d.fake.windows_allocated(), 0);
  ibv_qp* qp = d.Ready();
  ibv_send_wr bind = {};
  bind.opcode = IBV_WR_BIND_MW;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(d.fake.PostSend(qp, &bind, &bad), EINVAL);
  EXPECT_EQ(bad, &bind);
}

TEST(StrictFakeIbvTest, ExhaustedWindowsAreAnEinvalOnRxeNotAnEnomem) {
  for (Profile profile : {Profile::Mlx5(), Profile::Rxe()}) {
    profile.max_mw = 2;
    StrictFakeIbv fake(profile);
    ASSERT_NE(fake.AllocMw(nullptr, IBV_MW_TYPE_2), nullptr);
    ASSERT_NE(fake.AllocMw(nullptr, IBV_MW_TYPE_2), nullptr);
    errno = 0;
    EXPECT_EQ(fake.AllocMw(nullptr, IBV_MW_TYPE_2), nullptr);
    EXPECT_EQ(errno, profile.name == "rxe" ? EINVAL : ENOMEM) << profile.name;
    EXPECT_EQ(fake.windows_allocated(), 2);
  }
}

TEST(StrictFakeIbvTest, TheSiwProfileRefusesAtomicsAndWriteWithImmWithANegativeErrno) {
  FakeDevice d(Profile::Siw());
  ibv_qp* qp = d.Ready();
  ibv_sge sge;
  ibv_send_wr wr = Write(1, 8, true, &sge);
  ibv_send_wr* bad = nullptr;
  for (ibv_wr_opcode opcode : {IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP,
                               IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_BIND_MW}) {
    wr.opcode = opcode;
    EXPECT_EQ(d.fake.PostSend(qp, &wr, &bad), -EINVAL) << opcode;
    EXPECT_EQ(bad, &wr);
  }
  EXPECT_EQ(d.fake.AllocMw(nullptr, IBV_MW_TYPE_2), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  wr.opcode = IBV_WR_RDMA_WRITE;
  EXPECT_EQ(d.fake.PostSend(qp, &wr, &bad), 0);
  EXPECT_EQ(d.PollAll(qp).size(), 1u);
}

TEST(StrictFakeIbvTest, Mlx5RefusesAWindowLongerThan2GiB) {
  constexpr uint64_t k2GiB = uint64_t{1} << 31;
  for (const Profile& profile : {Profile::Mlx5(), Profile::Rxe()}) {
    SCOPED_TRACE(profile.name);
    FakeDevice d(profile);
    ibv_qp* qp = d.Ready();
    // A region the fake never touches: only its bounds matter.
    char byte = 0;
    ibv_mr* mr = d.fake.RegisterMr(&byte, 2 * k2GiB, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ibv_mw* mw = d.fake.AllocMw(nullptr, IBV_MW_TYPE_2);
    ASSERT_NE(mw, nullptr);
    ibv_send_wr bind = {};
    bind.opcode = IBV_WR_BIND_MW;
    bind.bind_mw.mw = mw;
    bind.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    bind.bind_mw.bind_info.mr = mr;
    bind.bind_mw.bind_info.addr = reinterpret_cast<uint64_t>(&byte);
    bind.bind_mw.bind_info.length = k2GiB + 4096;
    bind.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
    ibv_send_wr* bad = nullptr;
    const int expected = profile.name == "mlx5" ? EOPNOTSUPP : 0;
    EXPECT_EQ(d.fake.PostSend(qp, &bind, &bad), expected);
    EXPECT_EQ(d.fake.state(qp), IBV_QPS_RTS);
    if (expected == 0) continue;
    bind.bind_mw.bind_info.length = k2GiB;
    EXPECT_EQ(d.fake.PostSend(qp, &bind, &bad), 0);
    EXPECT_TRUE(d.fake.WindowAllows(qp, bind.bind_mw.rkey, bind.bind_mw.bind_info.addr, 8,
                                    IBV_ACCESS_REMOTE_READ));
    EXPECT_EQ(d.fake.DeallocMw(mw), 0);
  }
}

TEST(StrictFakeIbvTest, AWriteAboveTheMaxMessageSizeCompletesWithALocalLengthError) {
  FakeDevice d(Profile::Rxe());
  ibv_qp* qp = d.Ready();
  ibv_sge sge[2];
  ibv_send_wr wrs[2] = {Write(1, 0x800000, false, &sge[0]), Write(2, 0x800001, false, &sge[1])};
  wrs[0].next = &wrs[1];
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(d.fake.PostSend(qp, wrs, &bad), 0);
  const std::vector<ibv_wc> done = d.PollAll(qp);
  ASSERT_EQ(done.size(), 1u) << "the unsignalled error is reported, the success is not";
  EXPECT_EQ(done[0].wr_id, 2u);
  EXPECT_EQ(done[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(d.fake.state(qp), IBV_QPS_ERR);
}

TEST(StrictFakeIbvTest, TheErrorStateFlushesEveryOutstandingSendSignalledOrNot) {
  FakeDevice d(Profile::Mlx5());
  ibv_qp* qp = d.Ready();
  ibv_sge sge[3];
  ibv_send_wr wrs[3] = {Write(1, 8, false, &sge[0]), Write(2, 8, false, &sge[1]),
                        Write(3, 8, false, &sge[2])};
  wrs[0].next = &wrs[1];
  wrs[1].next = &wrs[2];
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(d.fake.PostSend(qp, wrs, &bad), 0);
  EXPECT_TRUE(d.PollAll(qp).empty());
  EXPECT_EQ(d.fake.outstanding_sends(qp), 3);
  ibv_qp_attr err = {};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(d.fake.ModifyQp(qp, &err, IBV_QP_STATE), 0);
  const std::vector<ibv_wc> done = d.PollAll(qp);
  ASSERT_EQ(done.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(done[i].wr_id, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(done[i].status, IBV_WC_WR_FLUSH_ERR);
  }
  EXPECT_EQ(d.fake.outstanding_sends(qp), 0);
}

TEST(StrictFakeIbvTest, TheFlushStartsAfterTheLastQueuedCompletion) {
  FakeDevice d(Profile::Rxe());
  ibv_qp* qp = d.Ready();
  ibv_sge sge[4];
  // A signalled request's completion covers the unsignalled ones before it.
  ibv_send_wr wrs[4] = {Write(1, 8, false, &sge[0]), Write(2, 8, true, &sge[1]),
                        Write(3, 8, false, &sge[2]), Write(4, 8, false, &sge[3])};
  for (int i = 0; i < 3; ++i) wrs[i].next = &wrs[i + 1];
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(d.fake.PostSend(qp, wrs, &bad), 0);
  ibv_qp_attr err = {};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(d.fake.ModifyQp(qp, &err, IBV_QP_STATE), 0);
  const std::vector<ibv_wc> done = d.PollAll(qp);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].wr_id, 2u);
  EXPECT_EQ(done[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(done[1].wr_id, 3u);
  EXPECT_EQ(done[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(done[2].wr_id, 4u);
  EXPECT_EQ(done[2].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(d.fake.outstanding_sends(qp), 0);
  EXPECT_FALSE(d.fake.cq_overrun(qp->send_cq));
}

}  // namespace
}  // namespace dreplay::verbs::ibverbs
