// Copyright dreplay authors.

#include "protocol/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace dreplay::protocol {

absl::StatusOr<Nonce> RandomNonce() {
  Nonce nonce;
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
    return absl::InternalError("RAND_bytes failed: the system's random generator is not ready");
  }
  return nonce;
}

Mac HmacSha256(absl::string_view key, absl::string_view data) {
  Mac mac{};
  unsigned int length = 0;
  // A non-null key pointer even for the empty key (HMAC treats null as
  // "reuse the previous key").
  static const unsigned char kEmpty[1] = {0};
  const unsigned char* key_bytes =
      key.empty() ? kEmpty : reinterpret_cast<const unsigned char*>(key.data());
  const unsigned char* out =
      HMAC(EVP_sha256(), key_bytes, static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac.data(), &length);
  // Only an allocation failure inside OpenSSL makes HMAC fail; a zero MAC
  // then matches nothing a peer computed.
  if (out == nullptr || length != kMacBytes) mac.fill(0);
  return mac;
}

bool MacsEqual(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), kMacBytes) == 0;
}

std::string ActorCredential(absl::string_view master_token, uint32_t actor_id) {
  char id[4];
  for (int i = 0; i < 4; ++i) id[i] = static_cast<char>((actor_id >> (8 * i)) & 0xff);
  const Mac mac = HmacSha256(
      master_token, absl::StrCat(kActorCredentialLabel, absl::string_view(id, sizeof(id))));
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

std::string NonceToHex(const Nonce& nonce) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(nonce.data()), nonce.size()));
}

absl::StatusOr<Nonce> NonceFromHex(absl::string_view hex) {
  if (hex.size() != 2 * kNonceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a nonce is ", 2 * kNonceBytes, " hex digits, not ", hex.size()));
  }
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError("a nonce holds hex digits only");
    }
  }
  const std::string bytes = absl::HexStringToBytes(hex);
  Nonce nonce;
  std::copy(bytes.begin(), bytes.end(), nonce.begin());
  return nonce;
}

}  // namespace dreplay::protocol
