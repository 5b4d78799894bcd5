// Copyright dreplay authors.

#include "protocol/layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::protocol {

void RegionDirectory::Set(RegionKind kind, const WireRegion& region) {
  const auto k = static_cast<uint32_t>(kind);
  if (k >= kNumRegionKinds) return;
  regions[k] = region;
  present_mask |= 1u << k;
}

bool RegionDirectory::Has(RegionKind kind) const {
  const auto k = static_cast<uint32_t>(kind);
  return k < kNumRegionKinds && (present_mask & (1u << k)) != 0;
}

const WireRegion& RegionDirectory::Get(RegionKind kind) const {
  static const WireRegion kAbsent{};
  return Has(kind) ? regions[static_cast<uint32_t>(kind)] : kAbsent;
}

absl::Status RegionDirectory::Validate() const {
  if (magic != kMagic) {
    return absl::FailedPreconditionError(
        absl::StrFormat("region directory magic 0x%016x is not dreplay's", magic));
  }
  if (layout_version != kLayoutVersion) {
    return absl::FailedPreconditionError(absl::StrCat("region directory layout version ",
                                                      layout_version, " but this build speaks ",
                                                      kLayoutVersion));
  }
  if ((present_mask >> kNumRegionKinds) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("region directory present_mask 0x%x names unknown regions", present_mask));
  }
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    if ((present_mask & (1u << k)) != 0 && regions[k].length == 0) {
      return absl::InvalidArgumentError(absl::StrCat("region directory entry ",
                                                     RegionKindName(static_cast<RegionKind>(k)),
                                                     " is present but empty"));
    }
  }
  return absl::OkStatus();
}

const char* RegionKindName(RegionKind kind) {
  // Indexed by RegionKind's value.
  static constexpr const char* kNames[] = {"control", "leases", "slots", "commits", "staging",
                                           "mailbox", "params", "stats", "actors"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumRegionKinds, "a name per kind");
  const auto k = static_cast<uint32_t>(kind);
  return k < kNumRegionKinds ? kNames[k] : "unknown";
}

}  // namespace dreplay::protocol
