// Copyright dreplay authors.

#include "protocol/handshake.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/retry_tag.h"

namespace dreplay::protocol {
namespace {

// Marks a temporary refusal in a rejection reason.
constexpr absl::string_view kRetryTag = kRetryLaterTag;

bool ValidRole(uint32_t role) {
  return role == static_cast<uint32_t>(Role::kActor) ||
         role == static_cast<uint32_t>(Role::kLearner) ||
         role == static_cast<uint32_t>(Role::kMonitor);
}

bool IsZero(const WireRegion& region) {
  return region.addr == 0 && region.length == 0 && region.rkey == 0 && region.reserved == 0;
}

// Marks a refusal that carries a challenge.
constexpr absl::string_view kChallengeTag = "[challenge] ";

// The wire form of `hello` with every reserved word zero: what both MACs
// cover, so that a field the decoder does not keep cannot be changed either.
HelloMessage CanonicalMessage(const Hello& hello) {
  HelloMessage m{};
  m.magic = kHelloMagic;
  m.layout_version = kLayoutVersion;
  m.hello_bytes = sizeof(HelloMessage);
  m.role = static_cast<uint32_t>(hello.role);
  m.actor_id = hello.actor_id;
  m.flags = (hello.learner_cache ? kHelloFlagLearnerCache : 0) |
            (hello.learner_placement ? kHelloFlagLearnerPlacement : 0);
  m.heartbeat = hello.heartbeat;
  m.grant = hello.grant;
  std::memcpy(m.server_nonce, hello.server_nonce.data(), kNonceBytes);
  std::memcpy(m.client_nonce, hello.client_nonce.data(), kNonceBytes);
  std::memcpy(m.mac, hello.mac.data(), kMacBytes);
  return m;
}

std::string Serialize(const HelloMessage& m) {
  return std::string(reinterpret_cast<const char*>(&m), sizeof(m));
}

// HMAC over the label and the canonical message with its MAC zeroed.
Mac HelloMac(const Hello& hello, absl::string_view token) {
  HelloMessage m = CanonicalMessage(hello);
  std::memset(m.mac, 0, sizeof(m.mac));
  return HmacSha256(token, absl::StrCat(kHelloMacLabel, Serialize(m)));
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kActor:
      return "actor";
    case Role::kLearner:
      return "learner";
    case Role::kMonitor:
      return "monitor";
  }
  return "unknown";
}

absl::StatusOr<Role> ParseRole(const std::string& name) {
  for (Role role : {Role::kActor, Role::kLearner, Role::kMonitor}) {
    if (name == RoleName(role)) return role;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role \"", name, "\" (expected actor, learner or monitor)"));
}

std::string EncodeChallengeRequest(Role role) {
  ChallengeRequestMessage m{};
  m.magic = kHelloMagic;
  m.layout_version = kLayoutVersion;
  m.request_bytes = sizeof(ChallengeRequestMessage);
  m.role = static_cast<uint32_t>(role);
  return std::string(reinterpret_cast<const char*>(&m), sizeof(m));
}

bool IsChallengeRequest(absl::string_view payload) {
  if (payload.size() != sizeof(ChallengeRequestMessage)) return false;
  ChallengeRequestMessage m;
  std::memcpy(&m, payload.data(), sizeof(m));
  return m.magic == kHelloMagic && m.layout_version == kLayoutVersion &&
         m.request_bytes == sizeof(ChallengeRequestMessage) && ValidRole(m.role) && m.reserved == 0;
}

std::string ChallengeReason(const Nonce& server_nonce) {
  return absl::StrCat(kChallengeTag, NonceToHex(server_nonce));
}

absl::StatusOr<Nonce> ParseChallenge(const absl::Status& refusal) {
  if (refusal.code() != absl::StatusCode::kPermissionDenied) {
    return absl::NotFoundError("not a challenge");
  }
  const size_t at = refusal.message().find(kChallengeTag);
  if (at == absl::string_view::npos) return absl::NotFoundError("not a challenge");
  const absl::string_view hex =
      refusal.message().substr(at + kChallengeTag.size(), 2 * kNonceBytes);
  absl::StatusOr<Nonce> nonce = NonceFromHex(hex);
  if (!nonce.ok()) return absl::NotFoundError("not a challenge");
  return nonce;
}

absl::StatusOr<std::string> EncodeHello(const Hello& hello, absl::string_view token) {
  if (token.size() > kMaxAuthTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "auth token of ", token.size(), " bytes is longer than the limit of ", kMaxAuthTokenBytes));
  }
  if (!ValidRole(static_cast<uint32_t>(hello.role))) {
    return absl::InvalidArgumentError(
        absl::StrCat("role ", static_cast<uint32_t>(hello.role), " is not a role"));
  }
  if (hello.role != Role::kActor && hello.actor_id != 0) {
    return absl::InvalidArgumentError(absl::StrCat("actor_id=", hello.actor_id, " given for a ",
                                                   RoleName(hello.role), " (actors only)"));
  }
  if (hello.learner_cache && hello.role != Role::kLearner) {
    return absl::InvalidArgumentError(
        absl::StrCat("learner_cache given for a ", RoleName(hello.role), " (learners only)"));
  }
  if (hello.learner_placement && hello.role != Role::kLearner) {
    return absl::InvalidArgumentError(
        absl::StrCat("learner_placement given for a ", RoleName(hello.role), " (learners only)"));
  }
  if (hello.learner_cache && hello.learner_placement) {
    return absl::InvalidArgumentError(
        "learner_cache (buffer placement) and learner_placement given together");
  }
  Hello signed_hello = hello;
  signed_hello.mac = HelloMac(hello, token);
  return Serialize(CanonicalMessage(signed_hello));
}

absl::StatusOr<Hello> DecodeHello(absl::string_view payload) {
  if (payload.size() < kHelloPrefixBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed hello: ", payload.size(), " bytes, not a dreplay replay client"));
  }
  uint64_t magic;
  uint32_t version;
  std::memcpy(&magic, payload.data(), sizeof(magic));
  std::memcpy(&version, payload.data() + offsetof(HelloMessage, layout_version), sizeof(version));
  if (magic != kHelloMagic) {
    return absl::InvalidArgumentError("malformed hello: bad magic, not a dreplay replay client");
  }
  if (version != kLayoutVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("layout version mismatch: client speaks layout version ", version,
                     ", server speaks layout version ", kLayoutVersion));
  }
  if (payload.size() != sizeof(HelloMessage)) {
    return absl::InvalidArgumentError(absl::StrCat("malformed hello: ", payload.size(),
                                                   " bytes, expected ", sizeof(HelloMessage)));
  }
  HelloMessage m;
  std::memcpy(&m, payload.data(), sizeof(m));
  if (m.hello_bytes != sizeof(HelloMessage)) {
    return absl::InvalidArgumentError(absl::StrCat("malformed hello: hello_bytes=", m.hello_bytes,
                                                   ", expected ", sizeof(HelloMessage)));
  }
  if (!ValidRole(m.role)) {
    return absl::InvalidArgumentError(absl::StrCat("malformed hello: unknown role ", m.role));
  }
  if (m.reserved0 != 0 || m.grant.reserved != 0 || m.heartbeat.reserved != 0) {
    // The MAC covers the canonical message, so a reserved word must be zero.
    return absl::InvalidArgumentError("malformed hello: a reserved word is not zero");
  }
  if (!IsZero(m.heartbeat) && (m.heartbeat.length < kHeartbeatBytes || m.heartbeat.addr % 8 != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed hello: heartbeat region of ", m.heartbeat.length,
                     " bytes (need >= ", kHeartbeatBytes, ", 8-byte aligned)"));
  }
  if (m.grant.length < kGrantRegionBytes || m.grant.addr % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed hello: key grant region of ", m.grant.length,
                     " bytes (need >= ", kGrantRegionBytes, ", 8-byte aligned)"));
  }
  const bool learner_flags = (m.flags & kHelloKnownFlags) != 0;
  if ((m.flags & ~kHelloKnownFlags) != 0 ||
      (learner_flags && m.role != static_cast<uint32_t>(Role::kLearner)) ||
      ((m.flags & kHelloFlagLearnerCache) != 0 && (m.flags & kHelloFlagLearnerPlacement) != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("malformed hello: flags ", m.flags));
  }
  Hello hello;
  hello.role = static_cast<Role>(m.role);
  hello.learner_cache = (m.flags & kHelloFlagLearnerCache) != 0;
  hello.learner_placement = (m.flags & kHelloFlagLearnerPlacement) != 0;
  hello.actor_id = m.actor_id;
  if (hello.role != Role::kActor && hello.actor_id != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed hello: actor_id=", m.actor_id, " for a ", RoleName(hello.role)));
  }
  hello.heartbeat = m.heartbeat;
  hello.grant = m.grant;
  std::memcpy(hello.server_nonce.data(), m.server_nonce, kNonceBytes);
  std::memcpy(hello.client_nonce.data(), m.client_nonce, kNonceBytes);
  std::memcpy(hello.mac.data(), m.mac, kMacBytes);
  return hello;
}

std::string CanonicalHelloBytes(const Hello& hello) { return Serialize(CanonicalMessage(hello)); }

bool CheckHelloMac(const Hello& hello, absl::string_view token) {
  return MacsEqual(hello.mac, HelloMac(hello, token));
}

Mac AcceptProof(absl::string_view token, const Hello& hello, const RegionDirectory& directory) {
  const std::string data =
      absl::StrCat(kAcceptMacLabel, Serialize(CanonicalMessage(hello)),
                   absl::string_view(reinterpret_cast<const char*>(&directory), sizeof(directory)));
  return HmacSha256(token, data);
}

std::string EncodeAccept(const RegionDirectory& directory, const Mac& proof) {
  return absl::StrCat(
      absl::string_view(reinterpret_cast<const char*>(&directory), sizeof(directory)),
      absl::string_view(reinterpret_cast<const char*>(proof.data()), proof.size()));
}

absl::StatusOr<AcceptReply> DecodeAccept(absl::string_view payload) {
  if (payload.size() != sizeof(RegionDirectory) + kMacBytes) {
    return absl::InvalidArgumentError(absl::StrCat("accept reply of ", payload.size(),
                                                   " bytes, expected ",
                                                   sizeof(RegionDirectory) + kMacBytes));
  }
  AcceptReply reply;
  std::memcpy(&reply.directory, payload.data(), sizeof(RegionDirectory));
  std::memcpy(reply.proof.data(), payload.data() + sizeof(RegionDirectory), kMacBytes);
  absl::Status status = reply.directory.Validate();
  if (!status.ok()) return status;
  return reply;
}

absl::Status CheckAcceptProof(const AcceptReply& reply, const Hello& hello,
                              absl::string_view token) {
  if (token.empty()) return absl::OkStatus();
  if (!MacsEqual(reply.proof, AcceptProof(token, hello, reply.directory))) {
    return absl::PermissionDeniedError("the server did not prove it holds the token");
  }
  return absl::OkStatus();
}

uint32_t RoleAccess(Role role, RegionKind kind, bool learner_placement) {
  switch (role) {
    case Role::kActor:
      switch (kind) {
        case RegionKind::kControl:
        case RegionKind::kParams:
        case RegionKind::kLeases:
          return kAccessRead;
        case RegionKind::kSlots:
        case RegionKind::kCommits:
        case RegionKind::kActors:  // its own line
          return kAccessWrite;
        default:
          return 0;
      }
    case Role::kLearner:
      switch (kind) {
        case RegionKind::kLeases:   // the forward journal
        case RegionKind::kSlots:    // the forward reader's runs
        case RegionKind::kCommits:  // and their commit words
          return learner_placement ? uint32_t{kAccessRead} : 0u;
        case RegionKind::kControl:
        case RegionKind::kStaging:
        case RegionKind::kActors:
        case RegionKind::kStats:  // its summary's crossing percentile (layout 14)
          return kAccessRead;
        case RegionKind::kMailbox:
          return kAccessWrite;
        case RegionKind::kParams:  // READ: to continue after the current version
          return kAccessRead | kAccessWrite;
        default:
          return 0;
      }
    case Role::kMonitor:
      switch (kind) {
        case RegionKind::kControl:
        case RegionKind::kStats:
        case RegionKind::kActors:
        case RegionKind::kLeases:
          return kAccessRead;
        default:
          return 0;
      }
  }
  return 0;
}

bool RoleNeedsRegion(Role role, RegionKind kind, const LayoutConfig& config,
                     bool learner_placement) {
  if (kind == RegionKind::kActors && config.max_actors == 0) return false;
  return RoleAccess(role, kind, learner_placement) != 0;
}

absl::Status CheckDirectoryForRole(const RegionDirectory& directory, Role role,
                                   const LayoutConfig& config, bool learner_placement) {
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    const auto kind = static_cast<RegionKind>(k);
    const bool needed = RoleNeedsRegion(role, kind, config, learner_placement);
    if (needed != directory.Has(kind)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the server's region directory for a ", RoleName(role),
          needed ? " lacks region " : " holds unexpected region ", RegionKindName(kind)));
    }
  }
  return absl::OkStatus();
}

std::string RetryableReason(absl::string_view reason) { return absl::StrCat(kRetryTag, reason); }

bool IsRetryableRejection(const absl::Status& status) {
  return status.code() == absl::StatusCode::kPermissionDenied &&
         absl::StrContains(status.message(), kRetryTag);
}

}  // namespace dreplay::protocol
