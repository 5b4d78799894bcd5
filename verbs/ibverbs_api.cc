// Copyright dreplay authors.

#include "verbs/ibverbs_api.h"

namespace dreplay::verbs::ibverbs {
namespace {

class RealApi : public IbvApi {
 public:
  int ModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) override {
    return ibv_modify_qp(qp, attr, mask);
  }
  int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) override {
    return ibv_post_send(qp, wr, bad);
  }
  int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) override {
    return ibv_post_recv(qp, wr, bad);
  }
  int PollCq(ibv_cq* cq, int entries, ibv_wc* wc) override { return ibv_poll_cq(cq, entries, wc); }
  int DestroyQp(ibv_qp* qp) override { return ibv_destroy_qp(qp); }
  int DestroyCq(ibv_cq* cq) override { return ibv_destroy_cq(cq); }
  ibv_mw* AllocMw(ibv_pd* pd, ibv_mw_type type) override { return ibv_alloc_mw(pd, type); }
  int DeallocMw(ibv_mw* mw) override { return ibv_dealloc_mw(mw); }
  int DeregMr(ibv_mr* mr) override { return ibv_dereg_mr(mr); }
};

}  // namespace

IbvApi* RealIbvApi() {
  static RealApi* const api = new RealApi();
  return api;
}

}  // namespace dreplay::verbs::ibverbs
