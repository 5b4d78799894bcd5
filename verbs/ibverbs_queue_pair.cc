// Copyright dreplay authors.

#include "verbs/ibverbs_queue_pair.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "verbs/ibverbs_attributes.h"
#include "verbs/ibverbs_errors.h"

namespace dreplay::verbs::ibverbs {
namespace {

// Completions taken from the CQ per ibv_poll_cq call.
constexpr int kPollBatch = 32;
// wr_id tag of receive requests (send requests carry their sequence number).
constexpr uint64_t kRecvTag = uint64_t{1} << 63;

}  // namespace

QpObjects::QpObjects(QpObjects&& other)
    : device_name(std::move(other.device_name)),
      api(other.api),
      cq(std::exchange(other.cq, nullptr)),
      qp(std::exchange(other.qp, nullptr)),
      max_inline_data(other.max_inline_data) {}

void QpObjects::Destroy(const std::string& qp_label) {
  // Reverse order of creation: QP, then CQ; MRs, PD and context go with the
  // last reference to the Device.
  if (qp != nullptr) {
    const absl::Status s = IbvResultToStatus(api->DestroyQp(qp), "ibv_destroy_qp");
    LOG_IF(ERROR, !s.ok()) << qp_label << ": " << s;
    qp = nullptr;
  }
  if (cq != nullptr) {
    const absl::Status s = IbvResultToStatus(api->DestroyCq(cq), "ibv_destroy_cq");
    LOG_IF(ERROR, !s.ok()) << device_name << ": " << s;
    cq = nullptr;
  }
}

IbverbsQueuePair::IbverbsQueuePair(std::shared_ptr<Device> device, const QueuePairOptions& options,
                                   QpObjects objects, const PeerInfo& remote, int max_rd_atomic)
    : device_(std::move(device)),
      objects_(std::move(objects)),
      remote_(remote),
      max_rd_atomic_(max_rd_atomic),
      max_send_wr_(options.max_send_wr),
      max_recv_wr_(options.max_recv_wr),
      fault_(device_->faults.Register(objects_.qp, objects_.cq)),
      send_queue_(options.max_send_wr, std::clamp(options.max_send_wr / 4, 1, kMaxUnsignaledRun)),
      send_slots_(options.max_send_wr),
      recv_slots_(std::max(options.max_recv_wr, 1)),
      send_scratch_(options.max_send_wr),
      sge_scratch_(options.max_send_wr),
      recv_scratch_(std::max(options.max_recv_wr, 1)) {}

IbverbsQueuePair::~IbverbsQueuePair() {
  device_->faults.Unregister(objects_.qp, objects_.cq);
  // Windows first: rxe's ibv_destroy_qp waits on the windows bound through
  // the queue pair, and a dealloc after it touches freed memory.
  device_->windows.ReleaseQueuePair(device_->api, this);
  objects_.Destroy(Describe());
}

absl::StatusOr<RemoteRegion> IbverbsQueuePair::BindWindow(const MemoryRegion& mr, uint64_t offset,
                                                          uint64_t length, uint32_t remote_access) {
  CheckAsyncFault();
  const auto* handle = dynamic_cast<const IbvRegionHandle*>(&mr);
  if (handle == nullptr) {
    return absl::InvalidArgumentError("BindWindow: not a memory region of the ibverbs provider");
  }
  if (length == 0 || offset > mr.length() || length > mr.length() - offset) {
    return absl::InvalidArgumentError(absl::StrCat("BindWindow: [", offset, ", +", length,
                                                   ") is not inside a region of ", mr.length(),
                                                   " bytes"));
  }
  if (length > kMaxWindowBytes) {
    return absl::InvalidArgumentError(absl::StrCat("BindWindow: ", length, " bytes is longer than ",
                                                   kMaxWindowBytes,
                                                   ", the longest window mlx5 can bind"));
  }
  if ((mr.access() & kMemoryWindowBind) == 0) {
    return absl::InvalidArgumentError(
        "BindWindow: the memory region was not registered with kMemoryWindowBind");
  }
  if (remote_access == 0 || (remote_access & ~(kRemoteRead | kRemoteWrite | kRemoteAtomic)) != 0 ||
      ((remote_access & (kRemoteWrite | kRemoteAtomic)) != 0 && (mr.access() & kLocalWrite) == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("BindWindow: rights 0x",
                                                   absl::Hex(remote_access),
                                                   " are not remote rights the region can back"));
  }
  if (state_ == QpState::kError) {
    return absl::FailedPreconditionError(
        absl::StrCat("BindWindow: queue pair in the error state: ", error_.message()));
  }
  RETURN_IF_ERROR(send_queue_.CheckRoom(1));
  errno = 0;
  ibv_mw* mw = device_->api->AllocMw(device_->pd, IBV_MW_TYPE_2);
  if (mw == nullptr) {
    const int error_number = errno != 0 ? errno : ENOMEM;
    const std::string verb = absl::StrCat("ibv_alloc_mw(TYPE_2) on ", device_->name);
    // Not kResourceExhausted, which means a full send queue (retry later):
    // the device's windows do not come back by waiting. mlx5 says ENOMEM
    // when none is left, rxe EINVAL (its object pool is full).
    if (error_number == ENOMEM || error_number == EINVAL) {
      return absl::UnavailableError(absl::StrCat(
          verb, ": no memory window left (", std::strerror(error_number), "; this process holds ",
          device_->windows.size(), " of the device's max_mw ", device_->attr.max_mw, ")"));
    }
    return IbvResultToStatus(error_number, verb);
  }
  device_->windows.Add(mw, this, handle->ibv_region());
  const uint64_t seq = send_queue_.posted();
  const bool signaled = send_queue_.PlanNext(/*user_signaled=*/false, /*last=*/true);
  send_slots_[seq % max_send_wr_] = SendSlot{0, Opcode::kWrite, false, 0, /*bind=*/true};
  ibv_send_wr w;
  std::memset(&w, 0, sizeof(w));
  w.wr_id = seq;
  w.opcode = IBV_WR_BIND_MW;
  w.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  w.bind_mw.mw = mw;
  w.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  w.bind_mw.bind_info.mr = handle->ibv_region();
  w.bind_mw.bind_info.addr = reinterpret_cast<uint64_t>(mr.addr()) + offset;
  w.bind_mw.bind_info.length = length;
  w.bind_mw.bind_info.mw_access_flags = ToIbvAccess(remote_access);
  ibv_send_wr* bad = nullptr;
  const int rc = device_->api->PostSend(objects_.qp, &w, &bad);
  if (rc != 0) {
    send_queue_.EndPost(0);
    return IbvResultToStatus(rc, absl::StrCat("ibv_post_send(BIND_MW) on ", device_->name, " qpn ",
                                              objects_.qp->qp_num));
  }
  send_queue_.EndPost(1);
  mw->rkey = w.bind_mw.rkey;  // the key the next bind increments
  return RemoteRegion{w.bind_mw.bind_info.addr, length, w.bind_mw.rkey, 0};
}

void IbverbsQueuePair::AttachControl(std::unique_ptr<TcpConnection> control) {
  control_ = std::move(control);
}

void IbverbsQueuePair::CheckAsyncFault() {
  if (state_ != QpState::kError && fault_->failed()) EnterError(fault_->status());
  if (control_ != nullptr && state_ != QpState::kError) CheckPeer();
}

void IbverbsQueuePair::CheckPeer() {
  const int64_t now = absl::GetCurrentTimeNanos();
  if (now < next_peer_check_ns_) return;
  next_peer_check_ns_ = now + absl::ToInt64Nanoseconds(kPeerCheckInterval);
  char byte;
  const ssize_t n = recv(control_->fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return;
  const std::string why = n == 0 ? "closed its connection" : std::strerror(errno);
  EnterError(absl::UnavailableError(absl::StrCat("the peer ", control_->peer(), " ", why,
                                                 " (its queue pair or process is gone)")));
  control_.reset();
}

std::string IbverbsQueuePair::Describe() const {
  return absl::StrFormat("ibverbs %s qpn 0x%x <-> %s qpn 0x%x", device_->Describe(),
                         objects_.qp != nullptr ? objects_.qp->qp_num : 0, GidToString(remote_.gid),
                         remote_.qpn);
}

std::string IbverbsQueuePair::WhatFailed(Opcode opcode, uint64_t user_wr_id) const {
  return absl::StrFormat("%s wr_id %d on %s qpn 0x%x", OpcodeName(opcode), user_wr_id,
                         device_->name, objects_.qp->qp_num);
}

absl::Status IbverbsQueuePair::ValidateWorkRequest(const WorkRequest& wr) const {
  switch (wr.opcode) {
    case Opcode::kWrite:
    case Opcode::kWriteWithImm:
    case Opcode::kRead:
      if (wr.length > device_->port_attr.max_msg_sz) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpcodeName(wr.opcode), " wr_id ", wr.wr_id, ": length ", wr.length, " exceeds ",
            device_->name, "'s max_msg_sz ", device_->port_attr.max_msg_sz));
      }
      break;
    case Opcode::kFetchAdd:
    case Opcode::kCompareSwap:
      if (wr.length != sizeof(uint64_t)) {
        return absl::InvalidArgumentError(absl::StrCat(OpcodeName(wr.opcode), " wr_id ", wr.wr_id,
                                                       ": length ", wr.length, " must be 8"));
      }
      RETURN_IF_ERROR(CheckAtomicAlignment(wr));
      if (!device_->has_atomics()) {
        return absl::UnimplementedError(absl::StrCat(OpcodeName(wr.opcode), ": ", device_->name,
                                                     " has no atomic support (atomic_cap NONE)"));
      }
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("wr_id ", wr.wr_id, ": opcode ",
                                                     static_cast<int>(wr.opcode),
                                                     " cannot be posted to a send queue"));
  }
  if (wr.local == nullptr && wr.length > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpcodeName(wr.opcode), " wr_id ", wr.wr_id, ": null local region"));
  }
  const bool reads_or_atomic = wr.opcode == Opcode::kRead || wr.opcode == Opcode::kFetchAdd ||
                               wr.opcode == Opcode::kCompareSwap;
  if (reads_or_atomic && max_rd_atomic_ == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(OpcodeName(wr.opcode),
                     ": this connection negotiated max_rd_atomic 0 "
                     "(the peer serves no READs or atomics)"));
  }
  return absl::OkStatus();
}

void IbverbsQueuePair::QueueFlushed(uint64_t user_wr_id, Opcode opcode) {
  Completion c;
  c.wr_id = user_wr_id;
  c.opcode = opcode;
  c.status = WcStatus::kFlushed;
  c.detail = absl::StrCat(WhatFailed(opcode, user_wr_id), ": flushed, queue pair in error state (",
                          error_.message(), ")");
  flushed_.push_back(std::move(c));
}

void IbverbsQueuePair::EnterError(const absl::Status& why) {
  if (state_ == QpState::kError) return;
  state_ = QpState::kError;
  error_ = why;
  LOG(WARNING) << Describe() << ": queue pair in error state: " << why;
  // Everything still outstanding completes with kFlushed, in posting order,
  // whatever the device does with unsignalled requests; the device's own
  // flush completions for these are dropped as stale.
  for (uint64_t seq = send_queue_.retired(); seq < send_queue_.posted(); ++seq) {
    const SendSlot& slot = send_slots_[seq % max_send_wr_];
    QueueFlushed(slot.user_wr_id, slot.opcode);
  }
  send_queue_.RetireAll();
  for (; recv_retired_ < recv_posted_; ++recv_retired_) {
    QueueFlushed(recv_slots_[recv_retired_ % recv_slots_.size()], Opcode::kRecv);
  }
  // Make sure the device stops too (it already has after an error
  // completion; not after a CQ failure).
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_ERR;
  const absl::Status s = IbvResultToStatus(device_->api->ModifyQp(objects_.qp, &attr, IBV_QP_STATE),
                                           "ibv_modify_qp(->ERR)");
  LOG_IF(WARNING, !s.ok()) << Describe() << ": " << s;
}

void IbverbsQueuePair::FillSendWr(const WorkRequest& wr, uint64_t seq, bool signaled, ibv_sge* sge,
                                  ibv_send_wr* out) const {
  sge->addr = reinterpret_cast<uintptr_t>(wr.local_addr);
  sge->length = wr.length;
  sge->lkey = wr.local != nullptr ? wr.local->lkey() : 0;
  ibv_send_wr& w = *out;
  std::memset(&w, 0, sizeof(w));
  w.wr_id = seq;
  w.sg_list = sge;
  w.num_sge = wr.length > 0 ? 1 : 0;
  w.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  if (wr.fence) w.send_flags |= IBV_SEND_FENCE;
  switch (wr.opcode) {
    case Opcode::kWrite:
    case Opcode::kWriteWithImm:
      w.opcode = wr.opcode == Opcode::kWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
      w.imm_data = htonl(wr.imm_data);
      w.wr.rdma.remote_addr = wr.remote_addr;
      w.wr.rdma.rkey = wr.rkey;
      // Small writes are copied into the WQE: no DMA read of the buffer.
      if (wr.length > 0 && wr.length <= objects_.max_inline_data) {
        w.send_flags |= IBV_SEND_INLINE;
      }
      break;
    case Opcode::kRead:
      w.opcode = IBV_WR_RDMA_READ;
      w.wr.rdma.remote_addr = wr.remote_addr;
      w.wr.rdma.rkey = wr.rkey;
      break;
    case Opcode::kFetchAdd:
      w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
      w.wr.atomic.remote_addr = wr.remote_addr;
      w.wr.atomic.rkey = wr.rkey;
      w.wr.atomic.compare_add = wr.compare_add;
      break;
    case Opcode::kCompareSwap:
      w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
      w.wr.atomic.remote_addr = wr.remote_addr;
      w.wr.atomic.rkey = wr.rkey;
      w.wr.atomic.compare_add = wr.compare_add;
      w.wr.atomic.swap = wr.swap;
      break;
    case Opcode::kRecv:
      LOG(FATAL) << "ValidateWorkRequest let a kRecv through";
  }
}

absl::Status IbverbsQueuePair::PostSend(absl::Span<const WorkRequest> wrs) {
  if (wrs.empty()) return absl::OkStatus();
  CheckAsyncFault();
  for (const WorkRequest& wr : wrs) RETURN_IF_ERROR(ValidateWorkRequest(wr));
  if (state_ == QpState::kError) {
    for (const WorkRequest& wr : wrs) QueueFlushed(wr.wr_id, wr.opcode);
    CountInitiated(wrs, &traffic_);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(send_queue_.CheckRoom(wrs.size()));
  // Build the whole span as one chain: one ibv_post_send, one doorbell.
  const size_t n = wrs.size();
  for (size_t i = 0; i < n; ++i) {
    const WorkRequest& wr = wrs[i];
    const uint64_t seq = send_queue_.posted() + i;
    const bool signaled = send_queue_.PlanNext(wr.signaled, i + 1 == n);
    send_slots_[seq % max_send_wr_] = SendSlot{wr.wr_id, wr.opcode, wr.signaled, wr.length};
    FillSendWr(wr, seq, signaled, &sge_scratch_[i], &send_scratch_[i]);
    send_scratch_[i].next = i + 1 < n ? &send_scratch_[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  const int rc = device_->api->PostSend(objects_.qp, send_scratch_.data(), &bad);
  if (rc == 0) {
    send_queue_.EndPost(n);
    CountInitiated(wrs, &traffic_);
    return absl::OkStatus();
  }
  // The requests before `bad` are on the queue; the rest are not.
  const size_t posted = bad != nullptr ? static_cast<size_t>(bad - send_scratch_.data()) : 0;
  send_queue_.EndPost(posted);
  CountInitiated(wrs.subspan(0, posted), &traffic_);
  const absl::Status failed = IbvResultToStatus(
      rc, absl::StrCat("ibv_post_send on ", device_->name, " qpn ", objects_.qp->qp_num, " (",
                       posted, " of ", n, " requests posted)"));
  // The room was checked, so the device disagrees with our accounting, and
  // what it took may end in an unsignalled run that nothing retires: flush
  // it rather than let the send queue stick.
  if (send_queue_.uncovered() > 0) EnterError(failed);
  return failed;
}

absl::Status IbverbsQueuePair::PostRecv(absl::Span<const RecvRequest> rrs) {
  if (rrs.empty()) return absl::OkStatus();
  CheckAsyncFault();
  if (state_ == QpState::kError) {
    for (const RecvRequest& rr : rrs) QueueFlushed(rr.wr_id, Opcode::kRecv);
    return absl::OkStatus();
  }
  const uint64_t outstanding = recv_posted_ - recv_retired_;
  if (outstanding + rrs.size() > static_cast<uint64_t>(max_recv_wr_)) {
    return absl::ResourceExhaustedError(absl::StrCat("receive queue full: ", outstanding,
                                                     " outstanding + ", rrs.size(),
                                                     " new > max_recv_wr ", max_recv_wr_));
  }
  const size_t n = rrs.size();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t seq = recv_posted_ + i;
    recv_slots_[seq % recv_slots_.size()] = rrs[i].wr_id;
    ibv_recv_wr& w = recv_scratch_[i];
    std::memset(&w, 0, sizeof(w));
    w.wr_id = seq | kRecvTag;
    w.next = i + 1 < n ? &recv_scratch_[i + 1] : nullptr;
    w.sg_list = nullptr;  // WRITE_WITH_IMM data lands at its remote address
    w.num_sge = 0;
  }
  ibv_recv_wr* bad = nullptr;
  const int rc = device_->api->PostRecv(objects_.qp, recv_scratch_.data(), &bad);
  if (rc == 0) {
    recv_posted_ += n;
    return absl::OkStatus();
  }
  const size_t posted = bad != nullptr ? static_cast<size_t>(bad - recv_scratch_.data()) : 0;
  recv_posted_ += posted;
  return IbvResultToStatus(
      rc, absl::StrCat("ibv_post_recv on ", device_->name, " qpn ", objects_.qp->qp_num, " (",
                       posted, " of ", n, " requests posted)"));
}

bool IbverbsQueuePair::Convert(const ibv_wc& wc, Completion* out) {
  const bool failed = wc.status != IBV_WC_SUCCESS;
  if (wc.wr_id & kRecvTag) {
    const uint64_t seq = wc.wr_id & ~kRecvTag;
    if (seq < recv_retired_ || seq >= recv_posted_) return false;  // stale
    recv_retired_ = seq + 1;
    out->wr_id = recv_slots_[seq % recv_slots_.size()];
    out->opcode = Opcode::kRecv;
    out->status = FromIbvWcStatus(wc.status);
    out->byte_len = wc.byte_len;
    out->imm_data = (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
    out->detail.clear();
  } else {
    const uint64_t seq = wc.wr_id;
    // RC completes in order: every unsignalled request before this one has
    // completed successfully.
    if (!send_queue_.Retire(seq)) return false;  // stale
    const SendSlot& slot = send_slots_[seq % max_send_wr_];
    if (!failed && !slot.user_signaled) return false;  // a forced signal
    out->wr_id = slot.user_wr_id;
    out->opcode = slot.opcode;
    out->status = FromIbvWcStatus(wc.status);
    // wc.byte_len is defined for receives only; a READ that succeeded read
    // all it asked for.
    out->byte_len = slot.length;
    out->imm_data = 0;
    out->detail.clear();
  }
  if (failed) {
    const bool bind = !(wc.wr_id & kRecvTag) && send_slots_[wc.wr_id % max_send_wr_].bind;
    out->detail = WcFailureDetail(
        bind ? absl::StrCat("memory window bind on ", device_->name, " qpn ", objects_.qp->qp_num)
             : WhatFailed(out->opcode, out->wr_id),
        wc.status, wc.vendor_err);
    EnterError(out->ToStatus());
  }
  return true;
}

int IbverbsQueuePair::Poll(absl::Span<Completion> out) {
  CheckAsyncFault();
  size_t n = 0;
  ibv_wc wcs[kPollBatch];
  while (n < out.size()) {
    const int want = static_cast<int>(std::min<size_t>(kPollBatch, out.size() - n));
    errno = 0;
    const int rc = device_->api->PollCq(objects_.cq, want, wcs);
    const absl::StatusOr<int> got = IbvCountToStatus(rc, errno, "ibv_poll_cq");
    if (!got.ok()) {
      // The CQ itself failed: nothing more will complete, so the queue pair
      // is dead; its outstanding requests are flushed.
      EnterError(absl::InternalError(absl::StrCat(Describe(), ": ", got.status().message())));
      break;
    }
    for (int i = 0; i < *got; ++i) {
      if (Convert(wcs[i], &out[n])) ++n;
    }
    if (*got < want) break;
  }
  while (n < out.size() && !flushed_.empty()) {
    out[n++] = std::move(flushed_.front());
    flushed_.pop_front();
  }
  return static_cast<int>(n);
}

}  // namespace dreplay::verbs::ibverbs
