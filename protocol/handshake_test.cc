// Copyright dreplay authors.

#include "protocol/handshake.h"

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace dreplay::protocol {
namespace {

LayoutConfig Config(uint32_t max_actors) {
  LayoutConfig c;
  c.capacity = 1024;
  c.slot_size = 160;
  c.batch_size = 32;
  c.staging_depth = 4;
  c.param_bytes = 1000;
  c.max_actors = max_actors;
  return c;
}

constexpr absl::string_view kToken = "s3cret";

Hello ActorHello() {
  Hello h;
  h.role = Role::kActor;
  h.actor_id = 7;
  h.heartbeat = WireRegion{0x1000, 64, 99, 0};
  h.grant = WireRegion{0x2000, kGrantRegionBytes, 98, 0};
  return h;
}

TEST(HandshakeTest, HelloRoundTripsThroughItsWireForm) {
  absl::StatusOr<std::string> wire = EncodeHello(ActorHello(), kToken);
  ASSERT_TRUE(wire.ok()) << wire.status();
  EXPECT_EQ(wire->size(), sizeof(HelloMessage));
  absl::StatusOr<Hello> back = DecodeHello(*wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->role, Role::kActor);
  EXPECT_EQ(back->actor_id, 7u);
  EXPECT_TRUE(CheckHelloMac(*back, kToken));
  EXPECT_EQ(back->heartbeat.addr, 0x1000u);
  EXPECT_EQ(back->heartbeat.rkey, 99u);
}

TEST(HandshakeTest, LearnerCacheFlagRoundTripsForLearnersOnly) {
  Hello learner;
  learner.role = Role::kLearner;
  learner.grant = WireRegion{0x2000, kGrantRegionBytes, 98, 0};
  learner.learner_cache = true;
  absl::StatusOr<std::string> wire = EncodeHello(learner, kToken);
  ASSERT_TRUE(wire.ok()) << wire.status();
  absl::StatusOr<Hello> back = DecodeHello(*wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->learner_cache);
  learner.learner_cache = false;
  back = DecodeHello(*EncodeHello(learner, kToken));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->learner_cache);

  Hello actor = ActorHello();
  actor.learner_cache = true;
  EXPECT_EQ(EncodeHello(actor, kToken).status().code(), absl::StatusCode::kInvalidArgument);
  // A forged hello: an actor with the flag, or an unknown flag bit.
  actor.learner_cache = false;
  std::string forged = *EncodeHello(actor, kToken);
  HelloMessage m;
  std::memcpy(&m, forged.data(), sizeof(m));
  for (uint32_t flags : {kHelloFlagLearnerCache, 1u << 7}) {
    m.flags = flags;
    std::memcpy(forged.data(), &m, sizeof(m));
    EXPECT_EQ(DecodeHello(forged).status().code(), absl::StatusCode::kInvalidArgument) << flags;
  }
}

TEST(HandshakeTest, LearnerPlacementFlagRoundTripsForLearnersOnly) {
  Hello learner;
  learner.role = Role::kLearner;
  learner.grant = WireRegion{0x2000, kGrantRegionBytes, 98, 0};
  learner.learner_placement = true;
  absl::StatusOr<std::string> wire = EncodeHello(learner, kToken);
  ASSERT_TRUE(wire.ok()) << wire.status();
  absl::StatusOr<Hello> back = DecodeHello(*wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->learner_placement);
  EXPECT_FALSE(back->learner_cache);
  EXPECT_TRUE(CheckHelloMac(*back, kToken));
  // The flag is under the MAC: cleared in transit, the MAC no longer holds.
  Hello cleared = *back;
  cleared.learner_placement = false;
  EXPECT_FALSE(CheckHelloMac(cleared, kToken));
  // Not with the transfer-once cache (buffer placement), not for others.
  learner.learner_cache = true;
  EXPECT_EQ(EncodeHello(learner, kToken).status().code(), absl::StatusCode::kInvalidArgument);
  Hello monitor;
  monitor.role = Role::kMonitor;
  monitor.grant = learner.grant;
  monitor.learner_placement = true;
  EXPECT_EQ(EncodeHello(monitor, kToken).status().code(), absl::StatusCode::kInvalidArgument);
  // Forged: a monitor with the flag, a learner with both flags.
  learner.learner_cache = false;
  std::string forged = *EncodeHello(learner, kToken);
  HelloMessage m;
  std::memcpy(&m, forged.data(), sizeof(m));
  m.flags = kHelloFlagLearnerPlacement | kHelloFlagLearnerCache;
  std::memcpy(forged.data(), &m, sizeof(m));
  EXPECT_EQ(DecodeHello(forged).status().code(), absl::StatusCode::kInvalidArgument);
  m.flags = kHelloFlagLearnerPlacement;
  m.role = static_cast<uint32_t>(Role::kMonitor);
  std::memcpy(forged.data(), &m, sizeof(m));
  EXPECT_EQ(DecodeHello(forged).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HandshakeTest, RejectsAnotherLayoutVersionNamingBothVersions) {
  std::string wire = *EncodeHello(ActorHello(), kToken);
  const uint32_t other = kLayoutVersion + 41;
  std::memcpy(&wire[offsetof(HelloMessage, layout_version)], &other, sizeof(other));
  // A newer client may also have a longer hello: the version is reported first.
  wire.append(16, '\0');
  const absl::Status s = DecodeHello(wire).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("client speaks layout version " + std::to_string(other)),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("server speaks layout version " + std::to_string(kLayoutVersion)),
            std::string::npos)
      << s;
}

TEST(HandshakeTest, RejectsGarbageShortAndWrongSizedPayloads) {
  EXPECT_EQ(DecodeHello("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeHello("GET / HTTP/1.1\r\n\r\n").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string wire = *EncodeHello(ActorHello(), kToken);
  EXPECT_EQ(DecodeHello(wire.substr(0, wire.size() - 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string bad_role = wire;
  const uint32_t role = 9;
  std::memcpy(&bad_role[offsetof(HelloMessage, role)], &role, sizeof(role));
  EXPECT_NE(DecodeHello(bad_role).status().message().find("unknown role 9"), std::string::npos);
  Hello tiny_heartbeat = ActorHello();
  tiny_heartbeat.heartbeat.length = 4;
  EXPECT_EQ(DecodeHello(*EncodeHello(tiny_heartbeat, kToken)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HandshakeTest, EncodeRefusesLongTokensAndActorIdsOfOtherRoles) {
  Hello h = ActorHello();
  EXPECT_EQ(EncodeHello(h, std::string(kMaxAuthTokenBytes + 1, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
  h.role = Role::kMonitor;
  EXPECT_EQ(EncodeHello(h, kToken).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HandshakeTest, AHelloWithoutAKeyGrantRegionIsRefused) {
  Hello h = ActorHello();
  h.grant = WireRegion{};
  absl::StatusOr<Hello> back = DecodeHello(*EncodeHello(h, kToken));
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(back.status().message().find("key grant region"), std::string::npos);
  h.grant = WireRegion{0x2000, kGrantRegionBytes - 8, 98, 0};
  EXPECT_FALSE(DecodeHello(*EncodeHello(h, kToken)).ok());
}

TEST(HandshakeTest, TheHelloCarriesAMacAndNeverTheToken) {
  const std::string token = "a-long-and-recognisable-token-0123456789";
  Hello h = ActorHello();
  h.server_nonce = *RandomNonce();
  h.client_nonce = *RandomNonce();
  const std::string wire = *EncodeHello(h, token);
  EXPECT_EQ(wire.find(token), std::string::npos);
  EXPECT_EQ(wire.find(token.substr(0, 8)), std::string::npos);
  absl::StatusOr<Hello> back = DecodeHello(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->server_nonce, h.server_nonce);
  EXPECT_EQ(back->client_nonce, h.client_nonce);
  EXPECT_TRUE(CheckHelloMac(*back, token));
  EXPECT_FALSE(CheckHelloMac(*back, token + "x"));
  EXPECT_FALSE(CheckHelloMac(*back, ""));
}

TEST(HandshakeTest, TheMacCoversEveryFieldOfTheHello) {
  Hello h = ActorHello();
  h.server_nonce = *RandomNonce();
  const std::string wire = *EncodeHello(h, kToken);
  // Flip one bit of each byte before the MAC: the decoded hello either is
  // refused or fails its MAC.
  for (size_t i = 0; i < offsetof(HelloMessage, mac); ++i) {
    std::string forged = wire;
    forged[i] = static_cast<char>(forged[i] ^ 0x01);
    absl::StatusOr<Hello> back = DecodeHello(forged);
    if (back.ok()) {
      EXPECT_FALSE(CheckHelloMac(*back, kToken)) << "byte " << i;
    }
  }
  // The same hello claiming another role fails (a role's MAC is not
  // another role's).
  absl::StatusOr<Hello> back = DecodeHello(wire);
  ASSERT_TRUE(back.ok());
  back->role = Role::kLearner;
  back->actor_id = 0;
  EXPECT_FALSE(CheckHelloMac(*back, kToken));
}

TEST(HandshakeTest, AChallengeRoundTripsThroughARefusal) {
  const Nonce nonce = *RandomNonce();
  EXPECT_NE(nonce, *RandomNonce());
  const absl::Status refusal =
      absl::PermissionDeniedError("connection to 1.2.3.4:5 rejected: " + ChallengeReason(nonce));
  absl::StatusOr<Nonce> back = ParseChallenge(refusal);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, nonce);
  EXPECT_TRUE(absl::IsNotFound(ParseChallenge(absl::PermissionDeniedError("no")).status()));
  EXPECT_TRUE(
      absl::IsNotFound(ParseChallenge(absl::UnavailableError(ChallengeReason(nonce))).status()));
  EXPECT_TRUE(
      absl::IsNotFound(ParseChallenge(absl::PermissionDeniedError("[challenge] 12zz")).status()));

  EXPECT_TRUE(IsChallengeRequest(EncodeChallengeRequest(Role::kMonitor)));
  EXPECT_FALSE(IsChallengeRequest(*EncodeHello(ActorHello(), kToken)));
  std::string old = EncodeChallengeRequest(Role::kActor);
  const uint32_t other = kLayoutVersion - 1;
  std::memcpy(&old[offsetof(ChallengeRequestMessage, layout_version)], &other, sizeof(other));
  EXPECT_FALSE(IsChallengeRequest(old));
  EXPECT_EQ(DecodeHello(old).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HandshakeTest, TheAcceptProofBindsTokenHelloAndDirectory) {
  Hello h = ActorHello();
  h.server_nonce = *RandomNonce();
  h.client_nonce = *RandomNonce();
  h = *DecodeHello(*EncodeHello(h, kToken));
  RegionDirectory d;
  d.Set(RegionKind::kControl, WireRegion{0x1000, 64, 1, 0});
  absl::StatusOr<AcceptReply> reply = DecodeAccept(EncodeAccept(d, AcceptProof(kToken, h, d)));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(CheckAcceptProof(*reply, h, kToken).ok());
  EXPECT_TRUE(CheckAcceptProof(*reply, h, "").ok());  // an open server proves nothing
  EXPECT_EQ(CheckAcceptProof(*reply, h, "other").code(), absl::StatusCode::kPermissionDenied);
  Hello other_nonce = h;
  other_nonce.client_nonce[0] ^= 1;
  EXPECT_EQ(CheckAcceptProof(*reply, other_nonce, kToken).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(DecodeAccept("short").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HandshakeTest, RoleAccessFollowsTheLayoutTable) {
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kLeases, false), kAccessRead);
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kSlots, false), kAccessWrite);
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kStaging, false), 0u);
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kMailbox, false), 0u);
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kParams, false), kAccessRead);
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kStats, false), 0u);
  // The slots, commit words and journal: the learner placement only.
  for (RegionKind kind : {RegionKind::kSlots, RegionKind::kCommits, RegionKind::kLeases}) {
    EXPECT_EQ(RoleAccess(Role::kLearner, kind, true), kAccessRead) << RegionKindName(kind);
    EXPECT_EQ(RoleAccess(Role::kLearner, kind, false), 0u) << RegionKindName(kind);
  }
  // The flag means nothing for the other roles.
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kSlots, true), kAccessWrite);
  EXPECT_EQ(RoleAccess(Role::kMonitor, RegionKind::kSlots, true), 0u);
  EXPECT_EQ(RoleAccess(Role::kLearner, RegionKind::kStaging, false), kAccessRead);
  EXPECT_EQ(RoleAccess(Role::kLearner, RegionKind::kMailbox, false), kAccessWrite);
  EXPECT_EQ(RoleAccess(Role::kLearner, RegionKind::kParams, false), kAccessRead | kAccessWrite);
  EXPECT_EQ(RoleAccess(Role::kLearner, RegionKind::kStats, false), kAccessRead);
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    const auto kind = static_cast<RegionKind>(k);
    const uint32_t access = RoleAccess(Role::kMonitor, kind, false);
    EXPECT_EQ(access & (kAccessWrite | kAccessAtomic), 0u) << RegionKindName(kind);
    const bool readable = kind == RegionKind::kControl || kind == RegionKind::kStats ||
                          kind == RegionKind::kActors || kind == RegionKind::kLeases;
    EXPECT_EQ(access != 0, readable) << RegionKindName(kind);
  }
}

TEST(HandshakeTest, DirectoryRoundTripsAndIsCheckedAgainstTheRole) {
  RegionDirectory d;
  uint64_t addr = 0x10000;
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    const auto kind = static_cast<RegionKind>(k);
    if (RoleNeedsRegion(Role::kMonitor, kind, Config(4), false)) {
      d.Set(kind, WireRegion{addr, 64, k + 1, 0});
      addr += 0x1000;
    }
  }
  absl::StatusOr<AcceptReply> reply = DecodeAccept(EncodeAccept(d, Mac{}));
  ASSERT_TRUE(reply.ok()) << reply.status();
  const RegionDirectory* back = &reply->directory;
  EXPECT_TRUE(CheckDirectoryForRole(*back, Role::kMonitor, Config(4), false).ok());
  // Without an actors region configured, the monitor must not get one.
  EXPECT_EQ(CheckDirectoryForRole(*back, Role::kMonitor, Config(0), false).code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status s = CheckDirectoryForRole(*back, Role::kLearner, Config(4), true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("lacks region slots"), std::string::npos) << s;
}

TEST(HandshakeTest, OnlyALearnerPlacementLearnerIsGivenTheSlots) {
  RegionDirectory buffer_placement;
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    const auto kind = static_cast<RegionKind>(k);
    if (RoleNeedsRegion(Role::kLearner, kind, Config(4), false)) {
      buffer_placement.Set(kind, WireRegion{0x10000 + k * 0x1000, 64, 0, 0});
    }
  }
  EXPECT_FALSE(buffer_placement.Has(RegionKind::kSlots));
  EXPECT_FALSE(buffer_placement.Has(RegionKind::kCommits));
  EXPECT_FALSE(buffer_placement.Has(RegionKind::kLeases));
  EXPECT_TRUE(buffer_placement.Has(RegionKind::kStaging));
  EXPECT_TRUE(CheckDirectoryForRole(buffer_placement, Role::kLearner, Config(4), false).ok());
  // A learner-placement learner expects them, so it does not take this one.
  const absl::Status s = CheckDirectoryForRole(buffer_placement, Role::kLearner, Config(4), true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HandshakeTest, RetryableRejectionsAreRecognisedByPredicate) {
  const absl::Status busy = absl::PermissionDeniedError(
      "connection rejected: " + RetryableReason("another learner is connected"));
  EXPECT_TRUE(IsRetryableRejection(busy));
  EXPECT_FALSE(IsRetryableRejection(absl::PermissionDeniedError("authentication failed")));
  EXPECT_FALSE(IsRetryableRejection(absl::UnavailableError(RetryableReason("x"))));
}

TEST(HandshakeTest, RoleNamesParseBack) {
  for (Role r : {Role::kActor, Role::kLearner, Role::kMonitor}) {
    EXPECT_EQ(*ParseRole(RoleName(r)), r);
  }
  EXPECT_NE(ParseRole("admin").status().message().find("\"admin\""), std::string::npos);
}

TEST(ActorLineTest, SealedLineVerifiesAndATornOneDoesNot) {
  ActorLine line{};
  EXPECT_EQ(CheckActorLine(line, 3).code(), absl::StatusCode::kNotFound);
  line.actor_id = 3;
  line.env_steps = 1000;
  line.episodes = 12;
  line.returns_sum = 250.0;
  line.returns_count = 10;
  line.last_return = 30.0;
  SealActorLine(&line);
  EXPECT_TRUE(CheckActorLine(line, 3).ok());
  EXPECT_EQ(CheckActorLine(line, 4).code(), absl::StatusCode::kDataLoss);
  line.env_steps = 1001;
  EXPECT_EQ(CheckActorLine(line, 3).code(), absl::StatusCode::kDataLoss);
}

// Reference values from an independent HMAC-SHA256 (label, then the id as
// 4 little-endian bytes).
TEST(ActorCredentialTest, IsTheHmacOfTheLabelAndTheIdUnderTheMaster) {
  EXPECT_EQ(ActorCredential("master-token-for-tests-0123", 0),
            "91ba25d0e1353c501633d2e5b2b24929544c679bcb6599faa49436168bf81d69");
  EXPECT_EQ(ActorCredential("master-token-for-tests-0123", 7),
            "15cd61483903c0a97dd007b768957bddd03f26db6bf737be50ae4d546b090e98");
  EXPECT_NE(ActorCredential("master-token-for-tests-0124", 7),
            ActorCredential("master-token-for-tests-0123", 7));
  EXPECT_GE(ActorCredential("m", 1).size(), kMinAuthTokenBytes);
}

}  // namespace
}  // namespace dreplay::protocol
