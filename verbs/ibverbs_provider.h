// Copyright dreplay authors.
//
// ibverbs_provider.h: the libibverbs provider (RoCE NICs, Soft-RoCE / rxe).
//
// Implements verbs.h with reliable-connected (RC) queue pairs over libibverbs.
// Connection setup runs over a TCP control channel (host:port) that carries
// the queue-pair exchange (QPN, PSN, GID, LID, max_rd_atomic) and the
// application payload both ways; see ibverbs_wire.h for the wire format.
//
// What the provider does for the caller:
//  * Device, port and GID index come from ProviderOptions. An empty device
//    picks the first device with an active port; gid_index -1 picks a RoCE v2
//    GID with an IPv4-mapped address, else any RoCE v2 GID, else the first
//    valid GID.
//  * Capabilities are checked before use: atomics need atomic_cap != NONE;
//    max_rd_atomic is the minimum of both sides' requests and the device's
//    max_qp_rd_atom / max_qp_init_rd_atom; inline data is limited to what the
//    created QP reports.
//  * QP attributes for a long (~100 us RTT) link: ack timeout, retry and RNR
//    values from QueuePairOptions, path MTU min(active_mtu, 4096), GRH with
//    hop_limit > 1 (routed RoCE v2) and ProviderOptions::traffic_class
//    (DSCP/ECN), random initial PSNs (ibverbs_attributes.h).
//  * Datapath: WRITEs up to max_inline_data are sent inline; a span passed to
//    PostSend is chained and posted with one ibv_post_send (one doorbell);
//    unsignalled requests are honoured, but every kSignalEvery-th request is
//    signalled so the send queue never fills with WQEs that can't be retired.
//
//  * Asynchronous events: a thread owned by the provider (joined when it is
//    destroyed) reads ibv_get_async_event from the context's non-blocking
//    fd, acknowledges and logs each event, and turns a queue pair's fatal
//    error, its port going down or the device failing into that queue
//    pair's error state (error() kUnavailable naming the event; outstanding
//    requests complete with kFlushed) at its next PostSend, PostRecv or
//    Poll. See ibverbs_async_events.h. Queue pairs that outlive the
//    provider get no further events.
//
// Only the RC semantics of verbs.h are offered; LinkModel and FaultOptions
// are soft-provider features and are refused with kInvalidArgument ("soft
// provider only").
//
// Access flags follow access_rules.h, as in the soft provider: remote write
// or atomic access without kLocalWrite is refused (kInvalidArgument), never
// widened silently.
//
// Differences from the soft provider that callers may notice:
//  * rnr_retry 7 means "retry forever" to the hardware (IB spec); the
//    default (kDefaultRnrRetry, 6) is finite, so a WRITE_WITH_IMM without a
//    posted receive fails with kRnrRetryExceeded after 6 RNR waits.
//  * Requests that fail locally on the device (bad lkey, local bounds)
//    complete with kLocalProtectionError; PostSend only checks what the
//    device cannot (opcode, atomic length, missing region, message size).
//
// Thread safety: as verbs.h states (Provider and MemoryRegion thread-safe,
// a QueuePair used by one thread at a time).

#ifndef DREPLAY_VERBS_IBVERBS_PROVIDER_H_
#define DREPLAY_VERBS_IBVERBS_PROVIDER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "verbs/options.h"
#include "verbs/verbs.h"

namespace dreplay::verbs {

// Opens the device that `options` names (or the first with an active port),
// allocates a protection domain and chooses the GID. Errors:
//  kInvalidArgument  options fail Validate(), or name a port / GID index the
//                    device does not have;
//  kNotFound         no RDMA device, or the named device does not exist, or
//                    no active port / usable GID;
//  kUnavailable / kInternal  libibverbs calls that fail (with the verb named).
// Never crashes on a host without RDMA support. Blocking (device queries).
absl::StatusOr<std::unique_ptr<Provider>> CreateIbverbsProvider(const ProviderOptions& options);

// True if libibverbs lists at least one RDMA device that can be opened. When
// false, `why` (if given) receives a one-line reason such as "no RDMA device:
// libibverbs found 0 devices" or "no RDMA device: ibv_get_device_list: ...
// (no kernel support)"; when true, a one-line description of the devices.
// Thread-safe, blocking (device enumeration).
bool IbverbsDeviceAvailable(std::string* why);

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_IBVERBS_PROVIDER_H_
