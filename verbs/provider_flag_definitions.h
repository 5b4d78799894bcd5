// Copyright dreplay authors.
//
// provider_flag_definitions.h: the provider flags (--provider, --ib_device,
// --ib_port, --gid_index, --traffic_class, --rnr_retry, --soft_transport,
// --soft_link_release),
// defined once for every binary that connects to a replay server. For
// binaries only: linking this defines the flags, and ProviderFlagsFromCommandLine()
// reads them, so call it from main() after the command line is parsed.
//
//   ASSIGN_OR_RETURN(verbs::ProviderOptions options,
//                    verbs::ProviderOptionsFromFlags(verbs::ProviderFlagsFromCommandLine()));

#ifndef DREPLAY_VERBS_PROVIDER_FLAG_DEFINITIONS_H_
#define DREPLAY_VERBS_PROVIDER_FLAG_DEFINITIONS_H_

#include "gflags/gflags.h"
#include "verbs/provider_flags.h"

DECLARE_string(provider);
DECLARE_string(soft_transport);
DECLARE_string(soft_link_release);
DECLARE_string(ib_device);
DECLARE_int32(ib_port);
DECLARE_int32(gid_index);
DECLARE_int32(traffic_class);
DECLARE_int32(rnr_retry);

namespace dreplay::verbs {

// The provider flags' current values. Call from main() only.
ProviderFlags ProviderFlagsFromCommandLine();

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_PROVIDER_FLAG_DEFINITIONS_H_
