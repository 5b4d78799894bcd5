// Copyright dreplay authors.

#include "verbs/soft/channel.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "verbs/soft/nic.h"

namespace dreplay::verbs::soft {
namespace {

// Input is read in chunks of this size and parsed frame by frame.
constexpr size_t kInputBufferBytes = 64 * 1024;
// A payload remainder at least this large is received straight into place,
// together with at most kTailBytes of what follows it.
constexpr uint32_t kDirectReadBytes = 4096;
constexpr size_t kTailBytes = 256;
static_assert(kTailBytes >= sizeof(FrameHeader), "a tail holds a header");
static_assert(kInputBufferBytes >= kTailBytes, "the tail lands in the buffer");
static_assert(kMaxNakDetail <= kInlineCopyBytes, "a NAK's text goes inline");
static_assert(sizeof(AtomicPayload) <= kInlineCopyBytes, "operands go inline");
// Input handled per event before other sockets get their turn.
constexpr size_t kMaxInputPerTurn = 4 << 20;
// Limits of one sendmsg().
constexpr int kMaxIov = 256;
constexpr size_t kMaxBytesPerSend = 8 << 20;
// On an emulated link, a frame queued behind others (bandwidth-bound) may
// leave up to this long before its arrival time, but never before it would
// arrive on an idle link: bursts then go out in one send per wake-up instead
// of one wake-up per frame, and the emulated latency and long-run bandwidth
// stay exact.
constexpr int64_t kMaxEarlyNs = 50000;

bool IsReadOrAtomic(Opcode op) {
  return op == Opcode::kRead || op == Opcode::kFetchAdd ||
         op == Opcode::kCompareSwap;
}

bool IsValidFailure(uint8_t status) {
  return status > static_cast<uint8_t>(WcStatus::kSuccess) &&
         status <= static_cast<uint8_t>(WcStatus::kGeneralError) &&
         status != static_cast<uint8_t>(WcStatus::kFlushed);
}

absl::StatusCode CodeOf(WcStatus status) {
  Completion c;
  c.status = status == WcStatus::kFlushed ? WcStatus::kGeneralError : status;
  return c.ToStatus().code();
}

}  // namespace

Channel::Channel(Fd fd, const ChannelConfig& config,
                 std::shared_ptr<RegionTable> regions)
    : fd_(std::move(fd)),
      config_(config),
      regions_(std::move(regions)),
      link_(config.link, config.link_seed),
      in_buf_(new char[kInputBufferBytes]) {}

Channel::~Channel() = default;

// ---------------------------------------------------------------------------
// Application side.
// ---------------------------------------------------------------------------

absl::Status Channel::PostSend(absl::Span<const WorkRequest> wrs) {
  for (const WorkRequest& wr : wrs) {
    switch (wr.opcode) {
      case Opcode::kWrite:
      case Opcode::kWriteWithImm:
      case Opcode::kRead:
        if (wr.length > 0 && wr.local == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              OpcodeName(wr.opcode), " wr_id=", wr.wr_id,
              ": no local memory region for ", wr.length, " bytes"));
        }
        break;
      case Opcode::kFetchAdd:
      case Opcode::kCompareSwap:
        if (wr.length != sizeof(uint64_t) || wr.local == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              OpcodeName(wr.opcode), " wr_id=", wr.wr_id,
              ": atomics need an 8-byte local buffer (length ", wr.length,
              ")"));
        }
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "wr_id=", wr.wr_id, ": opcode ", static_cast<int>(wr.opcode),
            " cannot be posted"));
    }
  }

  MutexLock lock(&mu_);
  if (state_ == QpState::kError || detached_) {
    for (const WorkRequest& wr : wrs) {
      PushCompletion({wr.wr_id, wr.opcode, WcStatus::kFlushed, 0, 0,
                      "queue pair is in the error state"});
    }
    return absl::OkStatus();
  }
  if (sq_.size() + wrs.size() > static_cast<size_t>(config_.max_send_wr)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "send queue full: ", sq_.size(), " outstanding + ", wrs.size(),
        " posted > max_send_wr ", config_.max_send_wr));
  }
  for (const WorkRequest& wr : wrs) {
    SendEntry& e = sq_.emplace_back();
    e.wr = wr;
    if (wr.length > kMaxMessageBytes) {
      e.local_error = WcStatus::kLocalLengthError;
      e.local_detail = absl::StrCat("length ", wr.length, " exceeds ",
                                    kMaxMessageBytes);
    } else if (wr.local != nullptr) {
      // READ results and atomics' old values are written locally.
      const bool writes_local = IsReadOrAtomic(wr.opcode);
      const uint32_t needed = writes_local ? uint32_t{kLocalWrite} : 0u;
      e.local_error = regions_->CheckLocal(wr.local->lkey(), wr.local_addr,
                                           wr.length, needed, &e.local_detail);
    }
  }
  const int64_t now = MonotonicNowNs();
  Transmit(now);
  Flush(now);
  SyncInterest();
  return absl::OkStatus();
}

absl::Status Channel::PostRecv(absl::Span<const RecvRequest> rrs) {
  MutexLock lock(&mu_);
  if (state_ == QpState::kError || detached_) {
    for (const RecvRequest& rr : rrs) {
      PushCompletion({rr.wr_id, Opcode::kRecv, WcStatus::kFlushed, 0, 0,
                      "queue pair is in the error state"});
    }
    return absl::OkStatus();
  }
  if (rq_.size() + rrs.size() > static_cast<size_t>(config_.max_recv_wr)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "receive queue full: ", rq_.size(), " posted + ", rrs.size(),
        " > max_recv_wr ", config_.max_recv_wr));
  }
  for (const RecvRequest& rr : rrs) rq_.push_back(rr);
  return absl::OkStatus();
}

int Channel::Poll(absl::Span<Completion> out) {
  if (out.empty()) return 0;
  if (cq_size_.load(std::memory_order_acquire) == 0) {
    // An application that polls in a tight loop leaves the processor to the
    // NIC thread for a moment; on a small machine they share the cores.
    sched_yield();
    return 0;
  }
  MutexLock lock(&cq_mu_);
  const size_t n = std::min(out.size(), cq_.size());
  for (size_t i = 0; i < n; ++i) {
    out[i] = std::move(cq_.front());
    cq_.pop_front();
  }
  cq_size_.store(cq_.size(), std::memory_order_release);
  return static_cast<int>(n);
}

QpState Channel::state() const {
  return failed_.load(std::memory_order_acquire) ? QpState::kError
                                                 : QpState::kReady;
}

absl::Status Channel::error() const {
  MutexLock lock(&mu_);
  return error_;
}

void Channel::PushCompletion(Completion c) {
  MutexLock lock(&cq_mu_);
  cq_.push_back(std::move(c));
  cq_size_.store(cq_.size(), std::memory_order_release);
}

// ---------------------------------------------------------------------------
// Lifetime.
// ---------------------------------------------------------------------------

void Channel::Attach(Nic* nic, uint64_t id) {
  MutexLock lock(&mu_);
  nic_ = nic;
  nic_id_ = id;
  SyncInterest();
}

void Channel::WaitForPlacement() {
  while (placing_) placement_done_.Wait(&mu_);
}

void Channel::Detach() {
  MutexLock lock(&mu_);
  WaitForPlacement();
  if (detached_) return;
  detached_ = true;
  if (nic_ != nullptr && epoll_events_ != 0) {
    nic_->SetInterest(fd_.get(), nic_id_, epoll_events_, 0);
  }
  epoll_events_ = 0;
  nic_ = nullptr;
  shutdown(fd_.get(), SHUT_RDWR);
  in_closed_ = out_closed_ = true;
  in_phase_ = InPhase::kDrain;
  out_.clear();
  sq_.clear();
  rq_.clear();
  next_due_ns_.store(0, std::memory_order_release);
  MutexLock cq_lock(&cq_mu_);
  cq_.clear();
  cq_size_.store(0, std::memory_order_release);
}

void Channel::OnNicStopped() {
  MutexLock lock(&mu_);
  if (detached_) return;
  Fail(WcStatus::kFlushed, "the provider was destroyed", Teardown::kAbort);
  if (nic_ != nullptr && epoll_events_ != 0) {
    nic_->SetInterest(fd_.get(), nic_id_, epoll_events_, 0);
  }
  epoll_events_ = 0;
  nic_ = nullptr;
}

void Channel::OnDeregister(const MemoryRegion* mr, const char* begin,
                           size_t length) {
  MutexLock lock(&mu_);
  WaitForPlacement();
  if (detached_) return;
  MaterializeResponseRefs();
  if (state_ != QpState::kReady) return;
  const char* end = begin + length;
  if (in_phase_ == InPhase::kPayload && in_dst_is_memory_ &&
      in_dst_ >= begin && in_dst_ < end) {
    const auto type = static_cast<FrameType>(in_header_.type);
    if (IsRequest(type)) {
      RejectRequest(in_header_.seq, WcStatus::kRemoteAccessError,
                    "the memory region was deregistered during the WRITE");
    } else {
      Fail(WcStatus::kLocalProtectionError,
           "a local memory region was deregistered during a READ",
           Teardown::kAfterQueued);
    }
    Flush(MonotonicNowNs());
    SyncInterest();
    return;
  }
  for (size_t i = 0; i < sq_.size(); ++i) {
    if (sq_[i].wr.local == mr) {
      Fail(WcStatus::kLocalProtectionError,
           "a memory region was deregistered while a request using it was "
           "outstanding",
           Teardown::kAfterQueued);
      Flush(MonotonicNowNs());
      SyncInterest();
      return;
    }
  }
}

// ---------------------------------------------------------------------------
// Requester.
// ---------------------------------------------------------------------------

void Channel::Transmit(int64_t now) {
  if (state_ != QpState::kReady) return;
  while (sq_transmitted_ < sq_.size() && !close_queued_) {
    SendEntry& e = sq_[sq_transmitted_];
    if (e.local_error != WcStatus::kSuccess) break;  // fails at the front
    const bool read_or_atomic = IsReadOrAtomic(e.wr.opcode);
    if (read_or_atomic && rd_in_flight_ >= config_.max_rd_atomic) break;
    EmitRequest(e, now);
    ++sq_transmitted_;
    if (read_or_atomic) ++rd_in_flight_;
  }
  CheckFrontLocalError();
}

void Channel::EmitRequest(SendEntry& e, int64_t now) {
  const FaultOptions& faults = config_.faults;
  if (faults.stall_after_ops != 0 && !stalled_ &&
      ops_sent_ >= faults.stall_after_ops) {
    stalled_ = true;
    stall_until_ns_ = now + absl::ToInt64Nanoseconds(faults.stall_for);
  }
  const int64_t not_before = std::max(now, stall_until_ns_);
  const WorkRequest& wr = e.wr;
  const char* src = static_cast<const char*>(wr.local_addr);

  FrameHeader h = {};
  h.seq = next_request_seq_;
  h.remote_addr = wr.remote_addr;
  h.rkey = wr.rkey;

  // Queues one WRITE frame of `len` bytes from `data`, cut short when the
  // byte budget of drop_after_bytes runs out.
  auto emit_write = [&](const FrameHeader& header, const char* data,
                        uint32_t len, int64_t when)
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    FrameHeader fh = header;
    fh.payload_length = len;
    uint32_t send_len = len;
    bool drop = false;
    if (faults.drop_after_bytes != 0) {
      const uint64_t left = faults.drop_after_bytes > payload_bytes_sent_
                                ? faults.drop_after_bytes - payload_bytes_sent_
                                : 0;
      if (len >= left) {
        send_len = static_cast<uint32_t>(left);
        drop = true;
      }
    }
    payload_bytes_sent_ += send_len;
    if (send_len <= kInlineCopyBytes) {
      QueueFrame(fh, data, send_len, nullptr, 0, when);
    } else {
      QueueFrame(fh, nullptr, 0, data, send_len, when);
    }
    if (drop) {
      close_reason_ = absl::StrCat("fault injection: connection dropped after ",
                                   faults.drop_after_bytes, " payload bytes");
      QueueClose(when);
    }
  };

  switch (wr.opcode) {
    case Opcode::kWrite:
    case Opcode::kWriteWithImm: {
      const bool imm = wr.opcode == Opcode::kWriteWithImm;
      h.type = static_cast<uint8_t>(imm ? FrameType::kWriteWithImm
                                        : FrameType::kWrite);
      h.aux = imm ? wr.imm_data : 0;
      const bool tear = faults.tear != TearMode::kNone &&
                        writes_sent_ == faults.tear_op_index;
      ++writes_sent_;
      const uint32_t half = wr.length / 2;
      if (tear && faults.tear == TearMode::kPrefix) {
        FrameHeader prefix = h;
        prefix.type = static_cast<uint8_t>(FrameType::kWrite);
        prefix.aux = 0;
        emit_write(prefix, src, half, not_before);
        if (!close_queued_) {
          close_reason_ = absl::StrCat("fault injection: WRITE wr_id=",
                                       wr.wr_id, " torn after ", half, " of ",
                                       wr.length, " bytes");
          QueueClose(not_before);
        }
      } else if (tear && faults.tear == TearMode::kOutOfOrder &&
                 wr.length >= 2) {
        // The second half lands first; the first half, which carries the
        // immediate if any, lands a visible gap later.
        FrameHeader tail = h;
        tail.type = static_cast<uint8_t>(FrameType::kWrite);
        tail.aux = 0;
        tail.remote_addr += half;
        emit_write(tail, src + half, wr.length - half, not_before);
        h.seq = ++next_request_seq_;
        const absl::Duration gap = faults.stall_for > absl::ZeroDuration()
                                       ? faults.stall_for
                                       : kDefaultTearGap;
        if (!close_queued_) {
          emit_write(h, src, half, not_before + absl::ToInt64Nanoseconds(gap));
        }
      } else {
        emit_write(h, src, wr.length, not_before);
      }
      break;
    }
    case Opcode::kRead:
      h.type = static_cast<uint8_t>(FrameType::kRead);
      h.aux = wr.length;
      QueueFrame(h, nullptr, 0, nullptr, 0, not_before);
      break;
    case Opcode::kFetchAdd:
    case Opcode::kCompareSwap: {
      h.type = static_cast<uint8_t>(wr.opcode == Opcode::kFetchAdd
                                        ? FrameType::kFetchAdd
                                        : FrameType::kCompareSwap);
      h.payload_length = sizeof(AtomicPayload);
      const AtomicPayload operands = {wr.compare_add, wr.swap};
      QueueFrame(h, reinterpret_cast<const char*>(&operands), sizeof(operands),
                 nullptr, 0, not_before);
      break;
    }
    case Opcode::kRecv:
      LOG(FATAL) << "PostSend validated the opcode";
  }
  e.last_seq = next_request_seq_++;
  ++ops_sent_;
  if (faults.drop_after_ops != 0 && ops_sent_ >= faults.drop_after_ops &&
      !close_queued_) {
    close_reason_ = absl::StrCat("fault injection: connection dropped after ",
                                 faults.drop_after_ops, " requests");
    QueueClose(not_before);
  }
}

Channel::OutFrame& Channel::QueueFrame(const FrameHeader& header,
                                       const char* inline_payload,
                                       uint32_t inline_len, const char* ref,
                                       uint32_t ref_len, int64_t not_before) {
  DCHECK_LE(inline_len, kInlineCopyBytes);
  OutFrame& f = out_.emplace_back();
  std::memcpy(f.head, &header, sizeof(header));
  if (inline_len > 0) {
    std::memcpy(f.head + sizeof(header), inline_payload, inline_len);
  }
  f.head_len = sizeof(header) + inline_len;
  f.ref = ref;
  f.ref_len = ref_len;
  f.is_request = IsRequest(static_cast<FrameType>(header.type));
  if (link_.enabled()) {
    const LinkEmulator::Slot slot =
        link_.Schedule(not_before, f.head_len + f.ref_len);
    f.send_ns = std::max(slot.idle_arrival_ns, slot.arrival_ns - kMaxEarlyNs);
    f.slack_ns = slot.arrival_ns - f.send_ns;
  } else {
    f.send_ns = not_before;
    f.slack_ns = 0;
  }
  return f;
}

void Channel::QueueClose(int64_t not_before) {
  // Frames leave in order, so the close follows everything queued before.
  OutFrame& f = out_.emplace_back();
  f.close_after = true;
  f.send_ns = not_before;
  close_queued_ = true;
}

bool Channel::CompleteThrough(uint64_t seq) {
  while (sq_transmitted_ > 0 && sq_.front().last_seq < seq) {
    if (IsReadOrAtomic(sq_.front().wr.opcode)) {
      ProtocolError(absl::StrCat("request ", sq_.front().last_seq,
                                 " acknowledged without its response"));
      return false;
    }
    CompleteFront(WcStatus::kSuccess, 0, "");
  }
  CheckFrontLocalError();
  return state_ == QpState::kReady;
}

void Channel::CompleteFront(WcStatus status, uint32_t byte_len,
                            std::string detail) {
  SendEntry& e = sq_.front();
  if (status != WcStatus::kSuccess || e.wr.signaled) {
    PushCompletion(
        {e.wr.wr_id, e.wr.opcode, status, byte_len, 0, std::move(detail)});
  }
  if (IsReadOrAtomic(e.wr.opcode)) --rd_in_flight_;
  sq_.pop_front();
  --sq_transmitted_;
}

void Channel::CheckFrontLocalError() {
  if (state_ == QpState::kReady && sq_transmitted_ == 0 && !sq_.empty() &&
      sq_.front().local_error != WcStatus::kSuccess) {
    const std::string detail = sq_.front().local_detail;
    Fail(sq_.front().local_error, detail, Teardown::kAfterQueued);
  }
}

// ---------------------------------------------------------------------------
// Input: the peer's requests and the responses to ours.
// ---------------------------------------------------------------------------

void Channel::OnEvents(uint32_t events) {
  MutexLock lock(&mu_);
  if (detached_ || nic_ == nullptr) return;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 && !in_closed_) {
    ReadInput();
  }
  Flush(MonotonicNowNs());
  SyncInterest();
}

void Channel::OnTimer() {
  MutexLock lock(&mu_);
  if (detached_ || nic_ == nullptr) return;
  Flush(MonotonicNowNs());
  SyncInterest();
}

void Channel::ReadInput() {
  size_t budget = kMaxInputPerTurn;
  while (!in_closed_ && budget > 0) {
    ParseBuffered();
    if (in_closed_) break;
    ssize_t got;
    if (in_phase_ == InPhase::kPayload && in_begin_ == in_end_ &&
        in_left_ >= kDirectReadBytes) {
      // Straight into place, plus the start of whatever follows. The lock
      // is released meanwhile so that the application can post and poll;
      // the destination stays valid because Detach() and deregistration
      // wait for the placement to end.
      char* const dst = in_dst_;
      iovec iov[2] = {{dst, in_left_}, {in_buf_.get(), kTailBytes}};
      in_begin_ = in_end_ = 0;
      placing_ = true;
      mu_.Unlock();
      got = readv(fd_.get(), iov, 2);
      const int saved_errno = errno;
      mu_.Lock();
      placing_ = false;
      placement_done_.SignalAll();
      errno = saved_errno;
      if (got > 0) {
        if (in_phase_ != InPhase::kPayload || in_dst_ != dst) {
          continue;  // the queue pair failed meanwhile: drop the rest
        }
        const size_t direct = std::min<size_t>(got, in_left_);
        in_dst_ += direct;
        in_left_ -= direct;
        in_end_ = got - direct;
        if (in_left_ == 0) FinishFrame();
      }
    } else {
      if (in_phase_ == InPhase::kDrain || in_begin_ == in_end_) {
        in_begin_ = in_end_ = 0;
      } else if (in_begin_ > 0) {
        // Only a partial header can be left over.
        std::memmove(in_buf_.get(), in_buf_.get() + in_begin_,
                     in_end_ - in_begin_);
        in_end_ -= in_begin_;
        in_begin_ = 0;
      }
      size_t room = kInputBufferBytes - in_end_;
      // After a large frame, read just enough to see the next header, so a
      // large payload that follows is received in place.
      if (last_frame_large_ && in_phase_ == InPhase::kHeader) {
        room = std::min(room, kTailBytes);
      }
      got = recv(fd_.get(), in_buf_.get() + in_end_, room, MSG_DONTWAIT);
      if (got > 0) in_end_ += got;
    }
    if (got == 0) {
      in_closed_ = true;
      if (state_ == QpState::kReady) {
        Fail(WcStatus::kRetryExceeded, "the connection was closed by the peer",
             Teardown::kAbort);
      }
      break;
    }
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      const std::string why = absl::StrCat("recv: ", strerror(errno));
      in_closed_ = true;
      Fail(WcStatus::kRetryExceeded, why, Teardown::kAbort);
      break;
    }
    budget -= std::min<size_t>(budget, got);
  }
  if (!in_closed_) ParseBuffered();
  if (ack_pending_ && state_ == QpState::kReady) {
    ack_pending_ = false;
    // Without a link model a queued ACK that has not gone out yet can simply
    // cover more; with one, a later ACK must travel on its own.
    if (!link_.enabled() && !out_.empty()) {
      OutFrame& last = out_.back();
      FrameHeader* lh = reinterpret_cast<FrameHeader*>(last.head);
      if (last.sent == 0 && last.head_len == sizeof(FrameHeader) &&
          lh->type == static_cast<uint8_t>(FrameType::kAck)) {
        lh->seq = next_exec_seq_;
        return;
      }
    }
    FrameHeader ack = {};
    ack.type = static_cast<uint8_t>(FrameType::kAck);
    ack.seq = next_exec_seq_;
    QueueResponse(ack, nullptr, 0, nullptr, 0);
  }
}

void Channel::ParseBuffered() {
  while (in_begin_ < in_end_) {
    if (in_phase_ == InPhase::kDrain) {
      in_begin_ = in_end_;
      break;
    }
    if (in_phase_ == InPhase::kHeader) {
      if (in_end_ - in_begin_ < sizeof(FrameHeader)) break;
      std::memcpy(&in_header_, in_buf_.get() + in_begin_, sizeof(FrameHeader));
      in_begin_ += sizeof(FrameHeader);
      StartFrame();
    } else {
      const size_t take = std::min<size_t>(in_end_ - in_begin_, in_left_);
      std::memcpy(in_dst_, in_buf_.get() + in_begin_, take);
      in_dst_ += take;
      in_left_ -= static_cast<uint32_t>(take);
      in_begin_ += take;
      if (in_left_ == 0) FinishFrame();
    }
  }
}

void Channel::ExpectPayload(char* dst, uint32_t length) {
  in_dst_ = dst;
  in_left_ = length;
  if (length == 0) {
    FinishFrame();
  } else {
    in_phase_ = InPhase::kPayload;
  }
}

bool Channel::CheckRequestSeq() {
  if (in_header_.seq != next_exec_seq_) {
    ProtocolError(absl::StrCat("request numbered ", in_header_.seq,
                               " where ", next_exec_seq_, " was due"));
    return false;
  }
  return true;
}

void Channel::StartFrame() {
  const FrameHeader& h = in_header_;
  const uint32_t len = h.payload_length;
  last_frame_large_ = len >= kDirectReadBytes;
  in_dst_is_memory_ = false;
  const auto type = static_cast<FrameType>(h.type);
  switch (type) {
    case FrameType::kWrite:
    case FrameType::kWriteWithImm: {
      if (!CheckRequestSeq()) return;
      if (len > kMaxMessageBytes) {
        RejectRequest(h.seq, WcStatus::kRemoteInvalidRequest,
                      absl::StrCat("WRITE of ", len, " bytes exceeds ",
                                   kMaxMessageBytes));
        return;
      }
      char* target = nullptr;
      if (len > 0) {
        std::string detail;
        const WcStatus status = regions_->Check(h.rkey, h.remote_addr, len,
                                                kRemoteWrite, &target, &detail);
        if (status != WcStatus::kSuccess) {
          RejectRequest(h.seq, status, detail);
          return;
        }
      }
      if (type == FrameType::kWriteWithImm && rq_.empty()) {
        RejectRequest(h.seq, WcStatus::kRnrRetryExceeded,
                      "no receive posted for WRITE_WITH_IMM");
        return;
      }
      MaterializeResponseRefs();
      in_dst_is_memory_ = true;
      ExpectPayload(target, len);
      return;
    }
    case FrameType::kRead: {
      if (!CheckRequestSeq()) return;
      if (len != 0) {
        ProtocolError("READ request with a payload");
        return;
      }
      if (h.aux > kMaxMessageBytes) {
        RejectRequest(h.seq, WcStatus::kRemoteInvalidRequest,
                      absl::StrCat("READ of ", h.aux, " bytes exceeds ",
                                   kMaxMessageBytes));
        return;
      }
      if (responses_queued_ >= config_.max_rd_atomic) {
        RejectRequest(h.seq, WcStatus::kRemoteInvalidRequest,
                      absl::StrCat("more than max_rd_atomic = ",
                                   config_.max_rd_atomic,
                                   " READ/atomic requests outstanding"));
        return;
      }
      char* source = nullptr;
      if (h.aux > 0) {
        std::string detail;
        const WcStatus status = regions_->Check(h.rkey, h.remote_addr, h.aux,
                                                kRemoteRead, &source, &detail);
        if (status != WcStatus::kSuccess) {
          RejectRequest(h.seq, status, detail);
          return;
        }
      }
      ++next_exec_seq_;
      FrameHeader response = {};
      response.type = static_cast<uint8_t>(FrameType::kReadResponse);
      response.seq = h.seq;
      response.payload_length = h.aux;
      if (h.aux <= kInlineCopyBytes) {
        QueueResponse(response, source, h.aux, nullptr, 0);
      } else {
        QueueResponse(response, nullptr, 0, source, h.aux);
      }
      return;
    }
    case FrameType::kFetchAdd:
    case FrameType::kCompareSwap:
      if (!CheckRequestSeq()) return;
      if (len != sizeof(AtomicPayload)) {
        ProtocolError(absl::StrCat("atomic request with ", len,
                                   " payload bytes"));
        return;
      }
      ExpectPayload(in_small_, len);
      return;
    case FrameType::kAck:
      if (len != 0 || h.seq > next_request_seq_) {
        ProtocolError(absl::StrCat("ACK of ", h.seq, " with ", len,
                                   " payload bytes; ", next_request_seq_,
                                   " requests sent"));
        return;
      }
      CompleteThrough(h.seq);
      return;
    case FrameType::kReadResponse: {
      if (!CompleteThrough(h.seq)) return;
      if (sq_transmitted_ == 0 || sq_.front().wr.opcode != Opcode::kRead ||
          sq_.front().last_seq != h.seq || sq_.front().wr.length != len) {
        ProtocolError(absl::StrCat("unexpected READ response to request ",
                                   h.seq, " with ", len, " bytes"));
        return;
      }
      in_dst_is_memory_ = true;
      ExpectPayload(static_cast<char*>(sq_.front().wr.local_addr), len);
      return;
    }
    case FrameType::kAtomicResponse:
      if (!CompleteThrough(h.seq)) return;
      if (sq_transmitted_ == 0 || !IsReadOrAtomic(sq_.front().wr.opcode) ||
          sq_.front().wr.opcode == Opcode::kRead ||
          sq_.front().last_seq != h.seq || len != kAtomicResponseBytes) {
        ProtocolError(absl::StrCat("unexpected atomic response to request ",
                                   h.seq, " with ", len, " bytes"));
        return;
      }
      ExpectPayload(in_small_, len);
      return;
    case FrameType::kNak:
      if (len > kMaxNakDetail) {
        ProtocolError(absl::StrCat("NAK with ", len, " bytes of text"));
        return;
      }
      ExpectPayload(in_small_, len);
      return;
  }
  ProtocolError(absl::StrCat("unknown frame type ", static_cast<int>(h.type)));
}

void Channel::FinishFrame() {
  in_phase_ = InPhase::kHeader;
  const FrameHeader& h = in_header_;
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kWrite:
      ++next_exec_seq_;
      ack_pending_ = true;
      return;
    case FrameType::kWriteWithImm: {
      ++next_exec_seq_;
      ack_pending_ = true;
      const uint64_t recv_id = rq_.front().wr_id;
      rq_.pop_front();
      PushCompletion({recv_id, Opcode::kRecv, WcStatus::kSuccess,
                      h.payload_length, h.aux, ""});
      return;
    }
    case FrameType::kFetchAdd:
    case FrameType::kCompareSwap:
      ExecuteAtomic();
      return;
    case FrameType::kReadResponse:
      CompleteFront(WcStatus::kSuccess, h.payload_length, "");
      CheckFrontLocalError();
      Transmit(MonotonicNowNs());
      return;
    case FrameType::kAtomicResponse:
      std::memcpy(sq_.front().wr.local_addr, in_small_, kAtomicResponseBytes);
      CompleteFront(WcStatus::kSuccess, kAtomicResponseBytes, "");
      CheckFrontLocalError();
      Transmit(MonotonicNowNs());
      return;
    case FrameType::kNak: {
      const std::string text =
          PrintablePeerText(std::string_view(in_small_, h.payload_length));
      const WcStatus status = IsValidFailure(h.status)
                                  ? static_cast<WcStatus>(h.status)
                                  : WcStatus::kRemoteOperationError;
      if (!CompleteThrough(h.seq)) return;
      Fail(status,
           absl::StrCat("the peer failed request ", h.seq, ": ",
                        WcStatusName(status), " (", text, ")"),
           Teardown::kAfterQueued);
      return;
    }
    case FrameType::kRead:
    case FrameType::kAck:
      break;
  }
  LOG(FATAL) << "frame type " << static_cast<int>(h.type)
             << " has no payload to finish";
}

void Channel::ExecuteAtomic() {
  const FrameHeader& h = in_header_;
  AtomicPayload operands;
  std::memcpy(&operands, in_small_, sizeof(operands));
  if (responses_queued_ >= config_.max_rd_atomic) {
    RejectRequest(h.seq, WcStatus::kRemoteInvalidRequest,
                  absl::StrCat("more than max_rd_atomic = ",
                               config_.max_rd_atomic,
                               " READ/atomic requests outstanding"));
    return;
  }
  char* target = nullptr;
  std::string detail;
  const WcStatus status =
      regions_->Check(h.rkey, h.remote_addr, sizeof(uint64_t), kRemoteAtomic,
                      &target, &detail);
  if (status != WcStatus::kSuccess) {
    RejectRequest(h.seq, status, detail);
    return;
  }
  if (h.remote_addr % alignof(uint64_t) != 0) {
    RejectRequest(h.seq, WcStatus::kRemoteInvalidRequest,
                  absl::StrFormat("atomic target 0x%x is not 8-byte aligned",
                                  h.remote_addr));
    return;
  }
  MaterializeResponseRefs();
  auto* word = reinterpret_cast<uint64_t*>(target);
  uint64_t old;
  if (static_cast<FrameType>(h.type) == FrameType::kFetchAdd) {
    old = __atomic_fetch_add(word, operands.compare_add, __ATOMIC_SEQ_CST);
  } else {
    old = operands.compare_add;
    __atomic_compare_exchange_n(word, &old, operands.swap, /*weak=*/false,
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  }
  ++next_exec_seq_;
  FrameHeader response = {};
  response.type = static_cast<uint8_t>(FrameType::kAtomicResponse);
  response.seq = h.seq;
  response.payload_length = kAtomicResponseBytes;
  QueueResponse(response, reinterpret_cast<const char*>(&old), sizeof(old),
                nullptr, 0);
}

void Channel::QueueResponse(const FrameHeader& header,
                            const char* inline_payload, uint32_t inline_len,
                            const char* ref, uint32_t ref_len) {
  if (close_queued_ || out_closed_) return;  // nobody will read it
  OutFrame& f = QueueFrame(header, inline_payload, inline_len, ref, ref_len,
                           MonotonicNowNs());
  const auto type = static_cast<FrameType>(header.type);
  if (type == FrameType::kReadResponse || type == FrameType::kAtomicResponse) {
    f.response = true;
    ++responses_queued_;
  }
  if (ref != nullptr) {
    f.response_ref = true;
    ++response_refs_;
  }
}

void Channel::MaterializeResponseRefs() {
  if (response_refs_ == 0) return;
  for (size_t i = 0; i < out_.size(); ++i) {
    OutFrame& f = out_[i];
    if (!f.response_ref) continue;
    f.owned.reset(new char[f.ref_len]);
    std::memcpy(f.owned.get(), f.ref, f.ref_len);
    f.ref = f.owned.get();
    f.response_ref = false;
  }
  response_refs_ = 0;
}

void Channel::RejectRequest(uint64_t seq, WcStatus status,
                            const std::string& detail) {
  LOG(WARNING) << config_.description << ": request " << seq
               << " from the peer failed: " << WcStatusName(status) << " ("
               << detail << ")";
  FrameHeader nak = {};
  nak.type = static_cast<uint8_t>(FrameType::kNak);
  nak.status = static_cast<uint8_t>(status);
  nak.seq = seq;
  const uint32_t text_len = static_cast<uint32_t>(
      std::min<size_t>(detail.size(), kMaxNakDetail));
  nak.payload_length = text_len;
  QueueResponse(nak, detail.data(), text_len, nullptr, 0);
  Fail(WcStatus::kFlushed,
       absl::StrCat("request ", seq, " from the peer failed: ",
                    WcStatusName(status), " (", detail, ")"),
       Teardown::kAfterQueued);
}

void Channel::ProtocolError(const std::string& what) {
  LOG(WARNING) << config_.description << ": invalid input from the peer: "
               << what;
  if (state_ == QpState::kReady) {
    FrameHeader nak = {};
    nak.type = static_cast<uint8_t>(FrameType::kNak);
    nak.status = static_cast<uint8_t>(WcStatus::kRemoteInvalidRequest);
    nak.seq = next_exec_seq_;
    const std::string text = what.substr(0, kMaxNakDetail);
    nak.payload_length = static_cast<uint32_t>(text.size());
    QueueResponse(nak, text.data(), nak.payload_length, nullptr, 0);
  }
  Fail(WcStatus::kGeneralError, absl::StrCat("invalid input from the peer: ", what),
       Teardown::kAfterQueued);
}

// ---------------------------------------------------------------------------
// Output.
// ---------------------------------------------------------------------------

void Channel::Flush(int64_t now) {
  out_blocked_ = false;
  while (!out_closed_ && !out_.empty()) {
    OutFrame& head = out_.front();
    if (head.send_ns > now + kSendAheadNs) break;
    if (head.close_after) {
      // Everything queued before the close is out.
      shutdown(fd_.get(), SHUT_WR);
      out_closed_ = true;
      out_.clear();
      responses_queued_ = response_refs_ = 0;
      if (state_ == QpState::kReady) {
        Fail(WcStatus::kRetryExceeded, close_reason_, Teardown::kAbort);
      }
      break;
    }
    iovec iov[kMaxIov];
    int n = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < out_.size() && n + 2 <= kMaxIov &&
                       bytes < kMaxBytesPerSend;
         ++i) {
      const OutFrame& f = out_[i];
      if (f.close_after) break;
      if (f.send_ns > now + kSendAheadNs) break;
      uint64_t skip = f.sent;
      if (skip < f.head_len) {
        iov[n++] = {const_cast<char*>(f.head) + skip, f.head_len - skip};
        bytes += f.head_len - skip;
        skip = 0;
      } else {
        skip -= f.head_len;
      }
      if (skip < f.ref_len) {
        iov[n++] = {const_cast<char*>(f.ref) + skip, f.ref_len - skip};
        bytes += f.ref_len - skip;
      }
    }
    msghdr msg = {};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    const ssize_t wrote = sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        out_blocked_ = true;
        break;
      }
      const std::string why = absl::StrCat("send: ", strerror(errno));
      out_closed_ = true;
      Fail(WcStatus::kRetryExceeded, why, Teardown::kAbort);
      break;
    }
    size_t left = static_cast<size_t>(wrote);
    while (left > 0) {
      OutFrame& f = out_.front();
      const uint64_t total = f.head_len + f.ref_len;
      const uint64_t take = std::min<uint64_t>(left, total - f.sent);
      f.sent += take;
      left -= take;
      if (f.sent == total) {
        if (f.response) --responses_queued_;
        if (f.response_ref) --response_refs_;
        out_.pop_front();
      }
    }
    if (static_cast<size_t>(wrote) < bytes) {
      out_blocked_ = true;
      break;
    }
  }
  UpdateNextDue();
}

void Channel::UpdateNextDue() {
  int64_t due = 0;
  int64_t wake = 0;
  if (!out_closed_ && !out_blocked_ && !out_.empty()) {
    const OutFrame& head = out_.front();
    due = head.send_ns;
    // Spin for a frame that must leave on time, not for one with slack.
    wake = head.slack_ns >= kTimerLeadNs ? due : due - kTimerLeadNs;
  }
  next_wake_ns_.store(wake, std::memory_order_release);
  const int64_t previous = next_due_ns_.exchange(due, std::memory_order_acq_rel);
  if (due != 0 && (previous == 0 || due < previous) && nic_ != nullptr &&
      !Nic::OnNicThread()) {
    nic_->Wake();
  }
}

void Channel::SyncInterest() {
  if (nic_ == nullptr || detached_) return;
  uint32_t want = 0;
  if (!in_closed_) want |= EPOLLIN;
  if (!out_closed_ && out_blocked_) want |= EPOLLOUT;
  if (want != epoll_events_) {
    nic_->SetInterest(fd_.get(), nic_id_, epoll_events_, want);
    epoll_events_ = want;
  }
}

// ---------------------------------------------------------------------------
// Errors.
// ---------------------------------------------------------------------------

void Channel::Fail(WcStatus first, const std::string& reason,
                   Teardown teardown) {
  if (state_ == QpState::kReady) {
    state_ = QpState::kError;
    error_ = absl::Status(CodeOf(first),
                          absl::StrCat(config_.description, ": ", reason));
    VLOG(1) << config_.description << ": queue pair failed: " << reason;
    bool first_done = false;
    while (!sq_.empty()) {
      const SendEntry& e = sq_.front();
      WcStatus status = WcStatus::kFlushed;
      std::string detail = reason;
      if (!first_done && first != WcStatus::kFlushed) status = first;
      first_done = true;
      PushCompletion({e.wr.wr_id, e.wr.opcode, status, 0, 0, std::move(detail)});
      sq_.pop_front();
    }
    sq_transmitted_ = 0;
    rd_in_flight_ = 0;
    while (!rq_.empty()) {
      PushCompletion({rq_.front().wr_id, Opcode::kRecv, WcStatus::kFlushed, 0,
                      0, reason});
      rq_.pop_front();
    }
    in_phase_ = InPhase::kDrain;
    in_dst_ = nullptr;
    ack_pending_ = false;
    // Published last: whoever sees the error state finds the completions.
    failed_.store(true, std::memory_order_release);
  }
  if (teardown == Teardown::kAbort) {
    shutdown(fd_.get(), SHUT_RDWR);
    in_closed_ = out_closed_ = true;
    close_queued_ = true;
    out_.clear();
    responses_queued_ = response_refs_ = 0;
    return;
  }
  if (close_queued_ || out_closed_) return;
  // Our requests that have not started are dropped (they were flushed); one
  // half sent must not read application memory any more.
  out_.RemoveIf([](const OutFrame& f) { return f.is_request && f.sent == 0; });
  for (size_t i = 0; i < out_.size(); ++i) {
    OutFrame& f = out_[i];
    if (f.is_request && f.ref != nullptr && f.owned == nullptr) {
      f.owned.reset(new char[f.ref_len]);
      std::memcpy(f.owned.get(), f.ref, f.ref_len);
      f.ref = f.owned.get();
    }
  }
  close_reason_ = reason;
  QueueClose(MonotonicNowNs());
}

}  // namespace dreplay::verbs::soft
