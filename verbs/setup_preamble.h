// Copyright dreplay authors.
//
// setup_preamble.h: the first bytes of every connection setup, the same for
// both providers, so that a listener learns which provider a connecting
// peer uses before it reads anything provider-specific.
//
//   connector -> listener   Preamble{kHello, the connector's provider,
//                           body_length}, then the provider's hello
//                           (soft: HelloHeader and payload, soft/wire.h;
//                           ibverbs: SetupHeader and payload, ibverbs_wire.h).
//   listener -> connector   Preamble{kAccept, the listener's provider,
//                           body_length}, then the provider's accept; or
//                           Preamble{kReject, ...}, then the reason (text).
//
// Everything after that is the provider's own protocol. A preamble is 12
// bytes, all integers big-endian:
//
//   u32 magic "DRCM" | u16 version | u8 kind | u8 provider | u32 body_length
//
// Provider negotiation: a listener answers a hello of another provider with
// kReject naming its own provider, and the connector turns that into
// kFailedPrecondition naming both providers and the flag to set
// (ProviderMismatchMessage), so `--provider=auto` choosing differently on
// two hosts fails on both sides with the same explanation.
//
// Pure functions; thread-safe.

#ifndef DREPLAY_VERBS_SETUP_PREAMBLE_H_
#define DREPLAY_VERBS_SETUP_PREAMBLE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dreplay::verbs {

inline constexpr uint32_t kPreambleMagic = 0x4452434d;  // "DRCM"
inline constexpr uint16_t kPreambleVersion = 1;
inline constexpr size_t kPreambleBytes = 12;
// Longest reject reason a connector accepts.
inline constexpr uint32_t kMaxRejectReasonBytes = 4096;

enum class SetupProvider : uint8_t { kSoft = 1, kIbverbs = 2 };
// "soft", "ibverbs".
const char* SetupProviderName(SetupProvider provider);

enum class PreambleKind : uint8_t { kHello = 1, kAccept = 2, kReject = 3 };

struct Preamble {
  PreambleKind kind = PreambleKind::kHello;
  SetupProvider provider = SetupProvider::kSoft;
  uint32_t body_length = 0;
};

// The 12 bytes of `p`.
std::string EncodePreamble(const Preamble& p);
// Parses 12 bytes from `peer` (named in errors). kInvalidArgument for a
// short buffer, bad magic (not a dreplay peer), version, kind or provider.
absl::StatusOr<Preamble> DecodePreamble(absl::string_view bytes, const std::string& peer);

// "the listener at 10.0.0.2:7000 uses the soft provider and this side the
// ibverbs provider: set --provider to the same value on both hosts (e.g.
// --provider=soft on both)".
std::string ProviderMismatchMessage(const std::string& listener, SetupProvider listener_provider,
                                    SetupProvider connector_provider);

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_SETUP_PREAMBLE_H_
