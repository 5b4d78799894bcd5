// Copyright dreplay authors.

#include "replay_server/regions.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dreplay::replay {

absl::Status ReplayRegions::Map(uint64_t bytes, const char* what, Buffer* out) {
  const uint64_t mapped = RoundUp(bytes, kRegionAlignment);
  // Anonymous private mappings are page-aligned and zero-filled.
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "mmap of ", mapped, " bytes for the ", what, " region failed: ", std::strerror(errno)));
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

absl::StatusOr<std::unique_ptr<ReplayRegions>> ReplayRegions::Create(const LayoutConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<ReplayRegions> r(new ReplayRegions(config));
  RETURN_IF_ERROR(Map(ControlRegionBytes(config), "control", &r->control_));
  RETURN_IF_ERROR(Map(SlotRingBytes(config), "slot ring", &r->slots_));
  RETURN_IF_ERROR(Map(CommitWordsBytes(config), "commit words", &r->commits_));
  RETURN_IF_ERROR(Map(StagingRingBytes(config), "staging ring", &r->staging_));
  RETURN_IF_ERROR(Map(MailboxBytes(config), "priority mailbox", &r->mailbox_));
  RETURN_IF_ERROR(Map(ParamsRegionBytes(config), "params", &r->params_));
  RETURN_IF_ERROR(Map(StatsRegionBytes(config), "stats", &r->stats_));
  if (ActorsRegionBytes(config) > 0) {
    RETURN_IF_ERROR(Map(ActorsRegionBytes(config), "actors", &r->actors_));
  }
  ControlHeader& header = r->control()->header;
  header.magic = kMagic;
  header.layout_version = kLayoutVersion;
  header.control_block_size = sizeof(ControlBlock);
  header.config = config;
  r->stats()->capacity = config.capacity;
  return r;
}

ReplayRegions::~ReplayRegions() {
  for (Buffer* b : {&control_, &slots_, &commits_, &staging_, &mailbox_, &params_, &stats_, &actors_}) {
    Unmap(b);
  }
}

void* ReplayRegions::region(RegionKind kind) const {
  switch (kind) {
    case RegionKind::kControl:
      return control_.data;
    case RegionKind::kTail:
      return control_.data + kTailOffset;
    case RegionKind::kSlots:
      return slots_.data;
    case RegionKind::kCommits:
      return commits_.data;
    case RegionKind::kStaging:
      return staging_.data;
    case RegionKind::kMailbox:
      return mailbox_.data;
    case RegionKind::kParams:
      return params_.data;
    case RegionKind::kStats:
      return stats_.data;
    case RegionKind::kActors:
      return actors_.data;
  }
  return nullptr;
}

uint64_t ReplayRegions::region_bytes(RegionKind kind) const {
  switch (kind) {
    case RegionKind::kControl:
      return control_.bytes;
    case RegionKind::kTail:
      return kTailLineBytes;
    case RegionKind::kSlots:
      return slots_.bytes;
    case RegionKind::kCommits:
      return commits_.bytes;
    case RegionKind::kStaging:
      return staging_.bytes;
    case RegionKind::kMailbox:
      return mailbox_.bytes;
    case RegionKind::kParams:
      return params_.bytes;
    case RegionKind::kStats:
      return stats_.bytes;
    case RegionKind::kActors:
      return actors_.bytes;
  }
  return 0;
}

}  // namespace dreplay::replay
