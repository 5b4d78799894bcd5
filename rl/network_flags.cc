// Copyright dreplay authors.

#include "rl/network_flags.h"

#include "absl/strings/str_cat.h"
#include "common/flag_values.h"
#include "rl/qnet.h"

namespace dreplay::rl {

absl::StatusOr<ObservationMode> ObservationFlag(const std::string& value) {
  absl::StatusOr<ObservationMode> mode = ParseObservationMode(value);
  if (!mode.ok()) return FlagError("observation", value, "must be native or pixels84");
  return mode;
}

absl::StatusOr<std::vector<int>> HiddenFlag(const std::string& value, const std::string& env,
                                            ObservationMode mode) {
  if (!value.empty()) return SizeList("hidden", value);
  absl::StatusOr<std::vector<int>> sizes = DefaultHiddenSizesFor(env, mode);
  if (!sizes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad flags --env=", env,
                                                   " --observation=", ObservationModeName(mode),
                                                   ": ", sizes.status().message()));
  }
  return sizes;
}

}  // namespace dreplay::rl
