// Copyright dreplay authors.
//
// ibverbs_fake.h: a strict fake device behind the IbvApi seam
// (ibverbs_api.h), for unit tests of the provider's queue-pair logic
// without hardware. It refuses (EINVAL) what a NIC and the kernel refuse
// and keeps the accounting a NIC keeps:
//
//  * QP states RESET -> INIT -> RTR -> RTS, any -> ERR: a transition not in
//    that list, or a mask missing an attribute the kernel requires for RC
//    (ibverbs_attributes.h lists them) or naming one it does not allow, is
//    EINVAL.
//  * Send queue: posting needs RTS (or ERR, where requests are flushed);
//    more than max_send_wr WQEs outstanding is ENOMEM and stops at the bad
//    request (*bad); num_sge above max_send_sge, or IBV_SEND_INLINE above
//    max_inline_data, is EINVAL. Every request executes at once and
//    succeeds; a signalled one adds a completion, and a WQE is freed only
//    when a completion at or after it is polled (selective signalling, as
//    on hardware).
//  * An atomic whose remote address is not 8-byte aligned completes with
//    IBV_WC_REM_INV_REQ_ERR (whether signalled or not) and moves the QP to
//    ERR.
//  * In ERR every outstanding WQE and receive completes with
//    IBV_WC_WR_FLUSH_ERR, in order, signalled or not; so do later posts.
//  * InjectSendError makes the next send request posted to a QP complete
//    with a given error status (a remote access error, say), as a peer or
//    the link would, moving the QP to ERR.
//  * Memory windows: AllocMw makes type-1 or type-2 windows (a key index in
//    the upper 24 bits). An IBV_WR_BIND_MW request must name a type-2
//    window not bound yet, a new key with the window's index and another
//    low byte (ibv_inc_rkey), a region made by RegisterMr with
//    IBV_ACCESS_MW_BIND, a range inside it and, for remote write, a region
//    with local write; otherwise it completes with IBV_WC_MW_BIND_ERR and
//    moves the QP to ERR. A bound window admits (WindowAllows) requests that
//    arrive on its own QP only. Destroying a QP with windows still bound
//    through it, or deregistering (DeregMr) a region with a window bound to
//    it, is a lifetime violation: recorded (violations()), as rxe makes the
//    first a use-after-free and every device refuses the second (EBUSY
//    here).
//  * The CQ holds `cqe` completions; one more is an overrun (recorded, the
//    completion dropped), which the tests check never happens.
//
// Not thread-safe: one test thread drives it.

#ifndef DREPLAY_VERBS_IBVERBS_FAKE_H_
#define DREPLAY_VERBS_IBVERBS_FAKE_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "verbs/ibverbs_api.h"

namespace dreplay::verbs::ibverbs {

class StrictFakeIbv : public IbvApi {
 public:
  struct QpConfig {
    int max_send_wr = 16;
    int max_recv_wr = 16;
    int max_send_sge = 1;
    uint32_t max_inline_data = 64;
    int cqe = 32;
  };

  StrictFakeIbv() = default;
  ~StrictFakeIbv() override;
  StrictFakeIbv(const StrictFakeIbv&) = delete;
  StrictFakeIbv& operator=(const StrictFakeIbv&) = delete;

  // A QP in RESET and its CQ, owned by the fake until DestroyQp/DestroyCq
  // (or the fake's destruction).
  void CreateQp(const QpConfig& config, ibv_qp** qp, ibv_cq** cq);

  // IbvApi.
  int ModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) override;
  int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) override;
  int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) override;
  int PollCq(ibv_cq* cq, int entries, ibv_wc* wc) override;
  int DestroyQp(ibv_qp* qp) override;
  int DestroyCq(ibv_cq* cq) override;
  ibv_mw* AllocMw(ibv_pd* pd, ibv_mw_type type) override;
  int DeallocMw(ibv_mw* mw) override;
  int DeregMr(ibv_mr* mr) override;

  // A memory region as ibv_reg_mr would make it, owned by the fake.
  ibv_mr* RegisterMr(void* addr, size_t length, int access);
  // True when a request arriving on `qp` with `rkey` for [addr, addr +
  // length) and `access` (IBV_ACCESS_REMOTE_*) passes a bound window.
  bool WindowAllows(const ibv_qp* qp, uint32_t rkey, uint64_t addr, uint64_t length,
                    int access) const;
  int windows_allocated() const { return static_cast<int>(mws_.size()); }
  // The lifetime rules broken so far, one line each (empty: none).
  const std::vector<std::string>& violations() const { return violations_; }

  // The next send request posted to `qp` completes with `status` (not
  // IBV_WC_SUCCESS), signalled or not, and the QP moves to ERR.
  void InjectSendError(const ibv_qp* qp, ibv_wc_status status);

  // What tests check.
  ibv_qp_state state(const ibv_qp* qp) const;
  int outstanding_sends(const ibv_qp* qp) const;  // WQEs not yet freed
  int completions_queued(const ibv_cq* cq) const;
  bool cq_overrun(const ibv_cq* cq) const;
  // The attributes of the last accepted transition to `state`.
  const ibv_qp_attr& attr_for(const ibv_qp* qp, ibv_qp_state state) const;
  // Every send request the fake accepted, in order (flags included).
  const std::deque<ibv_send_wr>& accepted_sends(const ibv_qp* qp) const;

 private:
  // A queued completion; a send's frees its QP's WQEs up to `seq` when
  // polled.
  struct Entry {
    ibv_wc wc = {};
    const ibv_qp* qp = nullptr;
    bool send = false;
    uint64_t seq = 0;
  };
  struct FakeCq {
    std::unique_ptr<ibv_cq> cq;
    int capacity = 0;
    std::deque<Entry> entries;
    bool overrun = false;
  };
  struct Wqe {
    uint64_t seq = 0;
    uint64_t wr_id = 0;
  };
  struct FakeQp {
    std::unique_ptr<ibv_qp> qp;
    QpConfig config;
    ibv_cq* cq = nullptr;
    ibv_qp_state state = IBV_QPS_RESET;
    std::map<ibv_qp_state, ibv_qp_attr> attrs;  // by target state
    std::deque<Wqe> sends;                      // WQEs not yet freed, by seq
    uint64_t next_seq = 0;
    std::deque<uint64_t> recvs;  // posted receives' wr_ids
    std::deque<ibv_send_wr> accepted;
    ibv_wc_status inject = IBV_WC_SUCCESS;  // for the next send request
  };

  FakeQp& Qp(const ibv_qp* qp);
  const FakeQp& Qp(const ibv_qp* qp) const;
  FakeCq& Cq(const ibv_cq* cq);
  void Push(FakeQp& qp, const Entry& entry);
  // A completion of `qp` with `status` for `wr_id`.
  static Entry MakeEntry(const FakeQp& qp, uint64_t wr_id, ibv_wc_status status,
                         ibv_wc_opcode opcode, bool send, uint64_t seq);
  // Moves `qp` to ERR and queues flush completions for what is outstanding.
  void EnterError(FakeQp& qp);

  struct FakeMw {
    std::unique_ptr<ibv_mw> mw;
    const ibv_qp* bound_qp = nullptr;  // null: not bound
    const ibv_mr* region = nullptr;    // what it is bound over
    uint32_t rkey = 0;                 // the bound key
    uint64_t addr = 0;
    uint64_t length = 0;
    int access = 0;
  };
  struct FakeMr {
    std::unique_ptr<ibv_mr> mr;
    int access = 0;
  };
  // The completion status of bind request `wr` on `qp` (success binds it).
  ibv_wc_status Bind(const ibv_qp* qp, const ibv_send_wr& wr);

  uint32_t next_qpn_ = 0x100;
  uint32_t next_mw_index_ = 1;
  std::map<const ibv_mw*, FakeMw> mws_;
  std::map<const ibv_mr*, FakeMr> mrs_;
  std::map<const ibv_qp*, FakeQp> qps_;
  std::map<const ibv_cq*, FakeCq> cqs_;
  std::vector<std::string> violations_;
};

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_FAKE_H_
