// Copyright dreplay authors.

#include "verbs/soft/responder.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace dreplay::verbs::soft {

Responder::Responder(int max_recv_wr, int max_rd_atomic, const std::string& description,
                     RegionTable* regions, FrameWriter* writer, CompletionQueue* completions,
                     ChannelControl* control)
    : max_recv_wr_(max_recv_wr),
      max_rd_atomic_(max_rd_atomic),
      description_(description),
      regions_(regions),
      writer_(writer),
      completions_(completions),
      control_(control) {}

absl::Status Responder::Post(absl::Span<const RecvRequest> rrs) {
  if (rq_.size() + rrs.size() > static_cast<size_t>(max_recv_wr_)) {
    return absl::ResourceExhaustedError(absl::StrCat("receive queue full: ", rq_.size(),
                                                     " posted + ", rrs.size(), " > max_recv_wr ",
                                                     max_recv_wr_));
  }
  for (const RecvRequest& rr : rrs) rq_.push_back(rr);
  return absl::OkStatus();
}

bool Responder::MustWaitForResponses() const {
  return writer_->response_ref_bytes() > kMaxResponseRefBytes;
}

PayloadTarget Responder::StartRequest(const FrameHeader& h) {
  if (static_cast<FrameType>(h.type) != FrameType::kRead && MustWaitForResponses()) {
    return PayloadTarget::Pause();
  }
  if (!CheckSeq(h)) return PayloadTarget::None();
  const uint32_t len = h.payload_length;
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kWrite:
    case FrameType::kWriteWithImm:
      return StartWrite(h);
    case FrameType::kRead:
      if (len != 0) {
        ProtocolError("READ request with a payload");
        return PayloadTarget::None();
      }
      ExecuteRead(h);
      return PayloadTarget::None();
    case FrameType::kFetchAdd:
    case FrameType::kCompareSwap:
      if (len != sizeof(AtomicPayload)) {
        ProtocolError(absl::StrCat("atomic request with ", len, " payload bytes"));
        return PayloadTarget::None();
      }
      return PayloadTarget::Small();
    default:
      break;
  }
  LOG(FATAL) << "frame type " << static_cast<int>(h.type) << " is not a request";
}

bool Responder::CheckSeq(const FrameHeader& h) {
  if (h.seq != next_exec_seq_) {
    ProtocolError(absl::StrCat("request numbered ", h.seq, " where ", next_exec_seq_, " was due"));
    return false;
  }
  return true;
}

PayloadTarget Responder::StartWrite(const FrameHeader& h) {
  const uint32_t len = h.payload_length;
  if (len > kMaxMessageBytes) {
    Reject(h.seq, WcStatus::kRemoteInvalidRequest,
           absl::StrCat("WRITE of ", len, " bytes exceeds ", kMaxMessageBytes));
    return PayloadTarget::None();
  }
  char* target = nullptr;
  if (len > 0) {
    std::string detail;
    const WcStatus status = CheckRemote(h.rkey, h.remote_addr, len, kRemoteWrite, &target, &detail);
    if (status != WcStatus::kSuccess) {
      Reject(h.seq, status, detail);
      return PayloadTarget::None();
    }
  }
  if (static_cast<FrameType>(h.type) == FrameType::kWriteWithImm && rq_.empty()) {
    Reject(h.seq, WcStatus::kRnrRetryExceeded, "no receive posted for WRITE_WITH_IMM");
    return PayloadTarget::None();
  }
  writer_->MaterializeResponseRefs();
  return PayloadTarget::Memory(target);
}

void Responder::ExecuteRead(const FrameHeader& h) {
  if (h.aux > kMaxMessageBytes) {
    Reject(h.seq, WcStatus::kRemoteInvalidRequest,
           absl::StrCat("READ of ", h.aux, " bytes exceeds ", kMaxMessageBytes));
    return;
  }
  if (!HasResponseCredit(h)) return;
  char* source = nullptr;
  if (h.aux > 0) {
    std::string detail;
    const WcStatus status =
        CheckRemote(h.rkey, h.remote_addr, h.aux, kRemoteRead, &source, &detail);
    if (status != WcStatus::kSuccess) {
      Reject(h.seq, status, detail);
      return;
    }
  }
  ++next_exec_seq_;
  FrameHeader response = {};
  response.type = static_cast<uint8_t>(FrameType::kReadResponse);
  response.seq = h.seq;
  response.payload_length = h.aux;
  // Counted before the response can reach the peer.
  peer_out_.fetch_add(h.aux, std::memory_order_relaxed);
  writer_->QueueResponse(response, source, h.aux);
}

void Responder::CompleteRequest(const FrameHeader& h, const char* small) {
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kWrite:
      ++next_exec_seq_;
      ack_pending_ = true;
      peer_in_.fetch_add(h.payload_length, std::memory_order_relaxed);
      return;
    case FrameType::kWriteWithImm: {
      ++next_exec_seq_;
      ack_pending_ = true;
      peer_in_.fetch_add(h.payload_length, std::memory_order_relaxed);
      const uint64_t recv_id = rq_.front().wr_id;
      rq_.pop_front();
      completions_->Push({recv_id, Opcode::kRecv, WcStatus::kSuccess, h.payload_length, h.aux, ""});
      return;
    }
    case FrameType::kFetchAdd:
    case FrameType::kCompareSwap:
      ExecuteAtomic(h, small);
      return;
    default:
      break;
  }
  LOG(FATAL) << "frame type " << static_cast<int>(h.type) << " has no payload to finish";
}

void Responder::ExecuteAtomic(const FrameHeader& h, const char* payload) {
  AtomicPayload operands;
  std::memcpy(&operands, payload, sizeof(operands));
  if (!HasResponseCredit(h)) return;
  char* target = nullptr;
  std::string detail;
  const WcStatus status =
      CheckRemote(h.rkey, h.remote_addr, sizeof(uint64_t), kRemoteAtomic, &target, &detail);
  if (status != WcStatus::kSuccess) {
    Reject(h.seq, status, detail);
    return;
  }
  if (h.remote_addr % alignof(uint64_t) != 0) {
    Reject(h.seq, WcStatus::kRemoteInvalidRequest,
           absl::StrFormat("atomic target 0x%x is not 8-byte aligned", h.remote_addr));
    return;
  }
  writer_->MaterializeResponseRefs();
  auto* word = reinterpret_cast<uint64_t*>(target);
  uint64_t old;
  if (static_cast<FrameType>(h.type) == FrameType::kFetchAdd) {
    old = __atomic_fetch_add(word, operands.compare_add, __ATOMIC_SEQ_CST);
  } else {
    old = operands.compare_add;
    __atomic_compare_exchange_n(word, &old, operands.swap, /*weak=*/false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
  }
  ++next_exec_seq_;
  FrameHeader response = {};
  response.type = static_cast<uint8_t>(FrameType::kAtomicResponse);
  response.seq = h.seq;
  response.payload_length = kAtomicResponseBytes;
  peer_in_.fetch_add(sizeof(uint64_t), std::memory_order_relaxed);
  peer_out_.fetch_add(sizeof(uint64_t), std::memory_order_relaxed);
  writer_->QueueResponse(response, reinterpret_cast<const char*>(&old), sizeof(old));
}

QueuePairTraffic Responder::traffic() const {
  QueuePairTraffic t;
  t.peer_in = peer_in_.load(std::memory_order_relaxed);
  t.peer_out = peer_out_.load(std::memory_order_relaxed);
  return t;
}

bool Responder::HasResponseCredit(const FrameHeader& h) {
  if (writer_->responses_queued() < max_rd_atomic_) return true;
  Reject(h.seq, WcStatus::kRemoteInvalidRequest,
         absl::StrCat("more than max_rd_atomic = ", max_rd_atomic_,
                      " READ/atomic requests outstanding"));
  return false;
}

void Responder::SendPendingAck() {
  if (!ack_pending_ || !control_->ready()) return;
  ack_pending_ = false;
  // Without a link model a queued ACK that has not gone out yet can simply
  // cover more.
  if (writer_->ExtendQueuedAck(next_exec_seq_)) return;
  FrameHeader ack = {};
  ack.type = static_cast<uint8_t>(FrameType::kAck);
  ack.seq = next_exec_seq_;
  writer_->QueueResponse(ack, nullptr, 0);
}

void Responder::QueueNak(uint64_t seq, WcStatus status, const std::string& text) {
  FrameHeader nak = {};
  nak.type = static_cast<uint8_t>(FrameType::kNak);
  nak.status = static_cast<uint8_t>(status);
  nak.seq = seq;
  nak.payload_length = static_cast<uint32_t>(std::min<size_t>(text.size(), kMaxNakDetail));
  writer_->QueueResponse(nak, text.data(), nak.payload_length);
}

void Responder::Reject(uint64_t seq, WcStatus status, const std::string& detail) {
  LOG(WARNING) << description_ << ": request " << seq
               << " from the peer failed: " << WcStatusName(status) << " (" << detail << ")";
  QueueNak(seq, status, detail);
  control_->Fail(WcStatus::kFlushed, absl::StrCat("request ", seq, " from the peer failed: ",
                                                  WcStatusName(status), " (", detail, ")"));
}

void Responder::ProtocolError(const std::string& what) {
  LOG(WARNING) << description_ << ": invalid input from the peer: " << what;
  if (control_->ready()) {
    QueueNak(next_exec_seq_, WcStatus::kRemoteInvalidRequest, what);
  }
  control_->Fail(WcStatus::kGeneralError, absl::StrCat("invalid input from the peer: ", what));
}

void Responder::FlushAll(const std::string& reason) {
  while (!rq_.empty()) {
    completions_->Push({rq_.front().wr_id, Opcode::kRecv, WcStatus::kFlushed, 0, 0, reason});
    rq_.pop_front();
  }
  ack_pending_ = false;
}

void Responder::Clear() { rq_.clear(); }

WcStatus Responder::CheckRemote(uint32_t rkey, uint64_t remote_addr, uint64_t length,
                                uint32_t needed, char** target, std::string* detail) {
  if (windows_.Contains(rkey)) {
    return windows_.Check(rkey, remote_addr, length, needed, &regions_, target, detail);
  }
  return regions_.Check(rkey, remote_addr, length, needed, target, detail);
}

absl::StatusOr<uint32_t> Responder::BindWindow(const MemoryRegion& mr, char* addr, uint64_t length,
                                               uint32_t remote_access) {
  if ((mr.access() & kMemoryWindowBind) == 0) {
    return absl::InvalidArgumentError(
        "the memory region was not registered with kMemoryWindowBind");
  }
  if (remote_access == 0 || (remote_access & ~(kRemoteRead | kRemoteWrite | kRemoteAtomic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("window access 0x", absl::Hex(remote_access),
                                                   " is not a set of remote rights"));
  }
  if ((remote_access & (kRemoteWrite | kRemoteAtomic)) != 0 && (mr.access() & kLocalWrite) == 0) {
    return absl::InvalidArgumentError(
        "a window with remote write or atomic access needs kLocalWrite on its region");
  }
  if (!regions_.Contains(mr.lkey())) {
    return absl::InvalidArgumentError("the memory region is not registered with this provider");
  }
  return windows_.Bind(mr.lkey(), addr, length, remote_access, &regions_);
}

bool Responder::FindKey(uint32_t rkey, char** addr, uint64_t* length, uint32_t* access,
                        uint32_t* region_key) {
  if (windows_.Find(rkey, addr, length, access, region_key)) {
    return regions_.Contains(*region_key);
  }
  *region_key = rkey;
  return regions_.Find(rkey, addr, length, access);
}

}  // namespace dreplay::verbs::soft
