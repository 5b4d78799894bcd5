// Copyright dreplay authors.
//
// handshake.h: the replay service's connection handshake.
//
// A client connects with verbs::Provider::Connect() and sends an encoded
// Hello as the connection payload; the server decodes and checks it and
// either rejects the connection (the client's Connect() fails with
// kPermissionDenied and the reason) or accepts it with an encoded
// RegionDirectory as the reply. The directory holds the keys of the regions
// the client's role may use, and nothing else (see RoleAccess and the access
// table in protocol/README.md): a key a role must not use is never sent to it.
//
//   client                                  server
//   EncodeHello({role, actor id, token})
//     -- Connect(payload) -------------->    DecodeHello (magic, version, size,
//                                              role, token length)
//                                            CheckToken (constant time)
//                                            role limits (one learner, ...)
//     <-- Accept(EncodeDirectory(dir)) --    or Reject(reason)
//   DecodeDirectory, CheckDirectoryForRole
//
// A reason whose rejection is temporary (e.g. another learner is still
// connected) is made with RetryableReason(); IsRetryableRejection() tells a
// client whether to try again later.
//
// Everything here is pure: no I/O, no verbs calls. Thread-safe.

#ifndef DREPLAY_PROTOCOL_HANDSHAKE_H_
#define DREPLAY_PROTOCOL_HANDSHAKE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "protocol/layout.h"

namespace dreplay::protocol {

enum class Role : uint32_t {
  kActor = 1,    // inserts experiences, reads parameters, publishes its line
  kLearner = 2,  // reads staged batches, writes priorities and parameters
  kMonitor = 3,  // reads the control block, the stats and the actor lines
};
// "actor", "learner", "monitor" ("unknown" otherwise).
const char* RoleName(Role role);
// Inverse of RoleName; InvalidArgument naming the bad value.
absl::StatusOr<Role> ParseRole(const std::string& name);

// HelloMessage::flags bits.
inline constexpr uint32_t kHelloFlagLearnerCache = 1u << 0;
inline constexpr uint32_t kHelloKnownFlags = kHelloFlagLearnerCache;

// ASCII "DRHELLO1" read as a little-endian u64.
inline constexpr uint64_t kHelloMagic = 0x314F4C4C45485244ULL;
// Longest accepted authentication token, bytes.
inline constexpr size_t kMaxAuthTokenBytes = 256;
// Smallest region a heartbeat may name (the server WRITEs one u64).
inline constexpr uint64_t kHeartbeatBytes = sizeof(uint64_t);

// The wire form of the client's hello (the connection payload).
struct HelloMessage {
  uint64_t magic;           // kHelloMagic
  uint32_t layout_version;  // kLayoutVersion of the client's build
  uint32_t hello_bytes;     // sizeof(HelloMessage)
  uint32_t role;            // Role
  uint32_t actor_id;        // actors: their id (< config.max_actors); else 0
  uint32_t token_length;    // bytes of `token` used (<= kMaxAuthTokenBytes)
  uint32_t flags;           // kHelloFlag* bits
  // Optional: a client region (>= kHeartbeatBytes, remote WRITE) where the
  // server WRITEs a heartbeat now and then, so that it notices a peer that
  // died (an RC queue pair that carries no traffic never fails). All zero:
  // none; the server then relies on the queue pair's own state.
  WireRegion heartbeat;
  uint64_t reserved[3];
  char token[kMaxAuthTokenBytes];
};
static_assert(sizeof(HelloMessage) == 336, "HelloMessage is a wire structure");
static_assert(offsetof(HelloMessage, layout_version) == 8, "");
static_assert(offsetof(HelloMessage, role) == 16, "");
static_assert(offsetof(HelloMessage, heartbeat) == 32, "");
static_assert(offsetof(HelloMessage, token) == 80, "");
// Bytes a server reads before it knows the client's layout version.
inline constexpr size_t kHelloPrefixBytes = offsetof(HelloMessage, hello_bytes);

// The decoded hello.
struct Hello {
  Role role = Role::kActor;
  uint32_t actor_id = 0;
  std::string auth_token;  // never logged
  WireRegion heartbeat;    // length 0: none
  // Learners: this learner keeps every transition it receives (transfer-once
  // cache), so the server may stage a transition it holds as a reference
  // only (protocol/staging.h, kEntryCachedBit).
  bool learner_cache = false;
};

// InvalidArgument when the token is longer than kMaxAuthTokenBytes, the role
// is unknown or a non-actor names an actor id.
absl::StatusOr<std::string> EncodeHello(const Hello& hello);

// Decodes a connection payload. The messages are meant for the peer (they
// become the rejection reason) and never quote the token:
//   InvalidArgument     too short, not a hello, wrong size, unknown role,
//                       token too long, a heartbeat region too small
//   FailedPrecondition  another layout version, naming both versions
absl::StatusOr<Hello> DecodeHello(absl::string_view payload);

// True when `offered` equals `expected`. The time taken depends on neither
// content nor the offered length (both are compared as kMaxAuthTokenBytes
// buffers plus their lengths). Tokens longer than kMaxAuthTokenBytes never
// match.
bool TokensEqual(absl::string_view offered, absl::string_view expected);

// OK when `expected` is empty (no authentication) or equals the hello's
// token; PermissionDenied "authentication failed" otherwise.
absl::Status CheckToken(const Hello& hello, absl::string_view expected);

// Remote access rights, as bits of a mask. They have the values of
// verbs::Access's remote bits (the server static_asserts it), copied so that
// the protocol does not depend on verbs/.
enum RemoteAccess : uint32_t {
  kAccessRead = 1u << 1,
  kAccessWrite = 1u << 2,
  kAccessAtomic = 1u << 3,
};

// The remote access (a mask of RemoteAccess bits) that `role` has to region
// `kind`; 0 when the role gets no key for it. For kActors and an actor, the
// right covers the actor's own line only. This is the access table of
// protocol/README.md.
uint32_t RoleAccess(Role role, RegionKind kind);

// The regions a role needs in its directory (RoleAccess != 0), except
// kActors when config.max_actors == 0.
bool RoleNeedsRegion(Role role, RegionKind kind, const LayoutConfig& config);

// The reply payload.
std::string EncodeDirectory(const RegionDirectory& directory);
// InvalidArgument for a payload of the wrong size; RegionDirectory::Validate()
// errors otherwise.
absl::StatusOr<RegionDirectory> DecodeDirectory(absl::string_view payload);

// Client side: OK when `directory` holds exactly the regions a role is
// given: every region RoleAccess grants (kActors only when max_actors > 0)
// is present and no other. FailedPrecondition naming the first mismatch.
absl::Status CheckDirectoryForRole(const RegionDirectory& directory, Role role,
                                   const LayoutConfig& config);

// A rejection reason for a temporary refusal; see IsRetryableRejection.
std::string RetryableReason(absl::string_view reason);
// True when `status` (from Connect) is a refusal made with RetryableReason.
bool IsRetryableRejection(const absl::Status& status);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_HANDSHAKE_H_
