// Copyright dreplay authors.

#include "verbs/access_rules.h"

#include "absl/strings/str_cat.h"
#include "verbs/verbs.h"

namespace dreplay::verbs {

uint32_t AllAccessFlags() {
  return kLocalWrite | kRemoteRead | kRemoteWrite | kRemoteAtomic | kMemoryWindowBind;
}

absl::Status CheckAccessFlags(uint32_t access) {
  const uint32_t unknown = access & ~AllAccessFlags();
  if (unknown != 0) {
    return absl::InvalidArgumentError(absl::StrCat("access flags 0x", absl::Hex(access),
                                                   ": unknown bits 0x", absl::Hex(unknown)));
  }
  if ((access & (kRemoteWrite | kRemoteAtomic)) != 0 && (access & kLocalWrite) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("access flags 0x", absl::Hex(access),
                     ": remote write or atomic access needs kLocalWrite as well"));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::verbs
