// Copyright dreplay authors.

#include "verbs/provider_flag_definitions.h"

DEFINE_string(provider, "auto",
              "RDMA provider: auto (ibverbs when a device exists), ibverbs, soft");
DEFINE_string(soft_transport, "auto", dreplay::verbs::kSoftTransportHelp);
DEFINE_string(soft_link_release, "auto", dreplay::verbs::kSoftLinkReleaseHelp);
DEFINE_string(ib_device, "", "ibverbs: device (empty: the first with an active port)");
DEFINE_int32(ib_port, 1, "ibverbs: port number");
DEFINE_int32(gid_index, -1, "ibverbs: GID index (-1: automatic, RoCE v2 preferred)");
DEFINE_int32(traffic_class, 0,
             "ibverbs: traffic class of RoCE v2 packets (DSCP << 2 | ECN, 0..255; e.g. 106 for "
             "DSCP 26 with ECN capable), so switches can queue and mark the long link's traffic");
DEFINE_int32(rnr_retry, 6,
             "ibverbs: retries of a WRITE_WITH_IMM that finds no posted receive, 0..7 (7: "
             "forever); then it fails with an RNR retry error");

namespace dreplay::verbs {

ProviderFlags ProviderFlagsFromCommandLine() {
  return {FLAGS_provider,      FLAGS_ib_device, FLAGS_ib_port,        FLAGS_gid_index,
          FLAGS_traffic_class, FLAGS_rnr_retry, FLAGS_soft_transport, FLAGS_soft_link_release};
}

}  // namespace dreplay::verbs
