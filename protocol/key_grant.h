// Copyright dreplay authors.
//
// key_grant.h: how a client receives the keys of its connection.
//
// Every key the server hands a client is a memory window bound to that
// client's queue pair (verbs.h, QueuePair::BindWindow): it is refused on any
// other connection, is drawn fresh for each connection and dies with it. A
// window can only be bound once the queue pair exists, which is after the
// accept reply has gone, so the keys travel over the queue pair itself:
//
//   client                                  server
//   hello {..., grant region}  ------------>
//   <------------ accept {directory without keys (rkey 0), proof}
//                                           BindWindow for each region
//   <-- WRITE KeyGrantMessage (all but `commit`, fenced after the binds)
//   <-- WRITE commit = GrantCommitValue(client nonce)
//   waits for `commit`, CheckKeyGrant
//
// The accept reply's directory names every region, range, lease and resume
// sequence; the grant repeats it with the keys filled in, and
// CheckKeyGrant() requires the two to agree in everything but the keys. The
// grant's proof is an HMAC with the role's token over the hello and the
// granted directory, so a client with a token takes keys only from the
// server that holds it. RC order places the commit WRITE after the grant,
// and the grant after the binds, so a client that sees the commit can use
// every key.
//
// Pure: no I/O, no verbs calls. Thread-safe.

#ifndef DREPLAY_PROTOCOL_KEY_GRANT_H_
#define DREPLAY_PROTOCOL_KEY_GRANT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "protocol/auth.h"
#include "protocol/handshake.h"
#include "protocol/layout.h"

namespace dreplay::protocol {

// ASCII "DRGRANT1" read as a little-endian u64.
inline constexpr uint64_t kKeyGrantMagic = 0x31544E4152475244ULL;
inline constexpr absl::string_view kGrantMacLabel = "dreplay grant v6";
inline constexpr absl::string_view kGrantSealLabel = "dreplay grant seal v1";

// What the server WRITEs into the client's grant region (Hello::grant).
struct KeyGrantMessage {
  uint64_t magic;             // kKeyGrantMagic
  uint32_t layout_version;    // kLayoutVersion
  uint32_t grant_bytes;       // sizeof(KeyGrantMessage)
  RegionDirectory directory;  // the accept reply's, with the window keys sealed
  uint8_t proof[kMacBytes];   // GrantProof(token, hello, directory)
  // Written last, by a WRITE of its own: GrantCommitValue(client nonce).
  uint64_t commit;
};
static_assert(sizeof(KeyGrantMessage) == 16 + sizeof(RegionDirectory) + kMacBytes + 8,
              "KeyGrantMessage is a wire structure");
static_assert(sizeof(KeyGrantMessage) == kGrantRegionBytes, "");
inline constexpr size_t kGrantCommitOffset = offsetof(KeyGrantMessage, commit);

// Never 0; differs between connections (it is taken from the client nonce).
uint64_t GrantCommitValue(const Hello& hello);

// XORs each region's key in `directory` with the low 32 bits of
// HMAC-SHA256(token, kGrantSealLabel || the hello's wire bytes (its MAC
// included) || the region's kind as one byte): seals, and applied again
// unseals. With the empty token (a server without tokens) anyone can unseal.
void SealKeys(absl::string_view token, const Hello& hello, RegionDirectory* directory);

// The accept reply's directory: `granted` with every key zeroed.
RegionDirectory WithoutKeys(const RegionDirectory& granted);

// HMAC-SHA256(token, kGrantMacLabel || the hello (its MAC included) ||
// the granted directory).
Mac GrantProof(absl::string_view token, const Hello& hello, const RegionDirectory& granted);

// The message the server WRITEs for `granted`, commit word included.
KeyGrantMessage MakeKeyGrant(absl::string_view token, const Hello& hello,
                             const RegionDirectory& granted);

// Client side, once `grant.commit` is GrantCommitValue(hello): the granted
// directory when the grant is well formed, agrees with the accept reply's
// directory `accepted` in all but the keys, gives every present region a
// key, and (with a token) carries the right proof. FailedPrecondition for a
// malformed or disagreeing grant, PermissionDenied for a wrong proof.
absl::StatusOr<RegionDirectory> CheckKeyGrant(const KeyGrantMessage& grant,
                                              const RegionDirectory& accepted, const Hello& hello,
                                              absl::string_view token);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_KEY_GRANT_H_
