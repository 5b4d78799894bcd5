// Copyright dreplay authors.

#include "verbs/provider_flags.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/flag_values.h"
#include "common/status_macros.h"

namespace dreplay::verbs {

namespace {

absl::Status CheckRnrRetry(int rnr_retry) {
  if (rnr_retry >= 0 && rnr_retry <= kInfiniteRnrRetry) return absl::OkStatus();
  return FlagError("rnr_retry", absl::StrCat(rnr_retry),
                   absl::StrCat("must be 0 to ", kInfiniteRnrRetry, " (", kInfiniteRnrRetry,
                                ": retry forever)"));
}

}  // namespace

absl::Status ApplyQueuePairFlags(const ProviderFlags& flags, QueuePairOptions* options) {
  RETURN_IF_ERROR(CheckRnrRetry(flags.rnr_retry));
  options->rnr_retry = flags.rnr_retry;
  return absl::OkStatus();
}

absl::StatusOr<ProviderOptions> ProviderOptionsFromFlags(const ProviderFlags& flags) {
  RETURN_IF_ERROR(CheckRnrRetry(flags.rnr_retry));
  ProviderOptions options;
  absl::StatusOr<ProviderKind> kind = ParseProviderKind(flags.provider);
  if (!kind.ok()) return FlagError("provider", flags.provider, kind.status().message());
  options.kind = *kind;
  options.ib_device = flags.ib_device;
  options.ib_port = flags.ib_port;
  options.gid_index = flags.gid_index;
  options.traffic_class = flags.traffic_class;
  absl::StatusOr<SoftTransport> transport = ParseSoftTransport(flags.soft_transport);
  if (!transport.ok()) {
    return FlagError("soft_transport", flags.soft_transport, transport.status().message());
  }
  options.soft_transport = *transport;
  absl::StatusOr<SoftLinkRelease> release = ParseSoftLinkRelease(flags.soft_link_release);
  if (!release.ok()) {
    return FlagError("soft_link_release", flags.soft_link_release, release.status().message());
  }
  options.soft_link_release = *release;
  const absl::Status s = options.Validate();
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("bad ibverbs flag: ", s.message()));
  return options;
}

}  // namespace dreplay::verbs
