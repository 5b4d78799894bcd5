// Copyright dreplay authors.

#include "verbs/setup_preamble.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::verbs {

const char* SetupProviderName(SetupProvider provider) {
  switch (provider) {
    case SetupProvider::kSoft:
      return "soft";
    case SetupProvider::kIbverbs:
      return "ibverbs";
  }
  return "unknown";
}

std::string EncodePreamble(const Preamble& p) {
  std::string out(kPreambleBytes, '\0');
  const uint32_t magic = htonl(kPreambleMagic);
  const uint16_t version = htons(kPreambleVersion);
  const uint32_t length = htonl(p.body_length);
  std::memcpy(&out[0], &magic, 4);
  std::memcpy(&out[4], &version, 2);
  out[6] = static_cast<char>(p.kind);
  out[7] = static_cast<char>(p.provider);
  std::memcpy(&out[8], &length, 4);
  return out;
}

absl::StatusOr<Preamble> DecodePreamble(absl::string_view bytes, const std::string& peer) {
  if (bytes.size() < kPreambleBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup preamble from ", peer, " has only ", bytes.size(), " bytes"));
  }
  uint32_t magic = 0;
  uint16_t version = 0;
  uint32_t length = 0;
  std::memcpy(&magic, bytes.data(), 4);
  std::memcpy(&version, bytes.data() + 4, 2);
  std::memcpy(&length, bytes.data() + 8, 4);
  const auto kind = static_cast<uint8_t>(bytes[6]);
  const auto provider = static_cast<uint8_t>(bytes[7]);
  if (ntohl(magic) != kPreambleMagic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is not a dreplay peer (setup magic 0x%08x, expected 0x%08x), or speaks an older setup",
        peer, ntohl(magic), kPreambleMagic));
  }
  if (ntohs(version) != kPreambleVersion) {
    return absl::InvalidArgumentError(absl::StrCat("setup preamble from ", peer, " has version ",
                                                   ntohs(version), ", expected ",
                                                   kPreambleVersion));
  }
  if (kind < static_cast<uint8_t>(PreambleKind::kHello) ||
      kind > static_cast<uint8_t>(PreambleKind::kReject)) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup preamble from ", peer, " has unknown kind ", kind));
  }
  if (provider != static_cast<uint8_t>(SetupProvider::kSoft) &&
      provider != static_cast<uint8_t>(SetupProvider::kIbverbs)) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup preamble from ", peer, " names unknown provider ", provider));
  }
  Preamble p;
  p.kind = static_cast<PreambleKind>(kind);
  p.provider = static_cast<SetupProvider>(provider);
  p.body_length = ntohl(length);
  return p;
}

std::string ProviderMismatchMessage(const std::string& listener, SetupProvider listener_provider,
                                    SetupProvider connector_provider) {
  return absl::StrCat("provider mismatch: the listener at ", listener, " uses the ",
                      SetupProviderName(listener_provider),
                      " provider and the connecting side the ",
                      SetupProviderName(connector_provider),
                      " provider; set --provider to the same value on both hosts (e.g. "
                      "--provider=",
                      SetupProviderName(listener_provider), " on both)");
}

}  // namespace dreplay::verbs
