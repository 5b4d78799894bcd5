// Copyright dreplay authors.

#include "protocol/handshake.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dreplay::protocol {
namespace {

// Marks a temporary refusal in a rejection reason.
constexpr absl::string_view kRetryTag = "[retry later] ";

bool ValidRole(uint32_t role) {
  return role == static_cast<uint32_t>(Role::kActor) ||
         role == static_cast<uint32_t>(Role::kLearner) ||
         role == static_cast<uint32_t>(Role::kMonitor);
}

bool IsZero(const WireRegion& region) {
  return region.addr == 0 && region.length == 0 && region.rkey == 0 && region.reserved == 0;
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

absl::StatusOr<std::string> EncodeHello(const Hello& hello) {
  if (hello.auth_token.size() > kMaxAuthTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("auth token of ", hello.auth_token.size(),
                                                   " bytes is longer than the limit of ",
                                                   kMaxAuthTokenBytes));
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
  HelloMessage m{};
  m.magic = kHelloMagic;
  m.layout_version = kLayoutVersion;
  m.hello_bytes = sizeof(HelloMessage);
  m.role = static_cast<uint32_t>(hello.role);
  m.actor_id = hello.actor_id;
  m.token_length = static_cast<uint32_t>(hello.auth_token.size());
  m.heartbeat = hello.heartbeat;
  m.flags = hello.learner_cache ? kHelloFlagLearnerCache : 0;
  std::memcpy(m.token, hello.auth_token.data(), hello.auth_token.size());
  return std::string(reinterpret_cast<const char*>(&m), sizeof(m));
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
  if (m.token_length > kMaxAuthTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("malformed hello: token length ", m.token_length,
                                                   " exceeds ", kMaxAuthTokenBytes));
  }
  if (!IsZero(m.heartbeat) && (m.heartbeat.length < kHeartbeatBytes || m.heartbeat.addr % 8 != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed hello: heartbeat region of ", m.heartbeat.length,
                     " bytes (need >= ", kHeartbeatBytes, ", 8-byte aligned)"));
  }
  if ((m.flags & ~kHelloKnownFlags) != 0 || ((m.flags & kHelloFlagLearnerCache) != 0 &&
                                             m.role != static_cast<uint32_t>(Role::kLearner))) {
    return absl::InvalidArgumentError(absl::StrCat("malformed hello: flags ", m.flags));
  }
  Hello hello;
  hello.role = static_cast<Role>(m.role);
  hello.learner_cache = (m.flags & kHelloFlagLearnerCache) != 0;
  hello.actor_id = m.actor_id;
  if (hello.role != Role::kActor && hello.actor_id != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed hello: actor_id=", m.actor_id, " for a ", RoleName(hello.role)));
  }
  hello.auth_token.assign(m.token, m.token_length);
  hello.heartbeat = m.heartbeat;
  return hello;
}

bool TokensEqual(absl::string_view offered, absl::string_view expected) {
  // Both sides are compared over the full fixed width, so neither the
  // position of the first difference nor the offered length changes the
  // work done.
  unsigned char a[kMaxAuthTokenBytes] = {};
  unsigned char b[kMaxAuthTokenBytes] = {};
  const bool too_long = offered.size() > kMaxAuthTokenBytes || expected.size() > kMaxAuthTokenBytes;
  std::memcpy(a, offered.data(), std::min(offered.size(), kMaxAuthTokenBytes));
  std::memcpy(b, expected.data(), std::min(expected.size(), kMaxAuthTokenBytes));
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < kMaxAuthTokenBytes; ++i) diff = diff | (a[i] ^ b[i]);
  const uint64_t length_diff = static_cast<uint64_t>(offered.size()) ^ expected.size();
  return diff == 0 && length_diff == 0 && !too_long;
}

absl::Status CheckToken(const Hello& hello, absl::string_view expected) {
  if (expected.empty()) return absl::OkStatus();
  if (!TokensEqual(hello.auth_token, expected)) {
    return absl::PermissionDeniedError("authentication failed");
  }
  return absl::OkStatus();
}

uint32_t RoleAccess(Role role, RegionKind kind) {
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
        case RegionKind::kControl:
        case RegionKind::kLeases:   // baseline mode (journal)
        case RegionKind::kSlots:    // baseline mode (forward reader)
        case RegionKind::kCommits:  // baseline mode
        case RegionKind::kStaging:
        case RegionKind::kActors:
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

bool RoleNeedsRegion(Role role, RegionKind kind, const LayoutConfig& config) {
  if (kind == RegionKind::kActors && config.max_actors == 0) return false;
  return RoleAccess(role, kind) != 0;
}

std::string EncodeDirectory(const RegionDirectory& directory) {
  return std::string(reinterpret_cast<const char*>(&directory), sizeof(directory));
}

absl::StatusOr<RegionDirectory> DecodeDirectory(absl::string_view payload) {
  if (payload.size() != sizeof(RegionDirectory)) {
    return absl::InvalidArgumentError(absl::StrCat("region directory of ", payload.size(),
                                                   " bytes, expected ", sizeof(RegionDirectory)));
  }
  RegionDirectory directory;
  std::memcpy(&directory, payload.data(), sizeof(directory));
  absl::Status status = directory.Validate();
  if (!status.ok()) return status;
  return directory;
}

absl::Status CheckDirectoryForRole(const RegionDirectory& directory, Role role,
                                   const LayoutConfig& config) {
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    const auto kind = static_cast<RegionKind>(k);
    const bool needed = RoleNeedsRegion(role, kind, config);
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
