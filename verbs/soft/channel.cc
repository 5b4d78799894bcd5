// Copyright dreplay authors.

#include "verbs/soft/channel.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "verbs/soft/link.h"
#include "verbs/soft/nic.h"

namespace dreplay::verbs::soft {
namespace {

absl::StatusCode CodeOf(WcStatus status) {
  Completion c;
  c.status = status == WcStatus::kFlushed ? WcStatus::kGeneralError : status;
  return c.ToStatus().code();
}

constexpr char kErrorState[] = "queue pair is in the error state";

}  // namespace

Channel::Channel(Fd fd, const ChannelConfig& config, std::shared_ptr<RegionTable> regions,
                 std::unique_ptr<ShmLink> shm)
    : fd_(std::move(fd)),
      config_(config),
      regions_(std::move(regions)),
      emulated_link_(config.link_out != nullptr && config.link_out->enabled()),
      writer_(fd_.get(), config.link_out),
      reader_(this, config.same_clock),
      requester_(config.max_send_wr, config.max_rd_atomic, config.max_inline_data, config.faults,
                 regions_.get(), &writer_, &completions_, this),
      responder_(config.max_recv_wr, config.max_rd_atomic, config.description, regions_.get(),
                 &writer_, &completions_, this),
      shared_(shm == nullptr
                  ? nullptr
                  : std::make_unique<SharedPath>(std::move(shm), config.link, config.link_out,
                                                 config.max_rd_atomic, &writer_)) {}

Channel::~Channel() = default;

// ---------------------------------------------------------------------------
// Application side.
// ---------------------------------------------------------------------------

absl::Status Channel::PostSend(absl::Span<const WorkRequest> wrs) {
  RETURN_IF_ERROR(Requester::Validate(wrs));
  MutexLock lock(&mu_);
  if (state_ == QpState::kError || detached_) {
    for (const WorkRequest& wr : wrs) {
      completions_.Push({wr.wr_id, wr.opcode, WcStatus::kFlushed, 0, 0, kErrorState});
    }
    return absl::OkStatus();
  }
  const int64_t now = MonotonicNowNs();
  size_t shared = 0;
  if (shared_ != nullptr) {
    if (requester_.queued() + shared_->pending() + wrs.size() >
        static_cast<size_t>(config_.max_send_wr)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "send queue full: ", requester_.queued() + shared_->pending(), " outstanding + ",
          wrs.size(), " posted > max_send_wr ", config_.max_send_wr));
    }
    // RC order: the shared path only while nothing is outstanding on TCP.
    if (requester_.idle()) {
      const uint64_t barrier = completions_.pushed();
      while (shared < wrs.size() &&
             shared_->TryExecute(wrs[shared], requester_.LocalOk(wrs[shared]), now, barrier)) {
        ++shared;
      }
    }
    for (size_t i = shared; i < wrs.size(); ++i) shared_->NoteKey(wrs[i]);
  }
  if (shared < wrs.size()) {
    RETURN_IF_ERROR(requester_.Post(wrs.subspan(shared)));
    requester_.Transmit(now);
  }
  Flush(now);
  SyncInterest();
  return absl::OkStatus();
}

absl::Status Channel::PostRecv(absl::Span<const RecvRequest> rrs) {
  MutexLock lock(&mu_);
  if (state_ == QpState::kError || detached_) {
    for (const RecvRequest& rr : rrs) {
      completions_.Push({rr.wr_id, Opcode::kRecv, WcStatus::kFlushed, 0, 0, kErrorState});
    }
    return absl::OkStatus();
  }
  return responder_.Post(rrs);
}

int Channel::Poll(absl::Span<Completion> out) {
  if (out.empty()) return 0;
  const bool shared_pending = shared_ != nullptr && shared_->pending() > 0;
  // Completions held for the link model need no input; TCP completions
  // that go before them are already queued.
  const bool found = completions_.ready() > 0;
  // A poll that finds TCP completions shows a spinning poller as much as
  // one that reads: a busy application's polls mostly find some.
  if (found && !shared_pending && !emulated_link_) NotePoll(MonotonicNowNs());
  if (!found && !shared_pending && mu_.TryLock()) {
    // Progress by the polling thread: read and execute what has arrived,
    // and send the held frames that are due, rather than wait for the NIC
    // thread to be woken for them. Never waits: a busy channel is left to
    // the NIC thread. Only while this side's own requests wait for answers,
    // or while the input is this thread's (PollerReads): otherwise the
    // peer's requests are the NIC thread's to serve, and a poller waiting
    // for nothing on TCP (its work is on the same-host path, or it waits
    // for memory to change) would spend a receive call per poll.
    if (!detached_ && nic_ != nullptr) {
      const int64_t now = MonotonicNowNs();
      if (!reader_.closed() && !reader_.paused()) {
        if (!requester_.idle()) {
          NotePoll(now);
          ReadInput();
        } else if (input_parked_.load(std::memory_order_relaxed)) {
          ReadInput();  // the input is still this thread's (PollerReads)
        }
      }
      Flush(now);
      ResumeInput();
      SyncInterest();
    }
    mu_.Unlock();
  }
  if (shared_pending) return shared_->Poll(&completions_, out);
  return completions_.Poll(out);
}

absl::StatusOr<RemoteRegion> Channel::BindWindow(const MemoryRegion& mr, uint64_t offset,
                                                 uint64_t length, uint32_t remote_access) {
  if (length == 0 || offset > mr.length() || length > mr.length() - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "window [", offset, ", +", length, ") is not inside a region of ", mr.length(), " bytes"));
  }
  MutexLock lock(&mu_);
  if (state_ == QpState::kError || detached_) {
    return absl::FailedPreconditionError(
        absl::StrCat("binding a window: ", kErrorState, ": ", error_.message()));
  }
  char* addr = static_cast<char*>(mr.addr()) + offset;
  ASSIGN_OR_RETURN(const uint32_t rkey, responder_.BindWindow(mr, addr, length, remote_access));
  return RemoteRegion{reinterpret_cast<uint64_t>(addr), length, rkey, 0};
}

QpState Channel::state() const {
  if (failed_.load(std::memory_order_acquire)) return QpState::kError;
  // Fail() pushes the error completions, under the lock, before it
  // publishes failed_: a caller that has polled one waits here until
  // Fail() is done, so an error completion is never followed by kReady.
  MutexLock lock(&mu_);
  return state_;
}

absl::Status Channel::error() const {
  MutexLock lock(&mu_);
  return error_;
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

void Channel::WaitForPlacement() { reader_.WaitForPlacement(&mu_); }

void Channel::Unregister() {
  if (nic_ != nullptr && epoll_events_ != 0) {
    nic_->SetInterest(fd_.get(), nic_id_, epoll_events_, 0);
  }
  epoll_events_ = 0;
  nic_ = nullptr;
  input_parked_.store(false, std::memory_order_release);
}

void Channel::Detach() {
  MutexLock lock(&mu_);
  WaitForPlacement();
  if (detached_) return;
  detached_ = true;
  Unregister();
  shutdown(fd_.get(), SHUT_RDWR);
  reader_.Close();
  reader_.Drain();
  writer_.Discard();
  requester_.Clear();
  responder_.Clear();
  if (shared_ != nullptr) {
    shared_->DropMappings();
    shared_->ClearPending();
    shared_->Revoke();  // what the peer still writes through its mappings lands nowhere
  }
  next_due_ns_.store(0, std::memory_order_release);
  completions_.Clear();
}

void Channel::OnNicStopped() {
  MutexLock lock(&mu_);
  if (detached_) return;
  Fail(WcStatus::kFlushed, "the provider was destroyed", Teardown::kAbort);
  Unregister();
}

void Channel::OnDeregister(const MemoryRegion* mr, const char* begin, size_t length) {
  MutexLock lock(&mu_);
  WaitForPlacement();
  if (detached_) return;
  responder_.RemoveWindowsOf(mr->lkey());
  writer_.MaterializeResponseRefs();
  if (state_ != QpState::kReady) return;
  if (shared_ != nullptr) {
    shared_->RevokeRegion(mr->lkey());
    Flush(MonotonicNowNs());
  }
  if (reader_.PlacingInto(begin, begin + length)) {
    const FrameHeader& h = reader_.header();
    if (IsRequest(static_cast<FrameType>(h.type))) {
      responder_.Reject(h.seq, WcStatus::kRemoteAccessError,
                        "the memory region was deregistered during the WRITE");
    } else {
      Fail(WcStatus::kLocalProtectionError, "a local memory region was deregistered during a READ",
           Teardown::kAfterQueued);
    }
  } else if (requester_.Uses(mr)) {
    Fail(WcStatus::kLocalProtectionError,
         "a memory region was deregistered while a request using it was "
         "outstanding",
         Teardown::kAfterQueued);
  } else {
    return;
  }
  Flush(MonotonicNowNs());
  SyncInterest();
}

// ---------------------------------------------------------------------------
// NIC thread.
// ---------------------------------------------------------------------------

void Channel::OnEvents(uint32_t events) {
  MutexLock lock(&mu_);
  if (detached_ || nic_ == nullptr) return;
  if (reader_.paused() && (events & (EPOLLHUP | EPOLLERR)) != 0 && state_ == QpState::kReady) {
    // Input waits for output, and the connection is gone both ways.
    Fail(WcStatus::kRetryExceeded, "the connection was closed by the peer", Teardown::kAbort);
  }
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 && !reader_.closed() && !reader_.paused()) {
    ReadInput();
  }
  Flush(MonotonicNowNs());
  ResumeInput();
  SyncInterest();
}

void Channel::OnTimer() {
  MutexLock lock(&mu_);
  if (detached_ || nic_ == nullptr) return;
  Flush(MonotonicNowNs());
  ResumeInput();
  SyncInterest();
}

void Channel::ResumeInput() {
  if (reader_.closed()) return;
  // Input held for its release time (wire.h) that is due.
  if (!reader_.paused() && reader_.held_until() != 0 &&
      reader_.held_until() <= MonotonicNowNs() + kSendAheadNs) {
    ReadInput();
    Flush(MonotonicNowNs());
  }
  if (!reader_.paused() || responder_.MustWaitForResponses()) return;
  reader_.Resume();
  ReadInput();
  Flush(MonotonicNowNs());
}

void Channel::ReadInput() {
  // Another thread (the NIC's or a polling one) is receiving for this
  // channel with the lock released; it goes on parsing when it is back.
  if (reader_.placing()) return;
  std::string why;
  switch (reader_.Read(fd_.get(), &mu_, &why)) {
    case FrameReader::End::kOpen:
      break;
    case FrameReader::End::kPeerClosed:
      if (state_ == QpState::kReady) {
        Fail(WcStatus::kRetryExceeded, "the connection was closed by the peer", Teardown::kAbort);
      }
      break;
    case FrameReader::End::kFailed:
      Fail(WcStatus::kRetryExceeded, why, Teardown::kAbort);
      break;
  }
  responder_.SendPendingAck();
}

PayloadTarget Channel::OnFrameHeader(const FrameHeader& header) {
  mu_.AssertHeld();
  const auto type = static_cast<FrameType>(header.type);
  if (IsRequest(type)) return responder_.StartRequest(header);
  if (IsResponse(type)) return requester_.StartResponse(header);
  if (IsShare(type)) {
    const uint32_t expected =
        type == FrameType::kShareGrant ? static_cast<uint32_t>(sizeof(ShareGrant)) : 0u;
    if (shared_ == nullptr || header.payload_length != expected) {
      ProtocolError(absl::StrCat("unexpected same-host frame ", static_cast<int>(type), " with ",
                                 header.payload_length, " bytes"));
      return PayloadTarget::None();
    }
    return PayloadTarget::Small();
  }
  ProtocolError(absl::StrCat("unknown frame type ", static_cast<int>(type)));
  return PayloadTarget::None();
}

void Channel::OnFrameComplete(const FrameHeader& header, const char* small) {
  mu_.AssertHeld();
  const auto type = static_cast<FrameType>(header.type);
  if (IsRequest(type)) {
    responder_.CompleteRequest(header, small);
  } else if (type == FrameType::kShareAsk) {
    SharedPath::KeyRange range;
    range.found = responder_.FindKey(header.rkey, &range.addr, &range.length, &range.access,
                                     &range.region_key);
    shared_->OnAsk(header.rkey, range);
  } else if (IsShare(type)) {
    shared_->OnFrame(header, small);
  } else {
    requester_.CompleteResponse(header, small);
  }
}

void Channel::Flush(int64_t now) {
  std::string why;
  const FrameWriter::Stop stop = writer_.Flush(now + kSendAheadNs, &why);
  // A close queued while the queue pair still works comes from fault
  // injection: it ends the queue pair as a lost connection would.
  if (stop == FrameWriter::Stop::kSendFailed ||
      (stop == FrameWriter::Stop::kCloseSent && state_ == QpState::kReady)) {
    Fail(WcStatus::kRetryExceeded, why, Teardown::kAbort);
  }
  UpdateNextDue();
}

void Channel::UpdateNextDue() {
  int64_t due = 0;
  int64_t wake = 0;
  int64_t slack = 0;
  if (writer_.NextSend(&due, &slack)) {
    // Spin for a frame that must leave on time, not for one with slack,
    // nor for one that the application's polling thread, spinning on its
    // requests' completions, sends on time (Poll); the timer is for when
    // it does not.
    const bool poller_sends =
        emulated_link_ && !requester_.idle() &&
        MonotonicNowNs() - polled_at_ns_.load(std::memory_order_acquire) < kSpinningPollGapNs;
    wake = slack >= kTimerLeadNs || poller_sends ? due : due - kTimerLeadNs;
  }
  // Input held until its release time: spin for it unless it may be late
  // (queued behind others on the link) or it answers this side's requests,
  // whose polling thread releases it (Poll).
  const int64_t held = reader_.paused() || reader_.closed() ? 0 : reader_.held_until();
  if (held != 0 && (due == 0 || held < due)) {
    const bool polled = reader_.held_response() && !requester_.idle();
    due = held;
    wake = polled || reader_.held_slack_ns() >= kTimerLeadNs ? held : held - kTimerLeadNs;
  }
  next_wake_ns_.store(wake, std::memory_order_release);
  const int64_t previous = next_due_ns_.exchange(due, std::memory_order_acq_rel);
  if (due != 0 && (previous == 0 || due < previous) && nic_ != nullptr && !Nic::OnNicThread()) {
    nic_->TimerMoved(nic_id_);
  }
}

bool Channel::PollerReads() const {
  // With an emulated link the NIC thread is awake for the held frames
  // anyway (it spins before each one is due) and serves the input between
  // them at no cost of a wake-up; left to a poller alone, input waited
  // whenever the poller was off the processor (1 KiB READs over 10 km:
  // 0.6x).
  // Not given back when the requests complete: an application that posts
  // again at once would take it back, at two epoll_ctl() calls and a
  // wake-up of the NIC thread each time.
  if (emulated_link_) return false;
  const int64_t polled_at = polled_at_ns_.load(std::memory_order_acquire);
  const int64_t since = spinning_since_ns_.load(std::memory_order_relaxed);
  // (Never before a first poll: both words are 0 then.)
  return polled_at - since >= kSpinningNs && MonotonicNowNs() < polled_at + kPollerGraceNs;
}

void Channel::NotePoll(int64_t now) {
  // The application spins on its completions when it polls with no gap of
  // kSpinningPollGapNs for kSpinningNs; not a thread that polls now and
  // then between other work, nor one that waits a moment for a batch
  // before it goes back to making the next (a writer), whose input the
  // NIC thread had better keep. Only the application's thread writes
  // both words; spinning_since_ns_ goes first, so that a reader that sees
  // this poll's time (acquire) sees the run it belongs to.
  if (now - polled_at_ns_.load(std::memory_order_relaxed) >= kSpinningPollGapNs) {
    spinning_since_ns_.store(now, std::memory_order_relaxed);
  }
  polled_at_ns_.store(now, std::memory_order_release);
}

void Channel::SyncInterest() {
  if (nic_ == nullptr || detached_) return;
  uint32_t want = 0;
  // Not while input is held for its release time (the timer reads it
  // then), nor while a poller reads it (its timer looks again).
  const bool open = !reader_.closed() && !reader_.paused();
  const bool parked = open && PollerReads();
  if (open && reader_.held_until() == 0 && !parked) want |= EPOLLIN;
  if (parked != input_parked_.load(std::memory_order_relaxed)) {
    input_parked_.store(parked, std::memory_order_release);
    // The NIC thread learns of the poller's deadline.
    if (parked && !Nic::OnNicThread()) nic_->TimerMoved(nic_id_);
  }
  if (!writer_.closed() && writer_.blocked()) want |= EPOLLOUT;
  // Paused input that may go on again (output drained by another thread):
  // a writable socket brings the NIC thread to ResumeInput().
  if (reader_.paused() && !reader_.closed() && !responder_.MustWaitForResponses()) {
    want |= EPOLLOUT;
  }
  if (want != epoll_events_) {
    nic_->SetInterest(fd_.get(), nic_id_, epoll_events_, want);
    epoll_events_ = want;
  }
}

// ---------------------------------------------------------------------------
// Errors.
// ---------------------------------------------------------------------------

bool Channel::ready() const {
  mu_.AssertHeld();
  return state_ == QpState::kReady;
}

void Channel::Fail(WcStatus first, const std::string& reason) {
  mu_.AssertHeld();
  Fail(first, reason, Teardown::kAfterQueued);
}

void Channel::ProtocolError(const std::string& what) {
  mu_.AssertHeld();
  responder_.ProtocolError(what);
}

void Channel::Fail(WcStatus first, const std::string& reason, Teardown teardown) {
  if (state_ == QpState::kReady) {
    state_ = QpState::kError;
    error_ = absl::Status(CodeOf(first), absl::StrCat(config_.description, ": ", reason));
    VLOG(1) << config_.description << ": queue pair failed: " << reason;
    requester_.FlushAll(first, reason);
    responder_.FlushAll(reason);
    // The peer's windows die with the queue pair.
    if (shared_ != nullptr) shared_->DropMappings();
    reader_.Drain();
    // Published next: whoever sees the error state finds the completions.
    failed_.store(true, std::memory_order_release);
    // And so does this side's memory under the peer's mappings (still
    // under the lock: nothing of this queue pair runs meanwhile).
    if (shared_ != nullptr) shared_->Revoke();
  }
  if (teardown == Teardown::kAbort) {
    shutdown(fd_.get(), SHUT_RDWR);
    reader_.Close();
    writer_.Abort();
    return;
  }
  writer_.CloseAfterQueued(reason);
}

}  // namespace dreplay::verbs::soft
