// Copyright dreplay authors.

#include "protocol/key_grant.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace dreplay::protocol {
namespace {

absl::string_view Bytes(const void* p, size_t n) {
  return absl::string_view(static_cast<const char*>(p), n);
}

}  // namespace

void SealKeys(absl::string_view token, const Hello& hello, RegionDirectory* directory) {
  const std::string hello_bytes = CanonicalHelloBytes(hello);
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    const char kind = static_cast<char>(k);
    const Mac mask =
        HmacSha256(token, absl::StrCat(kGrantSealLabel, hello_bytes, absl::string_view(&kind, 1)));
    uint32_t word;
    std::memcpy(&word, mask.data(), sizeof(word));
    directory->regions[k].rkey ^= word;
  }
}

uint64_t GrantCommitValue(const Hello& hello) {
  uint64_t value;
  std::memcpy(&value, hello.client_nonce.data(), sizeof(value));
  return value == 0 ? 1 : value;
}

RegionDirectory WithoutKeys(const RegionDirectory& granted) {
  RegionDirectory d = granted;
  for (WireRegion& region : d.regions) region.rkey = 0;
  return d;
}

Mac GrantProof(absl::string_view token, const Hello& hello, const RegionDirectory& granted) {
  return HmacSha256(token, absl::StrCat(kGrantMacLabel, CanonicalHelloBytes(hello),
                                        Bytes(&granted, sizeof(granted))));
}

KeyGrantMessage MakeKeyGrant(absl::string_view token, const Hello& hello,
                             const RegionDirectory& granted) {
  KeyGrantMessage g{};
  g.magic = kKeyGrantMagic;
  g.layout_version = kLayoutVersion;
  g.grant_bytes = sizeof(KeyGrantMessage);
  g.directory = granted;
  const Mac proof = GrantProof(token, hello, granted);
  std::memcpy(g.proof, proof.data(), kMacBytes);
  SealKeys(token, hello, &g.directory);
  g.commit = GrantCommitValue(hello);
  return g;
}

absl::StatusOr<RegionDirectory> CheckKeyGrant(const KeyGrantMessage& grant,
                                              const RegionDirectory& accepted, const Hello& hello,
                                              absl::string_view token) {
  if (grant.magic != kKeyGrantMagic || grant.layout_version != kLayoutVersion ||
      grant.grant_bytes != sizeof(KeyGrantMessage)) {
    return absl::FailedPreconditionError(absl::StrCat("malformed key grant (magic, layout version ",
                                                      grant.layout_version, " or size ",
                                                      grant.grant_bytes, ")"));
  }
  RegionDirectory d = grant.directory;
  SealKeys(token, hello, &d);  // unseals
  const RegionDirectory bare = WithoutKeys(d);
  if (std::memcmp(&bare, &accepted, sizeof(RegionDirectory)) != 0) {
    return absl::FailedPreconditionError(
        "the key grant does not match the accept reply's region directory");
  }
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    if (d.Has(static_cast<RegionKind>(k)) && d.regions[k].rkey == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the key grant gives region ", RegionKindName(static_cast<RegionKind>(k)), " no key"));
    }
  }
  if (!token.empty()) {
    Mac proof;
    std::memcpy(proof.data(), grant.proof, kMacBytes);
    if (!MacsEqual(proof, GrantProof(token, hello, d))) {
      return absl::PermissionDeniedError("the key grant's proof is not the server's");
    }
  }
  return d;
}

}  // namespace dreplay::protocol
