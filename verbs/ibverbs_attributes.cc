// Copyright dreplay authors.

#include "verbs/ibverbs_attributes.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::ibverbs {

int ToIbvAccess(uint32_t access) {
  int flags = 0;
  if (access & kLocalWrite) flags |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  if (access & kRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  if (access & kRemoteAtomic) flags |= IBV_ACCESS_REMOTE_ATOMIC;
  if (access & kMemoryWindowBind) flags |= IBV_ACCESS_MW_BIND;
  return flags;
}

QpTransition BuildInitTransition(const Device& device) {
  QpTransition t;
  std::memset(&t.attr, 0, sizeof(t.attr));
  t.attr.qp_state = IBV_QPS_INIT;
  t.attr.pkey_index = 0;
  t.attr.port_num = static_cast<uint8_t>(device.port);
  t.attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           (device.has_atomics() ? IBV_ACCESS_REMOTE_ATOMIC : 0);
  t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return t;
}

absl::StatusOr<QpTransition> BuildRtrTransition(const Device& device,
                                                const QueuePairOptions& options,
                                                const PeerInfo& local, const PeerInfo& remote,
                                                ibv_mtu path_mtu) {
  QpTransition t;
  ibv_qp_attr& rtr = t.attr;
  std::memset(&rtr, 0, sizeof(rtr));
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = path_mtu;
  rtr.dest_qp_num = remote.qpn;
  rtr.rq_psn = remote.psn;
  rtr.max_dest_rd_atomic = static_cast<uint8_t>(local.responder_resources);
  rtr.min_rnr_timer = static_cast<uint8_t>(options.min_rnr_timer);
  rtr.ah_attr.dlid = remote.lid;
  rtr.ah_attr.sl = 0;
  rtr.ah_attr.src_path_bits = 0;
  rtr.ah_attr.port_num = static_cast<uint8_t>(device.port);
  // RoCE always routes by GID (a GRH); InfiniBand only across subnets or
  // when the peer has no LID.
  if (device.is_ethernet() || remote.lid == 0) {
    if (GidIsZero(remote.gid)) {
      return absl::InvalidArgumentError(
          absl::StrCat("peer qpn ", remote.qpn, " sent an empty GID, which RoCE cannot route"));
    }
    rtr.ah_attr.is_global = 1;
    rtr.ah_attr.grh.dgid = remote.gid;
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device.gid_index);
    rtr.ah_attr.grh.hop_limit = kHopLimit;
    rtr.ah_attr.grh.traffic_class = device.traffic_class;
    rtr.ah_attr.grh.flow_label = 0;
  }
  t.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return t;
}

QpTransition BuildRtsTransition(const QueuePairOptions& options, const PeerInfo& local,
                                int max_rd_atomic) {
  QpTransition t;
  ibv_qp_attr& rts = t.attr;
  std::memset(&rts, 0, sizeof(rts));
  rts.qp_state = IBV_QPS_RTS;
  rts.sq_psn = local.psn;
  rts.timeout = static_cast<uint8_t>(options.ack_timeout);
  rts.retry_cnt = static_cast<uint8_t>(options.retry_cnt);
  rts.rnr_retry = static_cast<uint8_t>(options.rnr_retry);
  rts.max_rd_atomic = static_cast<uint8_t>(max_rd_atomic);
  t.mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
           IBV_QP_MAX_QP_RD_ATOMIC;
  return t;
}

}  // namespace dreplay::verbs::ibverbs
