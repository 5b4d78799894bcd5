// Copyright dreplay authors.
//
// The ibverbs setup messages without a device: a hello round-trips, and
// CheckPeerInfo refuses a peer's queue pair description that no queue pair
// may be modified against.

#include "verbs/ibverbs_wire.h"

#include <cstddef>
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

TEST(IbverbsWireTest, TheGidKindRoundTripsAndAnUnknownOneIsRefused) {
  SetupMessage m;
  m.kind = SetupKind::kAccept;
  m.info = Sane();
  m.info.gid_kind = GidKind::kRoceV1;
  absl::StatusOr<SetupMessage> back = DecodeSetup(EncodeSetup(m), "peer");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->info.gid_kind, GidKind::kRoceV1);
  std::string frame = EncodeSetup(m);
  frame[offsetof(SetupHeader, gid_kind)] = 9;
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeSetup(frame, "peer").status()));
}

TEST(IbverbsWireTest, GidsOfAnotherRoceVersionOrIpFamilyAreRefusedByName) {
  const PeerInfo v4 = Sane();  // RoCE v2, ::ffff:0.0.0.7
  ibv_gid v6 = {};
  v6.raw[0] = 0xfe;
  v6.raw[1] = 0x80;
  v6.raw[15] = 9;
  EXPECT_TRUE(CheckGidCompatible(GidKind::kRoceV2, v4.gid, v4, "peer").ok());
  const absl::Status family = CheckGidCompatible(GidKind::kRoceV2, v6, v4, "10.0.0.2:7000");
  EXPECT_TRUE(absl::IsFailedPrecondition(family)) << family;
  EXPECT_NE(family.message().find("IP family"), absl::string_view::npos) << family;
  EXPECT_NE(family.message().find("--gid_index"), absl::string_view::npos) << family;
  const absl::Status version = CheckGidCompatible(GidKind::kRoceV1, v4.gid, v4, "peer");
  EXPECT_TRUE(absl::IsFailedPrecondition(version)) << version;
  EXPECT_NE(version.message().find("RoCE v1"), absl::string_view::npos) << version;
  PeerInfo v6_peer = v4;
  v6_peer.gid = v6;
  EXPECT_TRUE(CheckGidCompatible(GidKind::kRoceV2, v6, v6_peer, "peer").ok());
}

}  // namespace
}  // namespace dreplay::verbs::ibverbs
