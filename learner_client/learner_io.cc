// Copyright dreplay authors.

#include "learner_client/learner_io.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::learner {

const char* ReplayPlacementName(ReplayPlacement placement) {
  switch (placement) {
    case ReplayPlacement::kBuffer:
      return "buffer";
    case ReplayPlacement::kLearner:
      return "learner";
    case ReplayPlacement::kHybrid:
      return "hybrid";
  }
  return "unknown";
}

absl::StatusOr<ReplayPlacement> ParseReplayPlacement(const std::string& name) {
  if (name == "buffer") return ReplayPlacement::kBuffer;
  if (name == "learner") return ReplayPlacement::kLearner;
  if (name == "hybrid") return ReplayPlacement::kHybrid;
  return absl::InvalidArgumentError(
      absl::StrCat("replay placement \"", name, "\" is not buffer, learner or hybrid"));
}

std::string SnapshotRecord::ToJson() const {
  return absl::StrFormat(
      "{\"index\": %d, \"wall_s\": %.6f, \"train_steps\": %d, \"env_steps\": %d, "
      "\"link_bytes_total\": %d}",
      index, wall_s, train_steps, env_steps, link_bytes_total);
}

}  // namespace dreplay::learner
