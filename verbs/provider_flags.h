// Copyright dreplay authors.
//
// provider_flags.h: the provider flags (--provider, --ib_device, --ib_port,
// --gid_index, --traffic_class, --rnr_retry, --soft_transport, --soft_link_release), as plain
// values that main()
// copies from its flags, turned into ProviderOptions (and the queue pairs'
// rnr_retry) in one place. Takes values, never reads flags.
//
//   ProviderFlags flags{FLAGS_provider, FLAGS_ib_device, FLAGS_ib_port, FLAGS_gid_index,
//                       FLAGS_traffic_class, FLAGS_rnr_retry};
//   ASSIGN_OR_RETURN(ProviderOptions options, ProviderOptionsFromFlags(flags));
//   RETURN_IF_ERROR(ApplyQueuePairFlags(flags, &queue_pair_options));

#ifndef DREPLAY_VERBS_PROVIDER_FLAGS_H_
#define DREPLAY_VERBS_PROVIDER_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "verbs/options.h"

namespace dreplay::verbs {

// The help text of --soft_transport, the same in every binary.
inline constexpr char kSoftTransportHelp[] =
    "soft provider: auto (a peer on the same host maps shared memory for WRITE and READ; "
    "else TCP) or tcp (always TCP: for a fault-injecting proxy, or same-host peers of the same "
    "user that are not trusted)";

// The help text of --soft_link_release, the same in every binary.
inline constexpr char kSoftLinkReleaseHelp[] =
    "soft provider, emulated links: who waits for each frame's modelled arrival. auto (the "
    "sender, and on one host the receiver too, for a frame that comes early: none is ever "
    "early; on one host small responses go at once and their receiver holds them), receiver (on "
    "one host the sender writes small frames at once and the receiver "
    "holds them; slower on the benchmarks so far) or sender (the sender alone, as between "
    "hosts)";

// The flags' values; the defaults are the flags' defaults.
struct ProviderFlags {
  std::string provider = "auto";  // --provider: auto, ibverbs, soft
  std::string ib_device;          // --ib_device
  int ib_port = 1;                // --ib_port
  int gid_index = -1;             // --gid_index
  int traffic_class = 0;          // --traffic_class: RoCE v2 DSCP << 2 | ECN
  // --rnr_retry: ibverbs: how often a WRITE_WITH_IMM that finds no posted
  // receive is retried, 0..7 (7: forever, on hardware).
  int rnr_retry = kDefaultRnrRetry;
  // --soft_transport: auto (shared memory with a same-host peer) or tcp.
  std::string soft_transport = "auto";
  // --soft_link_release: auto, receiver or sender.
  std::string soft_link_release = "auto";
};

// InvalidArgument naming the bad flag and value ("--provider=x: ...", or
// "bad ibverbs flag: ..." with ProviderOptions::Validate()'s message).
// Also refuses an --rnr_retry outside 0..7, so every main checks it early.
absl::StatusOr<ProviderOptions> ProviderOptionsFromFlags(const ProviderFlags& flags);

// Sets the flags' per-queue-pair settings (rnr_retry) in `options`.
// InvalidArgument naming --rnr_retry when it is outside 0..7.
absl::Status ApplyQueuePairFlags(const ProviderFlags& flags, QueuePairOptions* options);

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_PROVIDER_FLAGS_H_
