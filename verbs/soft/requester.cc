// Copyright dreplay authors.

#include "verbs/soft/requester.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "verbs/soft/link.h"

namespace dreplay::verbs::soft {
namespace {

bool IsReadOrAtomic(Opcode op) {
  return op == Opcode::kRead || op == Opcode::kFetchAdd || op == Opcode::kCompareSwap;
}

// A status that a NAK may carry.
bool IsValidFailure(uint8_t status) {
  return status > static_cast<uint8_t>(WcStatus::kSuccess) &&
         status <= static_cast<uint8_t>(WcStatus::kGeneralError) &&
         status != static_cast<uint8_t>(WcStatus::kFlushed);
}

}  // namespace

Requester::Requester(int max_send_wr, int max_rd_atomic, uint32_t max_inline_data,
                     const FaultOptions& faults, RegionTable* regions, FrameWriter* writer,
                     CompletionQueue* completions, ChannelControl* control)
    : max_send_wr_(max_send_wr),
      max_rd_atomic_(max_rd_atomic),
      max_inline_data_(max_inline_data),
      faults_(faults),
      regions_(regions),
      writer_(writer),
      completions_(completions),
      control_(control),
      inline_arena_(max_inline_data > 0
                        ? new char[static_cast<size_t>(max_send_wr) * max_inline_data]
                        : nullptr) {}

absl::Status Requester::Validate(absl::Span<const WorkRequest> wrs) {
  for (const WorkRequest& wr : wrs) {
    switch (wr.opcode) {
      case Opcode::kWrite:
      case Opcode::kWriteWithImm:
      case Opcode::kRead:
        if (wr.length > 0 && wr.local == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(OpcodeName(wr.opcode), " wr_id=", wr.wr_id,
                                                         ": no local memory region for ", wr.length,
                                                         " bytes"));
        }
        break;
      case Opcode::kFetchAdd:
      case Opcode::kCompareSwap:
        if (wr.length != sizeof(uint64_t) || wr.local == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat(OpcodeName(wr.opcode), " wr_id=", wr.wr_id,
                           ": atomics need an 8-byte local buffer (length ", wr.length, ")"));
        }
        RETURN_IF_ERROR(CheckAtomicAlignment(wr));
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "wr_id=", wr.wr_id, ": opcode ", static_cast<int>(wr.opcode), " cannot be posted"));
    }
  }
  return absl::OkStatus();
}

absl::Status Requester::Post(absl::Span<const WorkRequest> wrs) {
  if (sq_.size() + wrs.size() > static_cast<size_t>(max_send_wr_)) {
    return absl::ResourceExhaustedError(absl::StrCat("send queue full: ", sq_.size(),
                                                     " outstanding + ", wrs.size(),
                                                     " posted > max_send_wr ", max_send_wr_));
  }
  for (const WorkRequest& wr : wrs) {
    SendEntry& e = sq_.emplace_back();
    e.wr = wr;
    if (wr.length > kMaxMessageBytes) {
      e.local_error = WcStatus::kLocalLengthError;
      e.local_detail = absl::StrCat("length ", wr.length, " exceeds ", kMaxMessageBytes);
    } else if (wr.local != nullptr) {
      // READ results and atomics' old values are written locally.
      const bool writes_local = IsReadOrAtomic(wr.opcode);
      const uint32_t needed = writes_local ? uint32_t{kLocalWrite} : 0u;
      e.local_error =
          regions_.CheckLocal(wr.local->lkey(), wr.local_addr, wr.length, needed, &e.local_detail);
    }
    const bool is_write = wr.opcode == Opcode::kWrite || wr.opcode == Opcode::kWriteWithImm;
    if (is_write && e.local_error == WcStatus::kSuccess && wr.length > 0 &&
        wr.length <= max_inline_data_) {
      char* slot = inline_arena_.get() + next_inline_slot_ * max_inline_data_;
      next_inline_slot_ = (next_inline_slot_ + 1) % static_cast<size_t>(max_send_wr_);
      std::memcpy(slot, wr.local_addr, wr.length);
      e.inline_copy = slot;
    }
  }
  return absl::OkStatus();
}

void Requester::Transmit(int64_t now) {
  if (!control_->ready()) return;
  while (sq_transmitted_ < sq_.size() && !writer_->close_queued()) {
    SendEntry& e = sq_[sq_transmitted_];
    if (e.local_error != WcStatus::kSuccess) break;  // fails at the front
    const bool read_or_atomic = IsReadOrAtomic(e.wr.opcode);
    if (read_or_atomic && rd_in_flight_ >= max_rd_atomic_) break;
    EmitRequest(e, now);
    ++sq_transmitted_;
    if (read_or_atomic) ++rd_in_flight_;
  }
  CheckFrontLocalError();
}

void Requester::EmitRequest(SendEntry& e, int64_t now) {
  if (faults_.stall_after_ops != 0 && !stalled_ && ops_sent_ >= faults_.stall_after_ops) {
    stalled_ = true;
    stall_until_ns_ = now + absl::ToInt64Nanoseconds(faults_.stall_for);
  }
  const int64_t not_before = std::max(now, stall_until_ns_);
  const WorkRequest& wr = e.wr;

  FrameHeader h = {};
  h.seq = next_request_seq_;
  h.remote_addr = wr.remote_addr;
  h.rkey = wr.rkey;
  switch (wr.opcode) {
    case Opcode::kWrite:
    case Opcode::kWriteWithImm:
      EmitWrite(wr, e.inline_copy, h, not_before);
      break;
    case Opcode::kRead:
      h.type = static_cast<uint8_t>(FrameType::kRead);
      h.aux = wr.length;
      writer_->QueueRequest(h, nullptr, 0, not_before);
      break;
    case Opcode::kFetchAdd:
    case Opcode::kCompareSwap: {
      h.type = static_cast<uint8_t>(wr.opcode == Opcode::kFetchAdd ? FrameType::kFetchAdd
                                                                   : FrameType::kCompareSwap);
      h.payload_length = sizeof(AtomicPayload);
      const AtomicPayload operands = {wr.compare_add, wr.swap};
      writer_->QueueRequest(h, reinterpret_cast<const char*>(&operands), sizeof(operands),
                            not_before);
      break;
    }
    case Opcode::kRecv:
      LOG(FATAL) << "PostSend validated the opcode";
  }
  e.last_seq = next_request_seq_++;
  ++ops_sent_;
  if (faults_.drop_after_ops != 0 && ops_sent_ >= faults_.drop_after_ops &&
      !writer_->close_queued()) {
    writer_->QueueClose(not_before, absl::StrCat("fault injection: connection dropped after ",
                                                 faults_.drop_after_ops, " requests"));
  }
}

void Requester::EmitWrite(const WorkRequest& wr, const char* inline_copy, FrameHeader h,
                          int64_t not_before) {
  const char* src = inline_copy != nullptr ? inline_copy : static_cast<const char*>(wr.local_addr);
  const bool imm = wr.opcode == Opcode::kWriteWithImm;
  h.type = static_cast<uint8_t>(imm ? FrameType::kWriteWithImm : FrameType::kWrite);
  h.aux = imm ? wr.imm_data : 0;
  const bool tear = faults_.tear != TearMode::kNone && writes_sent_ == faults_.tear_op_index;
  ++writes_sent_;
  const uint32_t half = wr.length / 2;
  if (tear && faults_.tear == TearMode::kPrefix) {
    FrameHeader prefix = h;
    prefix.type = static_cast<uint8_t>(FrameType::kWrite);
    prefix.aux = 0;
    QueueWrite(prefix, src, half, not_before);
    if (!writer_->close_queued()) {
      writer_->QueueClose(
          not_before, absl::StrCat("fault injection: WRITE wr_id=", wr.wr_id, " torn after ", half,
                                   " of ", wr.length, " bytes"));
    }
  } else if (tear && faults_.tear == TearMode::kOutOfOrder && wr.length >= 2) {
    // The second half lands first; the first half, which carries the
    // immediate if any, lands a visible gap later.
    FrameHeader tail = h;
    tail.type = static_cast<uint8_t>(FrameType::kWrite);
    tail.aux = 0;
    tail.remote_addr += half;
    QueueWrite(tail, src + half, wr.length - half, not_before);
    h.seq = ++next_request_seq_;
    const absl::Duration gap =
        faults_.stall_for > absl::ZeroDuration() ? faults_.stall_for : kDefaultTearGap;
    if (!writer_->close_queued()) {
      QueueWrite(h, src, half, not_before + absl::ToInt64Nanoseconds(gap));
    }
  } else {
    QueueWrite(h, src, wr.length, not_before);
  }
}

void Requester::QueueWrite(const FrameHeader& header, const char* data, uint32_t length,
                           int64_t when) {
  FrameHeader fh = header;
  fh.payload_length = length;
  uint32_t send_len = length;
  bool drop = false;
  if (faults_.drop_after_bytes != 0) {
    const uint64_t left = faults_.drop_after_bytes > payload_bytes_sent_
                              ? faults_.drop_after_bytes - payload_bytes_sent_
                              : 0;
    if (length >= left) {
      send_len = static_cast<uint32_t>(left);
      drop = true;
    }
  }
  payload_bytes_sent_ += send_len;
  writer_->QueueRequest(fh, data, send_len, when);
  if (drop) {
    writer_->QueueClose(when, absl::StrCat("fault injection: connection dropped after ",
                                           faults_.drop_after_bytes, " payload bytes"));
  }
}

PayloadTarget Requester::StartResponse(const FrameHeader& h) {
  const uint32_t len = h.payload_length;
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kAck:
      if (len != 0 || h.seq > next_request_seq_) {
        control_->ProtocolError(absl::StrCat("ACK of ", h.seq, " with ", len, " payload bytes; ",
                                             next_request_seq_, " requests sent"));
        return PayloadTarget::None();
      }
      CompleteThrough(h.seq);
      return PayloadTarget::None();
    case FrameType::kReadResponse:
      if (!CompleteThrough(h.seq)) return PayloadTarget::None();
      if (sq_transmitted_ == 0 || sq_.front().wr.opcode != Opcode::kRead ||
          sq_.front().last_seq != h.seq || sq_.front().wr.length != len) {
        control_->ProtocolError(
            absl::StrCat("unexpected READ response to request ", h.seq, " with ", len, " bytes"));
        return PayloadTarget::None();
      }
      return PayloadTarget::Memory(static_cast<char*>(sq_.front().wr.local_addr));
    case FrameType::kAtomicResponse:
      if (!CompleteThrough(h.seq)) return PayloadTarget::None();
      if (sq_transmitted_ == 0 || !IsReadOrAtomic(sq_.front().wr.opcode) ||
          sq_.front().wr.opcode == Opcode::kRead || sq_.front().last_seq != h.seq ||
          len != kAtomicResponseBytes) {
        control_->ProtocolError(
            absl::StrCat("unexpected atomic response to request ", h.seq, " with ", len, " bytes"));
        return PayloadTarget::None();
      }
      return PayloadTarget::Small();
    case FrameType::kNak:
      if (len > kMaxNakDetail) {
        control_->ProtocolError(absl::StrCat("NAK with ", len, " bytes of text"));
        return PayloadTarget::None();
      }
      return PayloadTarget::Small();
    default:
      break;
  }
  LOG(FATAL) << "frame type " << static_cast<int>(h.type) << " is not a response";
}

void Requester::CompleteResponse(const FrameHeader& h, const char* small) {
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kReadResponse:
      CompleteFront(WcStatus::kSuccess, h.payload_length, "");
      CheckFrontLocalError();
      Transmit(MonotonicNowNs());
      return;
    case FrameType::kAtomicResponse:
      std::memcpy(sq_.front().wr.local_addr, small, kAtomicResponseBytes);
      CompleteFront(WcStatus::kSuccess, kAtomicResponseBytes, "");
      CheckFrontLocalError();
      Transmit(MonotonicNowNs());
      return;
    case FrameType::kNak: {
      const std::string text = PrintablePeerText(std::string_view(small, h.payload_length));
      const WcStatus status = IsValidFailure(h.status) ? static_cast<WcStatus>(h.status)
                                                       : WcStatus::kRemoteOperationError;
      if (!CompleteThrough(h.seq)) return;
      control_->Fail(status, absl::StrCat("the peer failed request ", h.seq, ": ",
                                          WcStatusName(status), " (", text, ")"));
      return;
    }
    default:
      break;
  }
  LOG(FATAL) << "frame type " << static_cast<int>(h.type) << " has no payload to finish";
}

bool Requester::CompleteThrough(uint64_t seq) {
  // One acknowledgement may cover a whole batch of WRITEs: their
  // completions reach the queue together (one lock, one hand-over).
  while (sq_transmitted_ > 0 && sq_.front().last_seq < seq) {
    if (IsReadOrAtomic(sq_.front().wr.opcode)) {
      // Those before it did complete; the error follows them.
      completions_->PushAll(&completed_);
      control_->ProtocolError(
          absl::StrCat("request ", sq_.front().last_seq, " acknowledged without its response"));
      return false;
    }
    CompleteFront(WcStatus::kSuccess, 0, "", &completed_);
  }
  completions_->PushAll(&completed_);
  CheckFrontLocalError();
  return control_->ready();
}

void Requester::CompleteFront(WcStatus status, uint32_t byte_len, std::string detail,
                              std::vector<Completion>* batch) {
  SendEntry& e = sq_.front();
  if (status != WcStatus::kSuccess || e.wr.signaled) {
    Completion c{e.wr.wr_id, e.wr.opcode, status, byte_len, 0, std::move(detail)};
    if (batch != nullptr) {
      batch->push_back(std::move(c));
    } else {
      completions_->Push(std::move(c));
    }
  }
  if (IsReadOrAtomic(e.wr.opcode)) --rd_in_flight_;
  sq_.pop_front();
  --sq_transmitted_;
}

void Requester::CheckFrontLocalError() {
  if (control_->ready() && sq_transmitted_ == 0 && !sq_.empty() &&
      sq_.front().local_error != WcStatus::kSuccess) {
    const std::string detail = sq_.front().local_detail;
    control_->Fail(sq_.front().local_error, detail);
  }
}

void Requester::FlushAll(WcStatus first, const std::string& reason) {
  bool first_done = false;
  while (!sq_.empty()) {
    const SendEntry& e = sq_.front();
    WcStatus status = WcStatus::kFlushed;
    std::string detail = reason;
    if (!first_done && first != WcStatus::kFlushed) status = first;
    first_done = true;
    completions_->Push({e.wr.wr_id, e.wr.opcode, status, 0, 0, std::move(detail)});
    sq_.pop_front();
  }
  sq_transmitted_ = 0;
  rd_in_flight_ = 0;
}

bool Requester::LocalOk(const WorkRequest& wr) {
  if (wr.length > kMaxMessageBytes || wr.local == nullptr) return false;
  const uint32_t needed = IsReadOrAtomic(wr.opcode) ? uint32_t{kLocalWrite} : 0u;
  std::string detail;
  return regions_.CheckLocal(wr.local->lkey(), wr.local_addr, wr.length, needed, &detail) ==
         WcStatus::kSuccess;
}

bool Requester::Uses(const MemoryRegion* mr) const {
  for (size_t i = 0; i < sq_.size(); ++i) {
    if (sq_[i].wr.local == mr) return true;
  }
  return false;
}

void Requester::Clear() { sq_.clear(); }

}  // namespace dreplay::verbs::soft
