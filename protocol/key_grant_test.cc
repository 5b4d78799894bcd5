// Copyright dreplay authors.

#include "protocol/key_grant.h"

#include <cstring>

#include "gtest/gtest.h"

namespace dreplay::protocol {
namespace {

constexpr char kToken[] = "grant-test-token-0123";

Hello MakeHello() {
  Hello h;
  h.role = Role::kActor;
  h.actor_id = 2;
  h.grant = WireRegion{0x2000, kGrantRegionBytes, 98, 0};
  h.server_nonce = *RandomNonce();
  h.client_nonce = *RandomNonce();
  return h;
}

RegionDirectory Granted() {
  RegionDirectory d;
  d.Set(RegionKind::kControl, WireRegion{0x10000, 4096, 0x1234, 0});
  d.Set(RegionKind::kSlots, WireRegion{0x20000, 8192, 0x5678, 0});
  d.lease = 1;
  d.resume_sequence = 77;
  return d;
}

TEST(KeyGrantTest, AGrantMatchingTheAcceptReplyIsTaken) {
  const Hello hello = MakeHello();
  const RegionDirectory granted = Granted();
  const RegionDirectory accepted = WithoutKeys(granted);
  EXPECT_EQ(accepted.Get(RegionKind::kSlots).rkey, 0u);
  EXPECT_EQ(accepted.Get(RegionKind::kSlots).addr, 0x20000u);
  const KeyGrantMessage grant = MakeKeyGrant(kToken, hello, granted);
  EXPECT_EQ(grant.commit, GrantCommitValue(hello));
  EXPECT_NE(grant.commit, 0u);
  absl::StatusOr<RegionDirectory> d = CheckKeyGrant(grant, accepted, hello, kToken);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->Get(RegionKind::kSlots).rkey, 0x5678u);
  EXPECT_EQ(d->resume_sequence, 77u);
}

TEST(KeyGrantTest, AGrantFromAnotherTokenOrForAnotherHelloIsRefused) {
  const Hello hello = MakeHello();
  const RegionDirectory granted = Granted();
  const RegionDirectory accepted = WithoutKeys(granted);
  const KeyGrantMessage forged = MakeKeyGrant("not-the-token", hello, granted);
  EXPECT_EQ(CheckKeyGrant(forged, accepted, hello, kToken).status().code(),
            absl::StatusCode::kPermissionDenied);
  const KeyGrantMessage other = MakeKeyGrant(kToken, MakeHello(), granted);
  EXPECT_EQ(CheckKeyGrant(other, accepted, hello, kToken).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Without a token there is no proof to check (an insecure server).
  EXPECT_TRUE(CheckKeyGrant(MakeKeyGrant("", hello, granted), accepted, hello, "").ok());
}

TEST(KeyGrantTest, KeysTravelSealedToThisConnectionsTokenHolder) {
  const Hello hello = MakeHello();
  const RegionDirectory granted = Granted();
  const KeyGrantMessage grant = MakeKeyGrant(kToken, hello, granted);
  // On the wire: neither key is the real one; the rest of the directory is.
  EXPECT_NE(grant.directory.Get(RegionKind::kSlots).rkey, 0x5678u);
  EXPECT_NE(grant.directory.Get(RegionKind::kControl).rkey, 0x1234u);
  EXPECT_EQ(grant.directory.Get(RegionKind::kSlots).addr, 0x20000u);
  // A relay that forwarded the hello but holds no token unseals garbage.
  RegionDirectory relay = grant.directory;
  SealKeys("a-relay-guessing-the-token", hello, &relay);
  EXPECT_NE(relay.Get(RegionKind::kSlots).rkey, 0x5678u);
  // The same grant sealed for another connection's hello differs.
  const KeyGrantMessage other = MakeKeyGrant(kToken, MakeHello(), granted);
  EXPECT_NE(other.directory.Get(RegionKind::kSlots).rkey,
            grant.directory.Get(RegionKind::kSlots).rkey);
  // Sealing twice is the identity.
  RegionDirectory twice = granted;
  SealKeys(kToken, hello, &twice);
  SealKeys(kToken, hello, &twice);
  EXPECT_EQ(std::memcmp(&twice, &granted, sizeof(granted)), 0);
}

TEST(KeyGrantTest, AGrantThatDisagreesWithTheAcceptReplyIsRefused) {
  const Hello hello = MakeHello();
  RegionDirectory granted = Granted();
  const RegionDirectory accepted = WithoutKeys(granted);
  granted.regions[static_cast<uint32_t>(RegionKind::kSlots)].length = 1 << 20;  // wider
  EXPECT_EQ(
      CheckKeyGrant(MakeKeyGrant(kToken, hello, granted), accepted, hello, kToken).status().code(),
      absl::StatusCode::kFailedPrecondition);
  RegionDirectory keyless = Granted();
  keyless.regions[static_cast<uint32_t>(RegionKind::kControl)].rkey = 0;
  EXPECT_EQ(CheckKeyGrant(MakeKeyGrant(kToken, hello, keyless), WithoutKeys(keyless), hello, kToken)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  KeyGrantMessage bad = MakeKeyGrant(kToken, hello, Granted());
  bad.magic ^= 1;
  EXPECT_FALSE(CheckKeyGrant(bad, accepted, hello, kToken).ok());
}

}  // namespace
}  // namespace dreplay::protocol
