// Copyright dreplay authors.
//
// params_format.h: the flat buffer that carries Q-network parameters from the
// learner to the actors (through the replay server's params region), and that
// checkpoints use.
//
// Layout (little-endian): a 32-byte ParamsHeader, then `count` float32 values,
// the network's tensors one after the other in the network's own order, each
// row-major. The header's shape hash identifies the architecture (every
// tensor's shape, in order), so a buffer from another architecture is refused
// even when it has the same number of values; the format version refuses
// buffers written by an incompatible build; `version` is the parameters' own
// version number (the learner's publish counter), returned to the reader.
//
// A buffer may be followed by unused bytes (a fixed-size region); readers look
// only at the header's `count` values.

#ifndef DREPLAY_RL_PARAMS_FORMAT_H_
#define DREPLAY_RL_PARAMS_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dreplay::rl {

// "DRQP" in memory order (little-endian).
inline constexpr uint32_t kParamsMagic = 0x50515244;
inline constexpr uint32_t kParamsFormatVersion = 1;

struct ParamsHeader {
  uint32_t magic = kParamsMagic;
  uint32_t format_version = kParamsFormatVersion;
  uint64_t shape_hash = 0;  // ParamsShapeHash() of the network
  uint64_t version = 0;     // the parameters' version
  uint64_t count = 0;       // float32 values after the header
};
static_assert(sizeof(ParamsHeader) == 32, "ParamsHeader is a wire format");
static_assert(alignof(ParamsHeader) == 8, "ParamsHeader is a wire format");

// Bytes of a buffer holding `count` values.
constexpr size_t ParamsBufferSize(uint64_t count) {
  return sizeof(ParamsHeader) + count * sizeof(float);
}

// A 64-bit FNV-1a hash of a list of tensor shapes (each shape a list of
// dimensions), including the number of tensors and each one's rank.
uint64_t ParamsShapeHash(absl::Span<const std::vector<int64_t>> shapes);

// Writes a header and `values` at the start of `out`; returns the bytes
// written. INVALID_ARGUMENT if `out` is smaller than
// ParamsBufferSize(values.size()).
absl::StatusOr<size_t> WriteParams(uint64_t shape_hash, uint64_t version,
                                   absl::Span<const float> values, absl::Span<uint8_t> out);

// Reads and checks the header at the start of `in`: INVALID_ARGUMENT if `in`
// is shorter than the header or than the values it announces, or the magic is
// wrong; FAILED_PRECONDITION for another format version.
absl::StatusOr<ParamsHeader> ReadParamsHeader(absl::Span<const uint8_t> in);

// Reads a whole buffer into `values`, after ReadParamsHeader()'s checks and
// these: FAILED_PRECONDITION if the shape hash is not `expected_shape_hash`
// or the count is not values.size(). Returns the parameters' version. On
// error, `values` is unchanged.
absl::StatusOr<uint64_t> ReadParams(absl::Span<const uint8_t> in, uint64_t expected_shape_hash,
                                    absl::Span<float> values);

// OK when the buffer at the start of `in` (ReadParamsHeader()'s checks) has
// only finite values; InvalidArgument naming the first value that is not
// (NaN or infinite parameters would reach every actor that loads them).
absl::Status CheckParamsFinite(absl::Span<const uint8_t> in);

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_PARAMS_FORMAT_H_
