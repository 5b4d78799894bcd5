// Copyright dreplay authors.
//
// ibverbs_api.h: the thin seam over the libibverbs calls of a queue pair's
// life after creation (modify, post, poll, destroy, its memory windows), so the provider's
// datapath logic runs in unit tests against a strict fake device
// (ibverbs_fake.h) as well as against the NIC.
//
// Each method has the libibverbs call's exact convention (returns 0 or an
// errno value; PollCq a count or a negative value), so the callers' error
// mapping (ibverbs_errors.h) is the same for both.
//
// RealIbvApi() is stateless and thread-safe; a fake's thread safety is its
// own.

#ifndef DREPLAY_VERBS_IBVERBS_API_H_
#define DREPLAY_VERBS_IBVERBS_API_H_

#include <infiniband/verbs.h>

namespace dreplay::verbs::ibverbs {

class IbvApi {
 public:
  virtual ~IbvApi() = default;
  virtual int ModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) = 0;
  virtual int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) = 0;
  virtual int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) = 0;
  virtual int PollCq(ibv_cq* cq, int entries, ibv_wc* wc) = 0;
  virtual int DestroyQp(ibv_qp* qp) = 0;
  virtual int DestroyCq(ibv_cq* cq) = 0;
  // ibv_alloc_mw: null with errno set on failure.
  virtual ibv_mw* AllocMw(ibv_pd* pd, ibv_mw_type type) = 0;
  virtual int DeallocMw(ibv_mw* mw) = 0;
  virtual int DeregMr(ibv_mr* mr) = 0;
};

// The libibverbs calls themselves. Never null; lives for the process.
IbvApi* RealIbvApi();

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_API_H_
