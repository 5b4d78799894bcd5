// Copyright dreplay authors.
//
// provider_factory.cc: CreateProvider() and RdmaDeviceAvailable().

#include <memory>
#include <string>

#include "common/status_macros.h"
#include "glog/logging.h"
#include "verbs/ibverbs_provider.h"
#include "verbs/soft/provider.h"
#include "verbs/verbs.h"

namespace dreplay::verbs {

absl::StatusOr<std::unique_ptr<Provider>> CreateProvider(const ProviderOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  switch (options.kind) {
    case ProviderKind::kSoft:
      return CreateSoftProvider(options);
    case ProviderKind::kIbverbs:
      return CreateIbverbsProvider(options);
    case ProviderKind::kAuto:
      break;
  }
  std::string why;
  if (!IbverbsDeviceAvailable(&why)) {
    LOG(INFO) << "provider auto: using soft (" << why << ")";
    return CreateSoftProvider(options);
  }
  absl::StatusOr<std::unique_ptr<Provider>> ibverbs = CreateIbverbsProvider(options);
  if (ibverbs.ok()) {
    LOG(INFO) << "provider auto: using ibverbs (" << why << ")";
    return ibverbs;
  }
  // A device is listed but unusable (no active port, no usable GID): the
  // software provider still gives the same semantics.
  LOG(WARNING) << "provider auto: using soft: an RDMA device is present (" << why
               << ") but the ibverbs provider failed: " << ibverbs.status();
  return CreateSoftProvider(options);
}

bool RdmaDeviceAvailable(std::string* why) {
  std::string reason;
  const bool available = IbverbsDeviceAvailable(&reason);
  if (why != nullptr) *why = reason;
  return available;
}

}  // namespace dreplay::verbs
