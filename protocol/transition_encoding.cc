// Copyright dreplay authors.

#include "protocol/transition_encoding.h"

namespace dreplay::protocol {

const char* ObservationTypeName(ObservationType type) {
  switch (type) {
    case ObservationType::kFloat32:
      return "f32";
    case ObservationType::kUint8:
      return "u8";
  }
  return "unknown";
}

std::optional<ObservationType> ParseObservationType(absl::string_view name) {
  if (name == "f32") return ObservationType::kFloat32;
  if (name == "u8") return ObservationType::kUint8;
  return std::nullopt;
}

}  // namespace dreplay::protocol
