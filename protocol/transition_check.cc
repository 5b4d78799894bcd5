// Copyright dreplay authors.

#include "protocol/transition_check.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dreplay::protocol {
namespace {

constexpr size_t kHeaderBytes = kEncodedTransitionHeaderBytes;

// The index of the first float of `count` at `data` that is not finite, or
// `count`.
size_t FirstNonFinite(const uint8_t* data, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    float value;
    std::memcpy(&value, data + i * sizeof(float), sizeof(value));
    if (!std::isfinite(value)) return i;
  }
  return count;
}

}  // namespace

const char* TransitionFaultName(TransitionFault fault) {
  switch (fault) {
    case TransitionFault::kNone:
      return "none";
    case TransitionFault::kTooShort:
      return "too_short";
    case TransitionFault::kObservationSize:
      return "observation_size";
    case TransitionFault::kAction:
      return "action";
    case TransitionFault::kReward:
      return "reward";
    case TransitionFault::kDiscount:
      return "discount";
    case TransitionFault::kFields:
      return "fields";
    case TransitionFault::kObservation:
      return "observation";
    case TransitionFault::kObservationType:
      return "observation_type";
  }
  return "unknown";
}

TransitionFault CheckTransition(const TransitionSpec& spec, absl::Span<const uint8_t> payload) {
  if (payload.size() < kHeaderBytes) return TransitionFault::kTooShort;
  EncodedTransitionHeader header;
  std::memcpy(&header, payload.data(), sizeof(header));
  if (header.observation_size != static_cast<uint32_t>(spec.observation_size)) {
    return TransitionFault::kObservationSize;
  }
  if (header.observation_type != static_cast<uint8_t>(spec.observation_type)) {
    return TransitionFault::kObservationType;
  }
  if (payload.size() < EncodedTransitionBytes(header.observation_size, spec.observation_type)) {
    return TransitionFault::kTooShort;
  }
  if (header.action < 0 || header.action >= spec.action_count) return TransitionFault::kAction;
  if (!std::isfinite(header.reward)) return TransitionFault::kReward;
  if (!(header.discount >= 0.0f && header.discount <= 1.0f)) return TransitionFault::kDiscount;
  if (header.done > 1 || header.steps == 0 || header.steps > spec.n_step || header.reserved != 0) {
    return TransitionFault::kFields;
  }
  // Every byte is a valid u8 value; only floats can be non-finite.
  if (spec.observation_type == ObservationType::kFloat32 &&
      FirstNonFinite(payload.data() + kHeaderBytes, 2 * size_t{header.observation_size}) !=
          2 * size_t{header.observation_size}) {
    return TransitionFault::kObservation;
  }
  return TransitionFault::kNone;
}

absl::Status CheckTransitionStatus(const TransitionSpec& spec, absl::Span<const uint8_t> payload) {
  const TransitionFault fault = CheckTransition(spec, payload);
  if (fault == TransitionFault::kNone) return absl::OkStatus();
  if (fault == TransitionFault::kTooShort) {
    return absl::InvalidArgumentError(
        absl::StrCat("transition: too_short (", payload.size(), " bytes)"));
  }
  EncodedTransitionHeader header;
  std::memcpy(&header, payload.data(), sizeof(header));
  return absl::InvalidArgumentError(absl::StrCat(
      "transition: ", TransitionFaultName(fault), " (observation_size=", header.observation_size,
      " of ", spec.observation_size, ", observation_type=", int{header.observation_type}, " of ",
      ObservationTypeName(spec.observation_type), ", action=", header.action, " of ",
      spec.action_count, ", reward=", header.reward, ", discount=", header.discount,
      ", done=", int{header.done}, ", steps=", int{header.steps}, " of ", spec.n_step,
      ", reserved=", header.reserved, ")"));
}

}  // namespace dreplay::protocol
