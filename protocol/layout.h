// Copyright dreplay authors.
//
// layout.h: the regions of a replay server, their sizes, and the region
// directory the handshake hands a client. Includes every part of the wire
// contract.
//
// Part of the replay service's wire contract (protocol/README.md): shared by
// the server and its clients through RDMA-registered memory. Nothing here
// depends on verbs/. All integers are little-endian; floats are IEEE 754.
//
// The regions, the access each role has, and the protocols that use them are
// described in protocol/README.md.

#ifndef DREPLAY_PROTOCOL_LAYOUT_H_
#define DREPLAY_PROTOCOL_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "protocol/config.h"
#include "protocol/leases.h"
#include "protocol/mailbox.h"
#include "protocol/params.h"
#include "protocol/slots.h"
#include "protocol/staging.h"
#include "protocol/stats.h"

namespace dreplay::protocol {

// ---------------------------------------------------------------------------
// Region sizes (bytes).

inline uint64_t ControlRegionBytes(const LayoutConfig&) { return sizeof(ControlBlock); }
inline uint64_t SlotRingBytes(const LayoutConfig& c) { return c.capacity * c.slot_size; }
inline uint64_t CommitWordsBytes(const LayoutConfig& c) { return c.capacity * sizeof(uint64_t); }
inline uint64_t StagingRingBytes(const LayoutConfig& c) {
  return uint64_t{c.staging_depth} * StagingSlotStride(c);
}
inline uint64_t MailboxBytes(const LayoutConfig& c) {
  return uint64_t{c.staging_depth} * MailboxEntryStride(c);
}
inline uint64_t ParamsRegionBytes(const LayoutConfig& c) {
  return sizeof(ParamsHeader) + 2 * ParamsHalfStride(c);
}
inline uint64_t StatsRegionBytes(const LayoutConfig&) { return sizeof(StatsBlock); }
inline uint64_t ActorsRegionBytes(const LayoutConfig& c) {
  return uint64_t{c.max_actors} * sizeof(ActorLine);
}

// ---------------------------------------------------------------------------
// Region directory: what the handshake hands a client. The server fills in
// only the regions the client's role needs (present_mask).

enum class RegionKind : uint32_t {
  kControl = 0,  // whole ControlBlock, READ
  kLeases = 1,   // lease lines and the forward journal, READ
  kSlots = 2,    // an actor's: its lease's slots only
  kCommits = 3,  // an actor's: its lease's commit words only
  kStaging = 4,
  kMailbox = 5,
  kParams = 6,
  kStats = 7,
  kActors = 8,  // READ: every ActorLine; an actor's: its own line, WRITE
};
inline constexpr uint32_t kNumRegionKinds = 9;
const char* RegionKindName(RegionKind kind);

// The shape of verbs::RemoteRegion, copied so that the layout does not
// depend on verbs/.
struct WireRegion {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(WireRegion) == 24, "WireRegion matches verbs::RemoteRegion");

inline constexpr uint32_t kNoLease = ~uint32_t{0};

struct RegionDirectory {
  uint64_t magic = kMagic;
  uint32_t layout_version = kLayoutVersion;
  uint32_t present_mask = 0;  // bit k set: regions[k] is filled in
  WireRegion regions[kNumRegionKinds] = {};
  // Actors: the lease granted (kSlots and kCommits cover it alone) and the
  // sequence to continue from (the first of the lease, at or after its
  // ingest cursor, whose commit word is not set, moved up by
  // resume_skipped_laps whole laps of the lease). kNoLease for other roles.
  uint32_t lease = kNoLease;
  // Laps of the lease (LeaseSlots each) skipped after a restart, so that no
  // sequence the previous server may have handed out is used again: the
  // sequences below resume_sequence - resume_skipped_laps * LeaseSlots are
  // committed (done); those from there up to resume_sequence were never
  // received and must be written again from resume_sequence. 0 but on an
  // actor's first grant of its lease after a server restart.
  uint32_t resume_skipped_laps = 0;
  uint64_t resume_sequence = 0;

  void Set(RegionKind kind, const WireRegion& region);
  bool Has(RegionKind kind) const;
  // The region, or a zeroed one when absent.
  const WireRegion& Get(RegionKind kind) const;
  // OK if magic and version match and every present region is non-empty.
  absl::Status Validate() const;
};
static_assert(sizeof(RegionDirectory) == 16 + 24 * kNumRegionKinds + 16, "");
static_assert(offsetof(RegionDirectory, regions) == 16, "");

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_LAYOUT_H_
