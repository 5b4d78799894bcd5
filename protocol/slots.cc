// Copyright dreplay authors.

#include "protocol/slots.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::protocol {

const char* SlotCheckName(SlotCheck check) {
  switch (check) {
    case SlotCheck::kOk:
      return "ok";
    case SlotCheck::kBadLength:
      return "bad payload length";
    case SlotCheck::kWrongSequence:
      return "wrong sequence";
    case SlotCheck::kBadChecksum:
      return "bad checksum";
  }
  return "unknown";
}

SlotCheck VerifySlot(const void* slot, uint32_t slot_size, uint64_t expected_sequence) {
  SlotHeader header;
  std::memcpy(&header, slot, sizeof(header));
  if (slot_size < sizeof(SlotHeader) || header.payload_length > slot_size - sizeof(SlotHeader)) {
    return SlotCheck::kBadLength;
  }
  if (header.sequence != expected_sequence) return SlotCheck::kWrongSequence;
  if (SlotChecksum(slot, header.payload_length) != header.checksum) {
    return SlotCheck::kBadChecksum;
  }
  return SlotCheck::kOk;
}

absl::Status SealSlot(void* slot, uint32_t slot_size, uint64_t sequence, uint32_t actor_id,
                      float initial_priority, uint64_t insert_time_ns, const void* payload,
                      uint32_t payload_length, uint32_t params_version) {
  if (slot_size < sizeof(SlotHeader) || payload_length > slot_size - sizeof(SlotHeader)) {
    return absl::InvalidArgumentError(absl::StrCat("payload of ", payload_length,
                                                   " bytes does not fit a slot of ", slot_size,
                                                   " bytes (header ", sizeof(SlotHeader), ")"));
  }
  SlotHeader header{};
  header.sequence = sequence;
  header.actor_id = actor_id;
  header.payload_length = payload_length;
  header.initial_priority = initial_priority;
  header.insert_time_ns = insert_time_ns;
  header.params_version = params_version;
  auto* p = static_cast<uint8_t*>(slot);
  std::memcpy(p, &header, sizeof(header));
  if (payload_length > 0) std::memcpy(p + sizeof(SlotHeader), payload, payload_length);
  header.checksum = SlotChecksum(p, payload_length);
  std::memcpy(p, &header.checksum, sizeof(header.checksum));
  return absl::OkStatus();
}

}  // namespace dreplay::protocol
