// Copyright dreplay authors.

#include "replay_server/regions.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "protocol/leases.h"

namespace dreplay::server {

absl::Status ReplayRegions::Map(uint64_t bytes, uint64_t segment_bytes, bool remote_read_only,
                                const char* what, Buffer* out) {
  absl::StatusOr<verbs::ShareableMemory> memory =
      verbs::ShareableMemory::Allocate(bytes, segment_bytes, remote_read_only);
  if (!memory.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat("allocating ", bytes, " bytes for the ", what,
                                                     " region: ", memory.status().message()));
  }
  out->memory = std::move(*memory);
  out->data = reinterpret_cast<uint8_t*>(out->memory.data());
  out->bytes = bytes;
  return absl::OkStatus();
}

namespace {

// `bytes` when it is a whole number of pages, else 0 (one segment).
uint64_t SegmentOrWhole(uint64_t bytes) {
  const uint64_t page = verbs::ShareableMemory::PageBytes();
  return bytes > 0 && bytes % page == 0 ? bytes : 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplayRegions>> ReplayRegions::Create(
    const protocol::LayoutConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<ReplayRegions> r(new ReplayRegions(config));
  const uint64_t lease_slots = protocol::LeaseSlots(config);
  RETURN_IF_ERROR(Map(protocol::ControlRegionBytes(config), 0, true, "control", &r->control_));
  RETURN_IF_ERROR(Map(protocol::LeasesRegionBytes(config), 0, true, "leases", &r->leases_));
  RETURN_IF_ERROR(Map(protocol::SlotRingBytes(config),
                      SegmentOrWhole(lease_slots * config.slot_size), false, "slot ring",
                      &r->slots_));
  RETURN_IF_ERROR(Map(protocol::CommitWordsBytes(config),
                      SegmentOrWhole(lease_slots * sizeof(uint64_t)), false, "commit words",
                      &r->commits_));
  RETURN_IF_ERROR(Map(protocol::StagingRingBytes(config), 0, true, "staging ring", &r->staging_));
  RETURN_IF_ERROR(Map(protocol::MailboxBytes(config), 0, false, "priority mailbox", &r->mailbox_));
  RETURN_IF_ERROR(Map(protocol::ParamsRegionBytes(config), 0, false, "params", &r->params_));
  RETURN_IF_ERROR(Map(protocol::StatsRegionBytes(config), 0, true, "stats", &r->stats_));
  if (protocol::ActorsRegionBytes(config) > 0) {
    RETURN_IF_ERROR(Map(protocol::ActorsRegionBytes(config), 0, false, "actors", &r->actors_));
  }
  protocol::ControlHeader& header = r->control()->header;
  header.magic = protocol::kMagic;
  header.layout_version = protocol::kLayoutVersion;
  header.control_block_size = sizeof(protocol::ControlBlock);
  header.config = config;
  r->stats()->capacity = config.capacity;
  return r;
}

ReplayRegions::~ReplayRegions() = default;

const ReplayRegions::Buffer* ReplayRegions::BufferOf(protocol::RegionKind kind) const {
  switch (kind) {
    case protocol::RegionKind::kControl:
      return &control_;
    case protocol::RegionKind::kLeases:
      return &leases_;
    case protocol::RegionKind::kSlots:
      return &slots_;
    case protocol::RegionKind::kCommits:
      return &commits_;
    case protocol::RegionKind::kStaging:
      return &staging_;
    case protocol::RegionKind::kMailbox:
      return &mailbox_;
    case protocol::RegionKind::kParams:
      return &params_;
    case protocol::RegionKind::kStats:
      return &stats_;
    case protocol::RegionKind::kActors:
      return &actors_;
  }
  return nullptr;
}

void* ReplayRegions::region(protocol::RegionKind kind) const {
  const Buffer* buffer = BufferOf(kind);
  if (buffer == nullptr) return nullptr;
  return buffer->data;
}

uint64_t ReplayRegions::region_bytes(protocol::RegionKind kind) const {
  const Buffer* buffer = BufferOf(kind);
  if (buffer == nullptr) return 0;
  return buffer->bytes;
}

}  // namespace dreplay::server
