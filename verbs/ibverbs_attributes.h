// Copyright dreplay authors.
//
// ibverbs_attributes.h: what the verbs layer's flags and options become in
// libibverbs' structures, as pure functions (no verb is called), so that the
// exact flags and attribute masks are tested without a device.
//
// The RC transitions carry exactly the attributes the kernel requires (IB
// spec, "QP state transition" table; ib_modify_qp_is_ok in the kernel):
//   RESET->INIT  STATE | PKEY_INDEX | PORT | ACCESS_FLAGS
//   INIT->RTR    STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN |
//                MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER
//   RTR->RTS     STATE | SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY |
//                MAX_QP_RD_ATOMIC
//
// Thread-safe (pure).

#ifndef DREPLAY_VERBS_IBVERBS_ATTRIBUTES_H_
#define DREPLAY_VERBS_IBVERBS_ATTRIBUTES_H_

#include <infiniband/verbs.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "verbs/ibverbs_device.h"
#include "verbs/ibverbs_wire.h"
#include "verbs/options.h"

namespace dreplay::verbs::ibverbs {

// verbs.h access flags -> ibv_access_flags, one for one. Nothing is added:
// the caller checks them with CheckAccessFlags (access_rules.h) first, which
// refuses remote write or atomic access without local write, as
// libibverbs does.
int ToIbvAccess(uint32_t access);

// Routed RoCE v2 needs a hop limit above 1; 64 is the usual IP default.
inline constexpr uint8_t kHopLimit = 64;

// One ibv_modify_qp: the attributes and the mask naming those set.
struct QpTransition {
  ibv_qp_attr attr = {};
  int mask = 0;
};

// RESET->INIT on device.port. The QP allows every remote operation the
// device has; each memory region's own access flags decide what a peer may
// actually do.
QpTransition BuildInitTransition(const Device& device);

// INIT->RTR against `remote`, with `local`'s responder resources and
// `path_mtu`. On Ethernet (RoCE), or when the peer has no LID, the address
// vector has a GRH: the peer's GID, device.gid_index, kHopLimit and
// device.traffic_class. kInvalidArgument when a GRH is needed and the peer
// sent an empty GID.
absl::StatusOr<QpTransition> BuildRtrTransition(const Device& device,
                                                const QueuePairOptions& options,
                                                const PeerInfo& local, const PeerInfo& remote,
                                                ibv_mtu path_mtu);

// RTR->RTS with `local`'s PSN, the options' timers and retries, and
// `max_rd_atomic` READs and atomics in flight.
QpTransition BuildRtsTransition(const QueuePairOptions& options, const PeerInfo& local,
                                int max_rd_atomic);

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_ATTRIBUTES_H_
