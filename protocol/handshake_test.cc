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

Hello ActorHello() {
  Hello h;
  h.role = Role::kActor;
  h.actor_id = 7;
  h.auth_token = "s3cret";
  h.heartbeat = WireRegion{0x1000, 64, 99, 0};
  return h;
}

TEST(HandshakeTest, HelloRoundTripsThroughItsWireForm) {
  absl::StatusOr<std::string> wire = EncodeHello(ActorHello());
  ASSERT_TRUE(wire.ok()) << wire.status();
  EXPECT_EQ(wire->size(), sizeof(HelloMessage));
  absl::StatusOr<Hello> back = DecodeHello(*wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->role, Role::kActor);
  EXPECT_EQ(back->actor_id, 7u);
  EXPECT_EQ(back->auth_token, "s3cret");
  EXPECT_EQ(back->heartbeat.addr, 0x1000u);
  EXPECT_EQ(back->heartbeat.rkey, 99u);
}

TEST(HandshakeTest, LearnerCacheFlagRoundTripsForLearnersOnly) {
  Hello learner;
  learner.role = Role::kLearner;
  learner.learner_cache = true;
  absl::StatusOr<std::string> wire = EncodeHello(learner);
  ASSERT_TRUE(wire.ok()) << wire.status();
  absl::StatusOr<Hello> back = DecodeHello(*wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->learner_cache);
  learner.learner_cache = false;
  back = DecodeHello(*EncodeHello(learner));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->learner_cache);

  Hello actor = ActorHello();
  actor.learner_cache = true;
  EXPECT_EQ(EncodeHello(actor).status().code(), absl::StatusCode::kInvalidArgument);
  // A forged hello: an actor with the flag, or an unknown flag bit.
  actor.learner_cache = false;
  std::string forged = *EncodeHello(actor);
  HelloMessage m;
  std::memcpy(&m, forged.data(), sizeof(m));
  for (uint32_t flags : {kHelloFlagLearnerCache, 1u << 7}) {
    m.flags = flags;
    std::memcpy(forged.data(), &m, sizeof(m));
    EXPECT_EQ(DecodeHello(forged).status().code(), absl::StatusCode::kInvalidArgument) << flags;
  }
}

TEST(HandshakeTest, RejectsAnotherLayoutVersionNamingBothVersions) {
  std::string wire = *EncodeHello(ActorHello());
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
  std::string wire = *EncodeHello(ActorHello());
  EXPECT_EQ(DecodeHello(wire.substr(0, wire.size() - 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string bad_role = wire;
  const uint32_t role = 9;
  std::memcpy(&bad_role[offsetof(HelloMessage, role)], &role, sizeof(role));
  EXPECT_NE(DecodeHello(bad_role).status().message().find("unknown role 9"), std::string::npos);
  std::string long_token = wire;
  const uint32_t length = kMaxAuthTokenBytes + 1;
  std::memcpy(&long_token[offsetof(HelloMessage, token_length)], &length, sizeof(length));
  EXPECT_EQ(DecodeHello(long_token).status().code(), absl::StatusCode::kInvalidArgument);
  Hello tiny_heartbeat = ActorHello();
  tiny_heartbeat.heartbeat.length = 4;
  EXPECT_EQ(DecodeHello(*EncodeHello(tiny_heartbeat)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HandshakeTest, EncodeRefusesLongTokensAndActorIdsOfOtherRoles) {
  Hello h = ActorHello();
  h.auth_token.assign(kMaxAuthTokenBytes + 1, 'x');
  EXPECT_EQ(EncodeHello(h).status().code(), absl::StatusCode::kInvalidArgument);
  h = ActorHello();
  h.role = Role::kMonitor;
  EXPECT_EQ(EncodeHello(h).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HandshakeTest, TokensCompareEqualOnlyWhenIdentical) {
  EXPECT_TRUE(TokensEqual("abc", "abc"));
  EXPECT_TRUE(TokensEqual("", ""));
  EXPECT_FALSE(TokensEqual("abc", "abd"));
  EXPECT_FALSE(TokensEqual("ab", "abc"));
  EXPECT_FALSE(TokensEqual(std::string("abc\0", 4), "abc"));
  const std::string max(kMaxAuthTokenBytes, 'k');
  EXPECT_TRUE(TokensEqual(max, max));
  EXPECT_FALSE(TokensEqual(max + "k", max + "k"));  // too long never matches
}

TEST(HandshakeTest, CheckTokenFailsWithoutRevealingTheToken) {
  Hello h = ActorHello();
  EXPECT_TRUE(CheckToken(h, "").ok());
  EXPECT_TRUE(CheckToken(h, "s3cret").ok());
  const absl::Status s = CheckToken(h, "other-token");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "authentication failed");
}

TEST(HandshakeTest, RoleAccessFollowsTheLayoutTable) {
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kLeases), kAccessRead);
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kSlots), kAccessWrite);
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kStaging), 0u);
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kMailbox), 0u);
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kParams), kAccessRead);
  EXPECT_EQ(RoleAccess(Role::kActor, RegionKind::kStats), 0u);
  EXPECT_EQ(RoleAccess(Role::kLearner, RegionKind::kSlots), kAccessRead);
  EXPECT_EQ(RoleAccess(Role::kLearner, RegionKind::kLeases), kAccessRead);
  EXPECT_EQ(RoleAccess(Role::kLearner, RegionKind::kStaging), kAccessRead);
  EXPECT_EQ(RoleAccess(Role::kLearner, RegionKind::kMailbox), kAccessWrite);
  EXPECT_EQ(RoleAccess(Role::kLearner, RegionKind::kParams), kAccessRead | kAccessWrite);
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    const auto kind = static_cast<RegionKind>(k);
    const uint32_t access = RoleAccess(Role::kMonitor, kind);
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
    if (RoleNeedsRegion(Role::kMonitor, kind, Config(4))) {
      d.Set(kind, WireRegion{addr, 64, k + 1, 0});
      addr += 0x1000;
    }
  }
  absl::StatusOr<RegionDirectory> back = DecodeDirectory(EncodeDirectory(d));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(CheckDirectoryForRole(*back, Role::kMonitor, Config(4)).ok());
  // Without an actors region configured, the monitor must not get one.
  EXPECT_EQ(CheckDirectoryForRole(*back, Role::kMonitor, Config(0)).code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status s = CheckDirectoryForRole(*back, Role::kLearner, Config(4));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("lacks region slots"), std::string::npos) << s;
  EXPECT_EQ(DecodeDirectory("short").status().code(), absl::StatusCode::kInvalidArgument);
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

}  // namespace
}  // namespace dreplay::protocol
