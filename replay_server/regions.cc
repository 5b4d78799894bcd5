// Copyright dreplay authors.

#include "replay_server/regions.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dreplay::server {

absl::Status ReplayRegions::Map(uint64_t bytes, const char* what, Buffer* out) {
  const uint64_t mapped = protocol::RoundUp(bytes, protocol::kRegionAlignment);
  // Anonymous private mappings are page-aligned and zero-filled.
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("mmap of ", mapped, " bytes for the ", what,
                                                     " region failed: ", std::strerror(errno)));
  }
  out->data = static_cast<uint8_t*>(p);
  out->bytes = bytes;
  out->mapped = mapped;
  return absl::OkStatus();
}

void ReplayRegions::Unmap(Buffer* buffer) {
  if (buffer->data != nullptr) munmap(buffer->data, buffer->mapped);
  buffer->data = nullptr;
}

absl::StatusOr<std::unique_ptr<ReplayRegions>> ReplayRegions::Create(
    const protocol::LayoutConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<ReplayRegions> r(new ReplayRegions(config));
  RETURN_IF_ERROR(Map(protocol::ControlRegionBytes(config), "control", &r->control_));
  RETURN_IF_ERROR(Map(protocol::LeasesRegionBytes(config), "leases", &r->leases_));
  RETURN_IF_ERROR(Map(protocol::SlotRingBytes(config), "slot ring", &r->slots_));
  RETURN_IF_ERROR(Map(protocol::CommitWordsBytes(config), "commit words", &r->commits_));
  RETURN_IF_ERROR(Map(protocol::StagingRingBytes(config), "staging ring", &r->staging_));
  RETURN_IF_ERROR(Map(protocol::MailboxBytes(config), "priority mailbox", &r->mailbox_));
  RETURN_IF_ERROR(Map(protocol::ParamsRegionBytes(config), "params", &r->params_));
  RETURN_IF_ERROR(Map(protocol::StatsRegionBytes(config), "stats", &r->stats_));
  if (protocol::ActorsRegionBytes(config) > 0) {
    RETURN_IF_ERROR(Map(protocol::ActorsRegionBytes(config), "actors", &r->actors_));
  }
  protocol::ControlHeader& header = r->control()->header;
  header.magic = protocol::kMagic;
  header.layout_version = protocol::kLayoutVersion;
  header.control_block_size = sizeof(protocol::ControlBlock);
  header.config = config;
  r->stats()->capacity = config.capacity;
  return r;
}

ReplayRegions::~ReplayRegions() {
  for (Buffer* b : {&control_, &leases_, &slots_, &commits_, &staging_, &mailbox_, &params_,
                    &stats_, &actors_}) {
    Unmap(b);
  }
}

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
