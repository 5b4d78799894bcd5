// Copyright dreplay authors.
//
// auth.h: the cryptographic primitives of the handshake's challenge-response
// (protocol/handshake.h): random nonces from OpenSSL's CSPRNG, HMAC-SHA256,
// and a constant-time comparison of MACs. A token is only ever used as an
// HMAC key; it never goes on the wire.
//
//   ASSIGN_OR_RETURN(Nonce nonce, RandomNonce());
//   Mac mac = HmacSha256(token, message);
//   if (!MacsEqual(mac, offered)) ... refuse
//
// Thread-safe; no state of its own.

#ifndef DREPLAY_PROTOCOL_AUTH_H_
#define DREPLAY_PROTOCOL_AUTH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dreplay::protocol {

// Bytes of a nonce (server challenge, client nonce) and of an HMAC-SHA256.
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

// A fresh nonce from OpenSSL's RAND_bytes. Internal when the generator
// fails (it is not seeded); never a weaker fallback.
absl::StatusOr<Nonce> RandomNonce();

// HMAC-SHA256 of `data` keyed with `key` (any length, empty included).
Mac HmacSha256(absl::string_view key, absl::string_view data);

// True when `a` equals `b`; the time taken does not depend on the contents
// (CRYPTO_memcmp).
bool MacsEqual(const Mac& a, const Mac& b);

// Domain separation of actor credentials (ActorCredential).
inline constexpr absl::string_view kActorCredentialLabel = "dreplay actor credential v1";

// The credential of actor `actor_id`: lower-case hex (2 * kMacBytes
// characters) of HMAC-SHA256(actors' master token, kActorCredentialLabel ||
// actor_id as 4 little-endian bytes). An actor proves this, not the master,
// so that an actor holding its own credential cannot claim another id: the
// server keeps the master and derives the credential of the id a hello
// names. Operators derive credentials with `actor_credentials`
// (replay_server/actor_credentials_main.cc) and give each actor only its own.
std::string ActorCredential(absl::string_view master_token, uint32_t actor_id);

// Lower-case hex of a nonce (2 * kNonceBytes characters), and its inverse:
// InvalidArgument unless `hex` is exactly that many hex digits.
std::string NonceToHex(const Nonce& nonce);
absl::StatusOr<Nonce> NonceFromHex(absl::string_view hex);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_AUTH_H_
