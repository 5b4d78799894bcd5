// Copyright dreplay authors.
//
// The ibverbs setup messages without a device: a hello round-trips, and
// CheckPeerInfo refuses a peer's queue pair description that no queue pair
// may be modified against.

#include "verbs/ibverbs_wire.h"

#include <string>

#include "gtest/gtest.h"

namespace dreplay::verbs::ibverbs {
namespace {

PeerInfo Sane() {
  PeerInfo info;
  info.qpn = 0x1234;
  info.psn = 0x42;
  info.gid.raw[10] = 0xff;
  info.gid.raw[11] = 0xff;
  info.gid.raw[15] = 7;
  info.lid = 3;
  info.mtu = IBV_MTU_4096;
  info.initiator_depth = 16;
  info.responder_resources = 16;
  return info;
}

TEST(IbverbsWireTest, AHelloRoundTripsAndKeepsAWideQpnForTheCheck) {
  SetupMessage m;
  m.kind = SetupKind::kHello;
  m.info = Sane();
  m.payload = "payload";
  absl::StatusOr<SetupMessage> back = DecodeSetup(EncodeSetup(m), "peer");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->info.qpn, 0x1234u);
  EXPECT_EQ(back->payload, "payload");
  m.info.qpn = 0x1000001;  // 25 bits: not masked into a valid-looking QPN
  back = DecodeSetup(EncodeSetup(m), "peer");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(CheckPeerInfo(back->info, /*ethernet=*/true, "peer").ok());
}

TEST(IbverbsWireTest, CheckPeerInfoAcceptsASaneQueuePair) {
  EXPECT_TRUE(CheckPeerInfo(Sane(), /*ethernet=*/true, "peer").ok());
  EXPECT_TRUE(CheckPeerInfo(Sane(), /*ethernet=*/false, "peer").ok());
}

TEST(IbverbsWireTest, CheckPeerInfoRefusesManagementAndWideQpns) {
  for (uint32_t qpn : {0u, 1u, 0x1000000u}) {
    PeerInfo info = Sane();
    info.qpn = qpn;
    const absl::Status s = CheckPeerInfo(info, true, "10.0.0.2:7000");
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << qpn;
    EXPECT_NE(s.message().find("10.0.0.2:7000"), std::string::npos) << s;
  }
  PeerInfo top = Sane();
  top.qpn = 0xffffff;
  EXPECT_TRUE(CheckPeerInfo(top, true, "peer").ok());
}

TEST(IbverbsWireTest, CheckPeerInfoRefusesAZeroGidWhereItRoutes) {
  PeerInfo info = Sane();
  info.gid = {};
  EXPECT_FALSE(CheckPeerInfo(info, /*ethernet=*/true, "peer").ok());  // RoCE
  EXPECT_TRUE(CheckPeerInfo(info, /*ethernet=*/false, "peer").ok());  // IB, by LID
  info.lid = 0;
  EXPECT_FALSE(CheckPeerInfo(info, /*ethernet=*/false, "peer").ok());  // IB, no LID
}

TEST(IbverbsWireTest, CheckPeerInfoRefusesAMulticastLidOnInfiniBand) {
  PeerInfo info = Sane();
  info.lid = 0xc000;
  EXPECT_FALSE(CheckPeerInfo(info, /*ethernet=*/false, "peer").ok());
  EXPECT_TRUE(CheckPeerInfo(info, /*ethernet=*/true, "peer").ok());  // RoCE ignores the LID
}

}  // namespace
}  // namespace dreplay::verbs::ibverbs
