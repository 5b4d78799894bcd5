// Copyright dreplay authors.

#include "verbs/ibverbs_attributes.h"

#include <cstring>

#include "gtest/gtest.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::ibverbs {
namespace {

// The masks the kernel requires for an RC queue pair (IB spec table of
// QP state transitions), written out here independently of the code.
constexpr int kInitRequired = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRtrRequired = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsRequired = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                             IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

// A RoCE device as OpenDevice would leave it, without opening anything.
void MakeRoceDevice(Device* device) {
  device->name = "fake0";
  device->port = 1;
  device->port_attr.link_layer = IBV_LINK_LAYER_ETHERNET;
  device->attr.atomic_cap = IBV_ATOMIC_HCA;
  device->gid_index = 3;
  device->traffic_class = 106;
}

PeerInfo Peer(uint32_t qpn, uint32_t psn) {
  PeerInfo peer;
  peer.qpn = qpn;
  peer.psn = psn;
  peer.gid.raw[10] = 0xff;
  peer.gid.raw[11] = 0xff;
  peer.gid.raw[15] = 7;
  peer.lid = 0;
  peer.initiator_depth = 8;
  peer.responder_resources = 16;
  return peer;
}

TEST(QpTransitionTest, InitHasExactlyTheRequiredMaskAndThePort) {
  Device device;
  MakeRoceDevice(&device);
  device.port = 2;
  const QpTransition init = BuildInitTransition(device);
  EXPECT_EQ(init.mask, kInitRequired);
  EXPECT_EQ(init.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(init.attr.port_num, 2);
  EXPECT_EQ(init.attr.pkey_index, 0);
  EXPECT_EQ(init.attr.qp_access_flags,
            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
}

TEST(QpTransitionTest, InitOffersNoAtomicsOnADeviceWithout) {
  Device device;
  MakeRoceDevice(&device);
  device.attr.atomic_cap = IBV_ATOMIC_NONE;
  EXPECT_EQ(BuildInitTransition(device).attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC, 0);
}

TEST(QpTransitionTest, RtrHasExactlyTheRequiredMaskAndThePeersAddress) {
  Device device;
  MakeRoceDevice(&device);
  QueuePairOptions options;
  options.min_rnr_timer = 14;
  const PeerInfo local = Peer(0x11, 100);
  const PeerInfo remote = Peer(0x22, 200);
  const absl::StatusOr<QpTransition> rtr =
      BuildRtrTransition(device, options, local, remote, IBV_MTU_1024);
  ASSERT_TRUE(rtr.ok()) << rtr.status();
  EXPECT_EQ(rtr->mask, kRtrRequired);
  EXPECT_EQ(rtr->attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(rtr->attr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(rtr->attr.dest_qp_num, 0x22u);
  EXPECT_EQ(rtr->attr.rq_psn, 200u);
  EXPECT_EQ(rtr->attr.max_dest_rd_atomic, 16);
  EXPECT_EQ(rtr->attr.min_rnr_timer, 14);
  EXPECT_EQ(rtr->attr.ah_attr.port_num, 1);
}

TEST(QpTransitionTest, RtrOnRoceCarriesTheGrhWithTheTrafficClass) {
  Device device;
  MakeRoceDevice(&device);
  const PeerInfo remote = Peer(0x22, 200);
  const absl::StatusOr<QpTransition> rtr =
      BuildRtrTransition(device, QueuePairOptions(), Peer(0x11, 1), remote, IBV_MTU_4096);
  ASSERT_TRUE(rtr.ok()) << rtr.status();
  const ibv_ah_attr& ah = rtr->attr.ah_attr;
  EXPECT_EQ(ah.is_global, 1);
  EXPECT_EQ(ah.grh.traffic_class, 106);
  EXPECT_EQ(ah.grh.sgid_index, 3);
  EXPECT_GT(ah.grh.hop_limit, 1);
  EXPECT_EQ(0, std::memcmp(ah.grh.dgid.raw, remote.gid.raw, sizeof(remote.gid.raw)));
}

TEST(QpTransitionTest, RtrOnRoceRefusesAnEmptyPeerGid) {
  Device device;
  MakeRoceDevice(&device);
  PeerInfo remote = Peer(0x22, 200);
  remote.gid = ibv_gid{};
  EXPECT_TRUE(absl::IsInvalidArgument(
      BuildRtrTransition(device, QueuePairOptions(), Peer(0x11, 1), remote, IBV_MTU_1024)
          .status()));
}

TEST(QpTransitionTest, RtrOnInfinibandWithALidHasNoGrh) {
  Device device;
  MakeRoceDevice(&device);
  device.port_attr.link_layer = IBV_LINK_LAYER_INFINIBAND;
  PeerInfo remote = Peer(0x22, 200);
  remote.lid = 9;
  const absl::StatusOr<QpTransition> rtr =
      BuildRtrTransition(device, QueuePairOptions(), Peer(0x11, 1), remote, IBV_MTU_2048);
  ASSERT_TRUE(rtr.ok()) << rtr.status();
  EXPECT_EQ(rtr->attr.ah_attr.is_global, 0);
  EXPECT_EQ(rtr->attr.ah_attr.dlid, 9);
  EXPECT_EQ(rtr->mask, kRtrRequired);
}

TEST(QpTransitionTest, RtsHasExactlyTheRequiredMaskAndAFiniteRnrRetry) {
  QueuePairOptions options;
  options.ack_timeout = 14;
  options.retry_cnt = 5;
  const QpTransition rts = BuildRtsTransition(options, Peer(0x11, 4242), 8);
  EXPECT_EQ(rts.mask, kRtsRequired);
  EXPECT_EQ(rts.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(rts.attr.sq_psn, 4242u);
  EXPECT_EQ(rts.attr.timeout, 14);
  EXPECT_EQ(rts.attr.retry_cnt, 5);
  EXPECT_EQ(rts.attr.max_rd_atomic, 8);
  // The default: 7 would retry forever on hardware.
  EXPECT_EQ(rts.attr.rnr_retry, kDefaultRnrRetry);
  EXPECT_LT(rts.attr.rnr_retry, 7);
}

TEST(ToIbvAccessTest, MapsEachFlagOneForOne) {
  EXPECT_EQ(ToIbvAccess(0), 0);
  EXPECT_EQ(ToIbvAccess(kLocalWrite), IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(ToIbvAccess(kRemoteRead), IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(ToIbvAccess(kLocalWrite | kRemoteWrite),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(ToIbvAccess(kLocalWrite | kRemoteAtomic),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
}

TEST(ToIbvAccessTest, AddsNoLocalWriteOfItsOwn) {
  // Remote write without local write is refused before the mapping
  // (access_rules.h); the mapping itself never widens what was asked.
  EXPECT_EQ(ToIbvAccess(kRemoteWrite) & IBV_ACCESS_LOCAL_WRITE, 0);
  EXPECT_EQ(ToIbvAccess(kRemoteAtomic) & IBV_ACCESS_LOCAL_WRITE, 0);
}

}  // namespace
}  // namespace dreplay::verbs::ibverbs
