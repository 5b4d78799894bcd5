// Copyright dreplay authors.

#include "protocol/config.h"

#include "protocol/slots.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::protocol {

namespace {

bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

}  // namespace

absl::Status LayoutConfig::Validate() const {
  if (!IsPowerOfTwo(capacity) || capacity < kMinCapacity || capacity > kMaxCapacity) {
    return absl::InvalidArgumentError(absl::StrCat("capacity=", capacity,
                                                   " must be a power of two in [", kMinCapacity,
                                                   ", ", kMaxCapacity, "]"));
  }
  if (slot_size % kSlotAlignment != 0 || slot_size <= sizeof(SlotHeader) ||
      slot_size > kMaxSlotSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot_size=", slot_size, " must be a multiple of ", kSlotAlignment, " in (",
                     sizeof(SlotHeader), ", ", kMaxSlotSize, "]"));
  }
  if (batch_size == 0 || batch_size > kMaxBatchSize || batch_size > capacity) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size=", batch_size,
                                                   " must be in [1, min(", kMaxBatchSize,
                                                   ", capacity=", capacity, ")]"));
  }
  if (staging_depth == 0 || staging_depth > kMaxStagingDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("staging_depth=", staging_depth, " must be in [1, ", kMaxStagingDepth, "]"));
  }
  if (param_bytes > kMaxParamBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("param_bytes=", param_bytes, " must be at most ", kMaxParamBytes));
  }
  if (std::find(transition_spec, transition_spec + kTransitionSpecBytes, '\0') ==
      transition_spec + kTransitionSpecBytes) {
    return absl::InvalidArgumentError("transition_spec is not NUL-terminated");
  }
  if (max_actors > kMaxActors) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_actors=", max_actors, " must be at most ", kMaxActors));
  }
  if (leases == 0 || leases > kMaxLeases || capacity / leases < kMinLeaseSlots) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leases=", leases, " must be in [1, ", kMaxLeases, "] with capacity=", capacity,
        " / leases >= ", kMinLeaseSlots, " slots per lease"));
  }
  if (frame_stack > kMaxFrameStack ||
      (frame_stack > 0 && (observation_size == 0 || observation_size % frame_stack != 0))) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame_stack=", frame_stack, " must be 0 or in [1, ", kMaxFrameStack,
                     "] dividing observation_size=", observation_size));
  }
  if (actor_window > capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor_window=", actor_window, " must be at most capacity=", capacity));
  }
  return absl::OkStatus();
}

uint32_t LayoutConfig::max_payload() const {
  return slot_size > sizeof(SlotHeader) ? slot_size - static_cast<uint32_t>(sizeof(SlotHeader)) : 0;
}

std::string LayoutConfig::spec() const {
  const char* end = std::find(transition_spec, transition_spec + kTransitionSpecBytes, '\0');
  return std::string(transition_spec, end);
}

absl::Status LayoutConfig::set_spec(const std::string& spec) {
  if (spec.size() >= kTransitionSpecBytes || spec.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("transition spec \"", spec,
                                                   "\" must be shorter than ", kTransitionSpecBytes,
                                                   " bytes and contain no NUL"));
  }
  std::memset(transition_spec, 0, kTransitionSpecBytes);
  std::memcpy(transition_spec, spec.data(), spec.size());
  return absl::OkStatus();
}

bool LayoutConfig::operator==(const LayoutConfig& o) const {
  return capacity == o.capacity && param_bytes == o.param_bytes && slot_size == o.slot_size &&
         batch_size == o.batch_size && staging_depth == o.staging_depth &&
         observation_size == o.observation_size && num_actions == o.num_actions &&
         max_actors == o.max_actors && actor_window == o.actor_window && leases == o.leases &&
         frame_stack == o.frame_stack &&
         std::memcmp(transition_spec, o.transition_spec, kTransitionSpecBytes) == 0;
}

std::string LayoutConfig::DebugString() const {
  return absl::StrCat("capacity=", capacity, " slot_size=", slot_size, " batch_size=", batch_size,
                      " staging_depth=", staging_depth, " param_bytes=", param_bytes,
                      " observation_size=", observation_size, " num_actions=", num_actions,
                      " max_actors=", max_actors, " actor_window=", actor_window,
                      " leases=", leases, " frame_stack=", frame_stack, " transition_spec=\"",
                      spec(), "\"");
}

std::string LayoutConfig::FirstDifference(const LayoutConfig& o) const {
  auto diff = [](const char* name, auto a, auto b) {
    return absl::StrCat(name, ": ", a, " vs ", b);
  };
  if (capacity != o.capacity) return diff("capacity", capacity, o.capacity);
  if (slot_size != o.slot_size) return diff("slot_size", slot_size, o.slot_size);
  if (batch_size != o.batch_size) return diff("batch_size", batch_size, o.batch_size);
  if (staging_depth != o.staging_depth) {
    return diff("staging_depth", staging_depth, o.staging_depth);
  }
  if (param_bytes != o.param_bytes) return diff("param_bytes", param_bytes, o.param_bytes);
  if (observation_size != o.observation_size) {
    return diff("observation_size", observation_size, o.observation_size);
  }
  if (num_actions != o.num_actions) return diff("num_actions", num_actions, o.num_actions);
  if (std::memcmp(transition_spec, o.transition_spec, kTransitionSpecBytes) != 0) {
    return absl::StrCat("transition_spec: \"", spec(), "\" vs \"", o.spec(), "\"");
  }
  if (max_actors != o.max_actors) return diff("max_actors", max_actors, o.max_actors);
  if (actor_window != o.actor_window) {
    return diff("actor_window", actor_window, o.actor_window);
  }
  if (leases != o.leases) return diff("leases", leases, o.leases);
  if (frame_stack != o.frame_stack) return diff("frame_stack", frame_stack, o.frame_stack);
  return "";
}

absl::Status CheckControlHeader(const ControlHeader& header) {
  if (header.magic != kMagic) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "control block magic 0x%016x is not dreplay's 0x%016x", header.magic, kMagic));
  }
  if (header.layout_version != kLayoutVersion) {
    return absl::FailedPreconditionError(absl::StrCat("server layout version ",
                                                      header.layout_version,
                                                      " but this build speaks ", kLayoutVersion));
  }
  if (header.control_block_size != sizeof(ControlBlock)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "control block size ", header.control_block_size, " but expected ", sizeof(ControlBlock)));
  }
  return header.config.Validate();
}

}  // namespace dreplay::protocol
