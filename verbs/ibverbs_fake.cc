// Copyright dreplay authors.

#include "verbs/ibverbs_fake.h"

#include <cerrno>

#include "glog/logging.h"

namespace dreplay::verbs::ibverbs {
namespace {

constexpr int kInitRequired = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRtrRequired = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsRequired = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                             IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
// What the kernel allows beyond the required (RC).
constexpr int kInitOptional = 0;
constexpr int kRtrOptional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
constexpr int kRtsOptional = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                             IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;

bool MaskFits(int mask, int required, int optional) {
  return (mask & required) == required && (mask & ~(required | optional)) == 0;
}

ibv_wc_opcode WcOpcode(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return IBV_WC_FETCH_ADD;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      return IBV_WC_COMP_SWAP;
    case IBV_WR_BIND_MW:
      return IBV_WC_BIND_MW;
    default:
      return IBV_WC_RDMA_WRITE;
  }
}

bool IsAtomic(ibv_wr_opcode opcode) {
  return opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
}

}  // namespace

StrictFakeIbv::~StrictFakeIbv() = default;

void StrictFakeIbv::CreateQp(const QpConfig& config, ibv_qp** qp, ibv_cq** cq) {
  auto cq_struct = std::make_unique<ibv_cq>();
  cq_struct->cqe = config.cqe;
  ibv_cq* cq_ptr = cq_struct.get();
  FakeCq& fake_cq = cqs_[cq_ptr];
  fake_cq.cq = std::move(cq_struct);
  fake_cq.capacity = config.cqe;
  auto qp_struct = std::make_unique<ibv_qp>();
  qp_struct->qp_num = next_qpn_++;
  qp_struct->qp_type = IBV_QPT_RC;
  qp_struct->send_cq = cq_ptr;
  qp_struct->recv_cq = cq_ptr;
  ibv_qp* qp_ptr = qp_struct.get();
  FakeQp& fake_qp = qps_[qp_ptr];
  fake_qp.qp = std::move(qp_struct);
  fake_qp.config = config;
  fake_qp.cq = cq_ptr;
  *qp = qp_ptr;
  *cq = cq_ptr;
}

StrictFakeIbv::FakeQp& StrictFakeIbv::Qp(const ibv_qp* qp) {
  auto it = qps_.find(qp);
  CHECK(it != qps_.end()) << "not a live fake QP";
  return it->second;
}

const StrictFakeIbv::FakeQp& StrictFakeIbv::Qp(const ibv_qp* qp) const {
  auto it = qps_.find(qp);
  CHECK(it != qps_.end()) << "not a live fake QP";
  return it->second;
}

StrictFakeIbv::FakeCq& StrictFakeIbv::Cq(const ibv_cq* cq) {
  auto it = cqs_.find(cq);
  CHECK(it != cqs_.end()) << "not a live fake CQ";
  return it->second;
}

StrictFakeIbv::Entry StrictFakeIbv::MakeEntry(const FakeQp& qp, uint64_t wr_id,
                                              ibv_wc_status status, ibv_wc_opcode opcode, bool send,
                                              uint64_t seq) {
  Entry e;
  e.wc.wr_id = wr_id;
  e.wc.status = status;
  e.wc.opcode = opcode;
  e.wc.qp_num = qp.qp->qp_num;
  e.qp = qp.qp.get();
  e.send = send;
  e.seq = seq;
  return e;
}

void StrictFakeIbv::Push(FakeQp& qp, const Entry& entry) {
  FakeCq& cq = Cq(qp.cq);
  if (static_cast<int>(cq.entries.size()) >= cq.capacity) {
    cq.overrun = true;
    return;
  }
  cq.entries.push_back(entry);
}

void StrictFakeIbv::EnterError(FakeQp& qp) {
  if (qp.state == IBV_QPS_ERR) return;
  qp.state = IBV_QPS_ERR;
  // Every request here has executed; receives never complete without a
  // peer, so they are flushed.
  for (uint64_t wr_id : qp.recvs) {
    Push(qp, MakeEntry(qp, wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, false, 0));
  }
  qp.recvs.clear();
}

int StrictFakeIbv::ModifyQp(ibv_qp* qp_handle, ibv_qp_attr* attr, int mask) {
  FakeQp& qp = Qp(qp_handle);
  if ((mask & IBV_QP_STATE) == 0) return EINVAL;
  const ibv_qp_state from = qp.state;
  const ibv_qp_state to = attr->qp_state;
  bool ok = false;
  if (to == IBV_QPS_ERR || to == IBV_QPS_RESET) {
    ok = (mask & ~IBV_QP_STATE) == 0;
  } else if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    ok = MaskFits(mask, kInitRequired, kInitOptional);
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    ok = MaskFits(mask, kRtrRequired, kRtrOptional);
  } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    ok = MaskFits(mask, kRtsRequired, kRtsOptional);
  }
  if (!ok) return EINVAL;
  qp.attrs[to] = *attr;
  if (to == IBV_QPS_ERR) {
    EnterError(qp);
  } else if (to == IBV_QPS_RESET) {
    qp.state = IBV_QPS_RESET;
    qp.sends.clear();
    qp.recvs.clear();
  } else {
    qp.state = to;
  }
  return 0;
}

int StrictFakeIbv::PostSend(ibv_qp* qp_handle, ibv_send_wr* wr, ibv_send_wr** bad) {
  FakeQp& qp = Qp(qp_handle);
  for (; wr != nullptr; wr = wr->next) {
    int error = 0;
    if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_ERR) {
      error = EINVAL;
    } else if (wr->num_sge < 0 || wr->num_sge > qp.config.max_send_sge) {
      error = EINVAL;
    } else if (static_cast<int>(qp.sends.size()) >= qp.config.max_send_wr) {
      error = ENOMEM;
    } else if (wr->send_flags & IBV_SEND_INLINE) {
      uint64_t bytes = 0;
      for (int i = 0; i < wr->num_sge; ++i) bytes += wr->sg_list[i].length;
      if (bytes > qp.config.max_inline_data) error = EINVAL;
    }
    if (error != 0) {
      *bad = wr;
      return error;
    }
    qp.accepted.push_back(*wr);
    qp.accepted.back().next = nullptr;
    const uint64_t seq = qp.next_seq++;
    qp.sends.push_back(Wqe{seq, wr->wr_id});
    const ibv_wc_opcode opcode = WcOpcode(wr->opcode);
    if (qp.state == IBV_QPS_ERR) {
      Push(qp, MakeEntry(qp, wr->wr_id, IBV_WC_WR_FLUSH_ERR, opcode, true, seq));
    } else if (qp.inject != IBV_WC_SUCCESS) {
      Push(qp, MakeEntry(qp, wr->wr_id, qp.inject, opcode, true, seq));
      qp.inject = IBV_WC_SUCCESS;
      EnterError(qp);
    } else if (wr->opcode == IBV_WR_BIND_MW && Bind(qp_handle, *wr) != IBV_WC_SUCCESS) {
      Push(qp, MakeEntry(qp, wr->wr_id, IBV_WC_MW_BIND_ERR, opcode, true, seq));
      EnterError(qp);
    } else if (IsAtomic(wr->opcode) && wr->wr.atomic.remote_addr % 8 != 0) {
      Push(qp, MakeEntry(qp, wr->wr_id, IBV_WC_REM_INV_REQ_ERR, opcode, true, seq));
      EnterError(qp);
    } else if (wr->send_flags & IBV_SEND_SIGNALED) {
      Push(qp, MakeEntry(qp, wr->wr_id, IBV_WC_SUCCESS, opcode, true, seq));
    }
  }
  return 0;
}

int StrictFakeIbv::PostRecv(ibv_qp* qp_handle, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  FakeQp& qp = Qp(qp_handle);
  for (; wr != nullptr; wr = wr->next) {
    if (qp.state == IBV_QPS_RESET || static_cast<int>(qp.recvs.size()) >= qp.config.max_recv_wr) {
      *bad = wr;
      return qp.state == IBV_QPS_RESET ? EINVAL : ENOMEM;
    }
    if (qp.state == IBV_QPS_ERR) {
      Push(qp, MakeEntry(qp, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, false, 0));
    } else {
      qp.recvs.push_back(wr->wr_id);
    }
  }
  return 0;
}

int StrictFakeIbv::PollCq(ibv_cq* cq_handle, int entries, ibv_wc* wc) {
  FakeCq& cq = Cq(cq_handle);
  int n = 0;
  while (n < entries && !cq.entries.empty()) {
    const Entry e = cq.entries.front();
    cq.entries.pop_front();
    wc[n++] = e.wc;
    if (e.send) {
      // This completion retires every WQE of its QP up to it.
      auto it = qps_.find(e.qp);
      if (it == qps_.end()) continue;
      std::deque<Wqe>& sends = it->second.sends;
      while (!sends.empty() && sends.front().seq <= e.seq) sends.pop_front();
    }
  }
  return n;
}

int StrictFakeIbv::DestroyQp(ibv_qp* qp) {
  if (qps_.erase(qp) != 1) return EINVAL;
  for (auto& [handle, mw] : mws_) {
    if (mw.bound_qp != qp) continue;
    violations_.push_back(
        "ibv_destroy_qp with a window still bound through it (rxe waits on it, and the "
        "window's dealloc afterwards touches freed memory)");
    mw.bound_qp = nullptr;
  }
  return 0;
}

ibv_mw* StrictFakeIbv::AllocMw(ibv_pd* pd, ibv_mw_type type) {
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
    errno = EINVAL;
    return nullptr;
  }
  auto mw = std::make_unique<ibv_mw>();
  mw->pd = pd;
  mw->type = type;
  mw->rkey = (next_mw_index_++ << 8) | 0x5a;
  ibv_mw* handle = mw.get();
  mws_[handle].mw = std::move(mw);
  return handle;
}

int StrictFakeIbv::DeallocMw(ibv_mw* mw) { return mws_.erase(mw) == 1 ? 0 : EINVAL; }

int StrictFakeIbv::DeregMr(ibv_mr* mr) {
  if (mrs_.count(mr) != 1) return EINVAL;
  for (const auto& [handle, mw] : mws_) {
    if (mw.bound_qp != nullptr && mw.region == mr) {
      violations_.push_back("ibv_dereg_mr with a window still bound to the region");
      return EBUSY;
    }
  }
  mrs_.erase(mr);
  return 0;
}

ibv_mr* StrictFakeIbv::RegisterMr(void* addr, size_t length, int access) {
  auto mr = std::make_unique<ibv_mr>();
  mr->addr = addr;
  mr->length = length;
  mr->lkey = mr->rkey = 0x4000 + static_cast<uint32_t>(mrs_.size());
  ibv_mr* handle = mr.get();
  mrs_[handle] = FakeMr{std::move(mr), access};
  return handle;
}

ibv_wc_status StrictFakeIbv::Bind(const ibv_qp* qp, const ibv_send_wr& wr) {
  auto mw = mws_.find(wr.bind_mw.mw);
  if (mw == mws_.end() || mw->second.mw->type != IBV_MW_TYPE_2 || mw->second.bound_qp != nullptr) {
    return IBV_WC_MW_BIND_ERR;
  }
  const uint32_t rkey = wr.bind_mw.rkey;
  const uint32_t old_key = mw->second.mw->rkey;
  if ((rkey >> 8) != (old_key >> 8) || rkey == old_key) return IBV_WC_MW_BIND_ERR;
  const ibv_mw_bind_info& info = wr.bind_mw.bind_info;
  auto mr = mrs_.find(info.mr);
  if (mr == mrs_.end() || (mr->second.access & IBV_ACCESS_MW_BIND) == 0) {
    return IBV_WC_MW_BIND_ERR;
  }
  const auto begin = reinterpret_cast<uint64_t>(info.mr->addr);
  if (info.length == 0 || info.addr < begin || info.length > info.mr->length ||
      info.addr - begin > info.mr->length - info.length) {
    return IBV_WC_MW_BIND_ERR;
  }
  const int remote = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
  if ((info.mw_access_flags & ~remote) != 0 ||
      ((info.mw_access_flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
       (mr->second.access & IBV_ACCESS_LOCAL_WRITE) == 0)) {
    return IBV_WC_MW_BIND_ERR;
  }
  FakeMw& w = mw->second;
  w.bound_qp = qp;
  w.region = info.mr;
  w.rkey = rkey;
  w.addr = info.addr;
  w.length = info.length;
  w.access = static_cast<int>(info.mw_access_flags);
  return IBV_WC_SUCCESS;
}

bool StrictFakeIbv::WindowAllows(const ibv_qp* qp, uint32_t rkey, uint64_t addr, uint64_t length,
                                 int access) const {
  for (const auto& [handle, w] : mws_) {
    if (w.bound_qp != qp || w.rkey != rkey) continue;
    return addr >= w.addr && length <= w.length && addr - w.addr <= w.length - length &&
           (w.access & access) == access;
  }
  return false;
}

int StrictFakeIbv::DestroyCq(ibv_cq* cq) {
  for (const auto& [handle, qp] : qps_) {
    if (qp.cq == cq) return EBUSY;  // a QP still uses it
  }
  return cqs_.erase(cq) == 1 ? 0 : EINVAL;
}

void StrictFakeIbv::InjectSendError(const ibv_qp* qp, ibv_wc_status status) {
  CHECK_NE(status, IBV_WC_SUCCESS);
  Qp(qp).inject = status;
}

ibv_qp_state StrictFakeIbv::state(const ibv_qp* qp) const { return Qp(qp).state; }

int StrictFakeIbv::outstanding_sends(const ibv_qp* qp) const {
  return static_cast<int>(Qp(qp).sends.size());
}

int StrictFakeIbv::completions_queued(const ibv_cq* cq) const {
  auto it = cqs_.find(cq);
  CHECK(it != cqs_.end());
  return static_cast<int>(it->second.entries.size());
}

bool StrictFakeIbv::cq_overrun(const ibv_cq* cq) const {
  auto it = cqs_.find(cq);
  CHECK(it != cqs_.end());
  return it->second.overrun;
}

const ibv_qp_attr& StrictFakeIbv::attr_for(const ibv_qp* qp, ibv_qp_state state) const {
  const FakeQp& fake = Qp(qp);
  auto it = fake.attrs.find(state);
  CHECK(it != fake.attrs.end()) << "no transition to state " << state;
  return it->second;
}

const std::deque<ibv_send_wr>& StrictFakeIbv::accepted_sends(const ibv_qp* qp) const {
  return Qp(qp).accepted;
}

}  // namespace dreplay::verbs::ibverbs
