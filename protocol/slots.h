// Copyright dreplay authors.
//
// slots.h: the slot ring (SlotHeader, sealing and verifying a slot) and the
// commit words that publish a slot.
//
// Part of the replay service's wire contract (protocol/README.md): shared by
// the server and its clients through RDMA-registered memory. Nothing here
// depends on verbs/. All integers are little-endian; floats are IEEE 754.

#ifndef DREPLAY_PROTOCOL_SLOTS_H_
#define DREPLAY_PROTOCOL_SLOTS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "common/checksum.h"
#include "protocol/config.h"

namespace dreplay::protocol {

// ---------------------------------------------------------------------------
// Slot ring and commit words.

struct SlotHeader {
  // XXH3-64 (kChecksumSeed) of bytes [8, sizeof(SlotHeader) + payload_length)
  // of the slot: every header field after this one, then the payload.
  uint64_t checksum;
  uint64_t sequence;        // the sequence number in the actor's lease
  uint32_t actor_id;        // informational
  uint32_t payload_length;  // bytes of payload after the header
  // Raw priority (e.g. |TD error|) from the actor; 0 means "no estimate:
  // use the current maximum". The server bounds it (NaN, infinite or
  // negative: no estimate; above its max_priority: clamped), counted.
  float initial_priority;
  // The low 32 bits of the version of the parameters the actor acted with
  // (protocol/params.h; 0: unknown), so that the learner can tell how many
  // versions old the policy behind a transition is (layout 17; before, a
  // reserved 0).
  uint32_t params_version;
  // When the actor sealed the slot: its CLOCK_REALTIME in ns since the Unix
  // epoch (0: unknown). Data age at the learner is measured from it, so
  // across hosts it is as good as their clock synchronisation (PTP, NTP).
  uint64_t insert_time_ns;
};
static_assert(sizeof(SlotHeader) == 40, "SlotHeader is a wire structure");
static_assert(offsetof(SlotHeader, checksum) == 0, "");
static_assert(offsetof(SlotHeader, sequence) == 8, "");
static_assert(offsetof(SlotHeader, actor_id) == 16, "");
static_assert(offsetof(SlotHeader, payload_length) == 20, "");
static_assert(offsetof(SlotHeader, initial_priority) == 24, "");
static_assert(offsetof(SlotHeader, params_version) == 28, "");
static_assert(offsetof(SlotHeader, insert_time_ns) == 32, "");
inline constexpr size_t kSlotChecksumBegin = sizeof(uint64_t);

// The smallest slot_size that holds payloads of `payload_bytes`: the header,
// the payload, rounded up to kSlotAlignment.
constexpr uint64_t SlotSizeFor(uint64_t payload_bytes) {
  return RoundUp(sizeof(SlotHeader) + payload_bytes, kSlotAlignment);
}

// The commit word of a slot holding `sequence`. 0 means "never committed".
constexpr uint64_t CommitValue(uint64_t sequence) { return sequence + 1; }
inline constexpr uint64_t kNeverCommitted = 0;

// Checksum of a slot whose header says `payload_length` bytes follow.
// REQUIRES: sizeof(SlotHeader) + payload_length bytes readable at `slot`.
inline uint64_t SlotChecksum(const void* slot, uint32_t payload_length) {
  const auto* p = static_cast<const uint8_t*>(slot);
  return Xxh3(p + kSlotChecksumBegin, sizeof(SlotHeader) - kSlotChecksumBegin + payload_length,
              kChecksumSeed);
}

enum class SlotCheck : uint8_t {
  kOk,
  kBadLength,      // payload_length > slot_size - sizeof(SlotHeader)
  kWrongSequence,  // header.sequence != the expected sequence
  kBadChecksum,
};
const char* SlotCheckName(SlotCheck check);

// Verifies a slot image of `slot_size` bytes (in the ring or copied out of
// it) against the sequence it should hold. Never reads past slot_size.
SlotCheck VerifySlot(const void* slot, uint32_t slot_size, uint64_t expected_sequence);

// Fills a slot image: header fields, the payload, and the checksum.
// `insert_time_ns` is SlotHeader::insert_time_ns (the sealer's
// CLOCK_REALTIME; 0: unknown). InvalidArgument if the payload does not fit in
// slot_size. `slot` must hold slot_size bytes; bytes after the payload are
// left as they are.
absl::Status SealSlot(void* slot, uint32_t slot_size, uint64_t sequence, uint32_t actor_id,
                      float initial_priority, uint64_t insert_time_ns, const void* payload,
                      uint32_t payload_length, uint32_t params_version = 0);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_SLOTS_H_
