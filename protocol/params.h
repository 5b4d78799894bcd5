// Copyright dreplay authors.
//
// params.h: the params region: the learner's double-buffered model parameters.
//
// Part of the replay service's wire contract (protocol/README.md): shared by
// the server and its clients through RDMA-registered memory. Nothing here
// depends on verbs/. All integers are little-endian; floats are IEEE 754.

#ifndef DREPLAY_PROTOCOL_PARAMS_H_
#define DREPLAY_PROTOCOL_PARAMS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "protocol/config.h"

namespace dreplay::protocol {

// ---------------------------------------------------------------------------
// Params region.
//
//   [0, 64)                          ParamsHeader
//   [64 + h * ParamsHalfStride, ...) half h (h = 0, 1): ParamsHalfHeader,
//                                    then param_bytes of data

struct ParamsHeader {
  uint64_t version;      // last published version; 0 = none yet
  uint32_t active_half;  // ParamsHalfOf(version)
  uint32_t reserved0;
  uint64_t reserved[6];
};
static_assert(sizeof(ParamsHeader) == kCacheLine, "");

struct ParamsHalfHeader {
  // XXH3-64 (kChecksumSeed) of half bytes [8, 64 + size).
  uint64_t checksum;
  uint64_t version;
  uint64_t size;  // bytes of data (<= param_bytes)
  uint64_t reserved[5];
};
static_assert(sizeof(ParamsHalfHeader) == kCacheLine, "");

constexpr uint32_t ParamsHalfOf(uint64_t version) { return static_cast<uint32_t>(version & 1); }
inline uint64_t ParamsHalfStride(const LayoutConfig& c) {
  return sizeof(ParamsHalfHeader) + RoundUp(c.param_bytes, kCacheLine);
}
inline uint64_t ParamsHalfOffset(const LayoutConfig& c, uint32_t half) {
  return sizeof(ParamsHeader) + uint64_t{half} * ParamsHalfStride(c);
}
// Checksum of a half image whose header says `size` bytes (clamped to
// param_bytes).
uint64_t ParamsChecksum(const LayoutConfig& c, const void* half, uint64_t size);

// Writer side: fills `half` (at least sizeof(ParamsHalfHeader) + data.size()
// bytes) with version `version` of the parameters. InvalidArgument when data
// exceeds param_bytes or `half` is too small.
absl::Status EncodeParamsHalf(const LayoutConfig& config, uint64_t version,
                              absl::Span<const uint8_t> data, absl::Span<uint8_t> half);
// Reader side: OK when the half image holds `expected_version` whole;
// Unavailable for another version, DataLoss for a torn or malformed one
// (READ the header and the half again).
absl::Status CheckParamsHalf(const LayoutConfig& config, const void* half,
                             uint64_t expected_version);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_PARAMS_H_
