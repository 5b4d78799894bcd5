// Copyright dreplay authors.

#include "verbs/provider_flags.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/flag_values.h"

namespace dreplay::verbs {

absl::StatusOr<ProviderOptions> ProviderOptionsFromFlags(const ProviderFlags& flags) {
  ProviderOptions options;
  absl::StatusOr<ProviderKind> kind = ParseProviderKind(flags.provider);
  if (!kind.ok()) return FlagError("provider", flags.provider, kind.status().message());
  options.kind = *kind;
  options.ib_device = flags.ib_device;
  options.ib_port = flags.ib_port;
  options.gid_index = flags.gid_index;
  options.traffic_class = flags.traffic_class;
  const absl::Status s = options.Validate();
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("bad ibverbs flag: ", s.message()));
  return options;
}

}  // namespace dreplay::verbs
