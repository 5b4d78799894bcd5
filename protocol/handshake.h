// Copyright dreplay authors.
//
// handshake.h: the replay service's connection handshake.
//
// A client authenticates with a challenge-response, so that its token never
// crosses the wire. The providers' connection setup carries one payload each
// way, so the challenge takes a first exchange that the server always
// refuses (no queue pair, no region key is made for it): the refusal reason
// carries a fresh server nonce. The client then connects for real with a
// hello that names that nonce, a nonce of its own and an HMAC-SHA256, keyed
// with its role's token, over the whole hello (layout version, role, actor
// id, flags, heartbeat region and both nonces). The server consumes the
// nonce (one use, short-lived), verifies the MAC in constant time and only
// then checks role limits and allocates anything. Its accept reply carries
// the region directory and a proof: an HMAC with the same token over the
// hello and the directory, which the client checks (mutual authentication).
//
//   client                                  server
//   EncodeChallengeRequest(role)
//     -- Connect(payload) -------------->    IsChallengeRequest
//                                            RandomNonce, remember it
//     <-- Reject(ChallengeReason(nonce)) -
//   ParseChallenge, RandomNonce
//   EncodeHello({role, actor id, nonces}, token)
//     -- Connect(payload) -------------->    DecodeHello (magic, version, size,
//                                              role, flags)
//                                            consume the server nonce
//                                            CheckHelloMac (token of the role)
//                                            role limits (one learner, ...)
//     <-- Accept(EncodeAccept(dir, proof))   or Reject(reason)
//   DecodeAccept, CheckAcceptProof           BindWindow per region
//     <-- WRITE KeyGrantMessage ----------   (key_grant.h: the keys of
//   CheckKeyGrant, CheckDirectoryForRole      this queue pair only)
//
// The accept reply's directory names the regions the client's role may use
// without their keys (rkey 0); the keys, windows bound to the client's queue
// pair, follow over the queue pair (key_grant.h). Nothing else is given (see RoleAccess and the
// access table in protocol/README.md): a key a role must not use is never sent to it.
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
#include "protocol/auth.h"
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
// The learner runs the learner placement (forward reader): only then is it
// given the slot ring, the commit words and the leases region (forward
// journal). Learners only; not with kHelloFlagLearnerCache.
inline constexpr uint32_t kHelloFlagLearnerPlacement = 1u << 1;
inline constexpr uint32_t kHelloKnownFlags = kHelloFlagLearnerCache | kHelloFlagLearnerPlacement;

// ASCII "DRHELLO1" read as a little-endian u64 (hello and challenge request).
inline constexpr uint64_t kHelloMagic = 0x314F4C4C45485244ULL;
// Longest accepted authentication token, bytes.
inline constexpr size_t kMaxAuthTokenBytes = 256;
// Shortest accepted authentication token, bytes: a token is a secret an
// attacker must not guess; 16 random bytes' worth of hex is 32 characters,
// and anything under 16 characters is refused outright.
inline constexpr size_t kMinAuthTokenBytes = 16;
// Smallest region a heartbeat may name (the server WRITEs one u64).
inline constexpr uint64_t kHeartbeatBytes = sizeof(uint64_t);
// Smallest region a key grant may name: sizeof(KeyGrantMessage) (key_grant.h).
inline constexpr uint64_t kGrantRegionBytes = 304;

// The wire form of the first exchange: "send me a challenge". It shares the
// hello's first 16 bytes, so a server of another layout version answers with
// the version mismatch.
struct ChallengeRequestMessage {
  uint64_t magic;           // kHelloMagic
  uint32_t layout_version;  // kLayoutVersion of the client's build
  uint32_t request_bytes;   // sizeof(ChallengeRequestMessage)
  uint32_t role;            // Role (for the server's log only)
  uint32_t reserved;
};
static_assert(sizeof(ChallengeRequestMessage) == 24, "ChallengeRequestMessage is a wire structure");

// The wire form of the client's hello (the connection payload).
struct HelloMessage {
  uint64_t magic;           // kHelloMagic
  uint32_t layout_version;  // kLayoutVersion of the client's build
  uint32_t hello_bytes;     // sizeof(HelloMessage)
  uint32_t role;            // Role
  uint32_t actor_id;        // actors: their id (< config.max_actors); else 0
  uint32_t flags;           // kHelloFlag* bits
  uint32_t reserved0;
  // Optional: a client region (>= kHeartbeatBytes, remote WRITE) where the
  // server WRITEs a heartbeat now and then, so that it notices a peer that
  // died (an RC queue pair that carries no traffic never fails). All zero:
  // none; the server then relies on the queue pair's own state.
  WireRegion heartbeat;
  // Required: a client region (>= kGrantRegionBytes, remote
  // WRITE) where the server WRITEs this connection's keys once its queue
  // pair is up (protocol/key_grant.h).
  WireRegion grant;
  uint8_t server_nonce[kNonceBytes];  // the challenge the server sent
  uint8_t client_nonce[kNonceBytes];  // fresh per connection
  // HMAC-SHA256(token of the role, kHelloMacLabel || this message with `mac`
  // zeroed). The token itself is never sent.
  uint8_t mac[kMacBytes];
};
static_assert(sizeof(HelloMessage) == 176, "HelloMessage is a wire structure");
static_assert(offsetof(HelloMessage, layout_version) == 8, "");
static_assert(offsetof(HelloMessage, role) == 16, "");
static_assert(offsetof(HelloMessage, heartbeat) == 32, "");
static_assert(offsetof(HelloMessage, grant) == 56, "");
static_assert(offsetof(HelloMessage, server_nonce) == 80, "");
static_assert(offsetof(HelloMessage, mac) == 144, "");
// Bytes a server reads before it knows the client's layout version.
inline constexpr size_t kHelloPrefixBytes = offsetof(HelloMessage, hello_bytes);
static_assert(offsetof(ChallengeRequestMessage, request_bytes) == kHelloPrefixBytes, "");

// Domain separation of the two MACs of a handshake.
inline constexpr absl::string_view kHelloMacLabel = "dreplay hello v6";
inline constexpr absl::string_view kAcceptMacLabel = "dreplay accept v6";

// The decoded hello.
struct Hello {
  Role role = Role::kActor;
  uint32_t actor_id = 0;
  WireRegion heartbeat;  // length 0: none
  WireRegion grant;      // where the server WRITEs the keys (key_grant.h)
  // Learners: this learner keeps every transition it receives (transfer-once
  // cache), so the server may stage a transition it holds as a reference
  // only (protocol/staging.h, kEntryCachedBit).
  bool learner_cache = false;
  // Learners: this learner runs the learner placement (the forward reader
  // READs slots, commit words and the forward journal). Without it a
  // learner is given no key to those regions (RoleAccess).
  bool learner_placement = false;
  Nonce server_nonce{};
  Nonce client_nonce{};
  Mac mac{};  // set by DecodeHello; EncodeHello computes its own
};

// The first exchange's payload.
std::string EncodeChallengeRequest(Role role);
// True when `payload` is a well-formed challenge request of this layout
// version (anything else goes to DecodeHello, which says what is wrong).
bool IsChallengeRequest(absl::string_view payload);

// The refusal reason that carries a challenge, and its inverse on the
// client: the nonce from Connect()'s refusal; NotFound when `refusal` does
// not carry a challenge (the caller then reports `refusal` itself).
std::string ChallengeReason(const Nonce& server_nonce);
absl::StatusOr<Nonce> ParseChallenge(const absl::Status& refusal);

// Encodes `hello` with its MAC keyed by `token` (empty: an unauthenticated
// hello, which only a server without tokens accepts). InvalidArgument when
// the token is longer than kMaxAuthTokenBytes, the role is unknown or a
// non-actor names an actor id.
absl::StatusOr<std::string> EncodeHello(const Hello& hello, absl::string_view token);

// Decodes a connection payload. The messages are meant for the peer (they
// become the rejection reason):
//   InvalidArgument     too short, not a hello, wrong size, unknown role,
//                       bad flags, a reserved word not zero, a heartbeat
//                       region too small
//   FailedPrecondition  another layout version, naming both versions
absl::StatusOr<Hello> DecodeHello(absl::string_view payload);

// The hello's wire bytes with its MAC as it is (what the proofs cover).
std::string CanonicalHelloBytes(const Hello& hello);

// True when the hello's MAC is the one `token` gives (constant-time
// compare). Any change to a field of the hello changes the MAC.
bool CheckHelloMac(const Hello& hello, absl::string_view token);

// The server's proof that it holds `token`: HMAC over kAcceptMacLabel, the
// authenticated hello (its MAC included) and the directory's bytes.
Mac AcceptProof(absl::string_view token, const Hello& hello, const RegionDirectory& directory);

// The accept reply: the directory, then the proof.
struct AcceptReply {
  RegionDirectory directory;
  Mac proof{};
};
std::string EncodeAccept(const RegionDirectory& directory, const Mac& proof);
// InvalidArgument for a payload of the wrong size; RegionDirectory::Validate()
// errors otherwise.
absl::StatusOr<AcceptReply> DecodeAccept(absl::string_view payload);
// Client side: OK when `token` is empty (an open server: nothing to check)
// or the reply's proof is AcceptProof(token, hello, directory);
// PermissionDenied "the server did not prove it holds the token" otherwise.
absl::Status CheckAcceptProof(const AcceptReply& reply, const Hello& hello,
                              absl::string_view token);

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
// right covers the actor's own line only. A learner has READ on the slot
// ring, the commit words and the leases region (forward journal) only when
// `learner_placement` (its hello's flag); the flag means nothing for other
// roles. This is the access table of protocol/README.md.
uint32_t RoleAccess(Role role, RegionKind kind, bool learner_placement);

// The regions a role needs in its directory (RoleAccess != 0), except
// kActors when config.max_actors == 0. A region the role has no access to is
// left out of the directory (not listed with a zero key).
bool RoleNeedsRegion(Role role, RegionKind kind, const LayoutConfig& config,
                     bool learner_placement);

// Client side: OK when `directory` holds exactly the regions a role is
// given: every region RoleAccess grants (kActors only when max_actors > 0)
// is present and no other. FailedPrecondition naming the first mismatch.
absl::Status CheckDirectoryForRole(const RegionDirectory& directory, Role role,
                                   const LayoutConfig& config, bool learner_placement);

// A rejection reason for a temporary refusal; see IsRetryableRejection.
std::string RetryableReason(absl::string_view reason);
// True when `status` (from Connect) is a refusal made with RetryableReason.
bool IsRetryableRejection(const absl::Status& status);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_HANDSHAKE_H_
