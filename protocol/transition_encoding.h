// Copyright dreplay authors.
//
// transition_encoding.h: the byte layout of one encoded transition, the
// payload of a replay slot. rl/transition.h encodes and decodes it;
// transition_check.h checks it at ingest. This is its one definition.
//
// Layout (little-endian, EncodedTransitionBytes(m, type) bytes):
//
//   offset  size  field
//   0       4     observation_size m (u32): values per observation
//   4       4     action (i32)
//   8       4     reward (f32)
//   12      4     discount (f32)
//   16      1     done (u8, 0 or 1)
//   17      1     steps (u8)
//   18      1     observation_type (u8): 0 f32, 1 u8 (ObservationType)
//   19      1     reserved, zero
//   20      e*m   observation (m values of e bytes: 4 for f32, 1 for u8)
//   20+e*m  e*m   next_observation
//
// The element type is in the header, so that an encoding states its own
// length (a payload may carry an actor's padding after it); the transition
// spec (transition_spec.h) says which type a server accepts. f32 encodings
// are those of layout versions before 11 (offset 18 was a reserved zero).
// u8 observations are images and boolean grids (MinAtar): 4x fewer bytes
// than floats, with every value exact.
//
// Thread safety: constants and pure functions.

#ifndef DREPLAY_PROTOCOL_TRANSITION_ENCODING_H_
#define DREPLAY_PROTOCOL_TRANSITION_ENCODING_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace dreplay::protocol {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the encoding is copied as is");
static_assert(sizeof(float) == 4, "f32 observations are IEEE float32");

// The element type of an encoded observation.
enum class ObservationType : uint8_t {
  kFloat32 = 0,
  kUint8 = 1,
};

// "f32" or "u8"; "unknown" for a value outside the enum.
const char* ObservationTypeName(ObservationType type);

// The type named "f32" or "u8"; nullopt for any other text.
std::optional<ObservationType> ParseObservationType(absl::string_view name);

// Bytes of one value of `type` (4 or 1). REQUIRES: a value of the enum.
constexpr size_t ObservationElementBytes(ObservationType type) {
  return type == ObservationType::kUint8 ? 1 : 4;
}

// The fixed part of the encoding, as laid out, before the two observations.
struct EncodedTransitionHeader {
  uint32_t observation_size;
  int32_t action;
  float reward;
  float discount;
  uint8_t done;
  uint8_t steps;
  uint8_t observation_type;  // an ObservationType
  uint8_t reserved;
};
inline constexpr size_t kEncodedTransitionHeaderBytes = 20;
static_assert(sizeof(EncodedTransitionHeader) == kEncodedTransitionHeaderBytes,
              "the header has no padding");
static_assert(offsetof(EncodedTransitionHeader, action) == 4);
static_assert(offsetof(EncodedTransitionHeader, reward) == 8);
static_assert(offsetof(EncodedTransitionHeader, discount) == 12);
static_assert(offsetof(EncodedTransitionHeader, done) == 16);
static_assert(offsetof(EncodedTransitionHeader, steps) == 17);
static_assert(offsetof(EncodedTransitionHeader, observation_type) == 18);
static_assert(offsetof(EncodedTransitionHeader, reserved) == 19);

// Bytes of an encoding with `observation_size` values of `type` per
// observation.
constexpr uint64_t EncodedTransitionBytes(uint64_t observation_size, ObservationType type) {
  return kEncodedTransitionHeaderBytes + 2 * ObservationElementBytes(type) * observation_size;
}

// True when `value` is an ObservationType this build knows.
constexpr bool IsObservationType(uint8_t value) {
  return value == static_cast<uint8_t>(ObservationType::kFloat32) ||
         value == static_cast<uint8_t>(ObservationType::kUint8);
}

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_TRANSITION_ENCODING_H_
