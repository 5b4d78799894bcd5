// Copyright dreplay authors.

#include "verbs/soft/frame_writer.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dreplay::verbs::soft {
namespace {

// Limits of one sendmsg().
constexpr int kMaxIov = 256;
constexpr size_t kMaxBytesPerSend = 8 << 20;
// On an emulated link, a frame queued behind others (bandwidth-bound) may
// leave up to this long before its arrival time, but never before it would
// arrive on an idle link: bursts then go out in one send per wake-up instead
// of one wake-up per frame, and the emulated latency and long-run bandwidth
// stay exact.
constexpr int64_t kMaxEarlyNs = 50000;
// Where the receiver releases frames, frames this large still wait at the
// sender until about their release time (QueueFrame); with
// LinkRelease::kStamped only responses smaller than this go at once.
constexpr uint32_t kSenderHeldBytes = 4096;

}  // namespace

FrameWriter::FrameWriter(int fd, std::shared_ptr<SharedLink> link)
    : fd_(fd), link_(link != nullptr && link->enabled() ? std::move(link) : nullptr) {}

FrameWriter::OutFrame& FrameWriter::QueueFrame(const FrameHeader& header, const char* payload,
                                               uint32_t length, int64_t not_before) {
  OutFrame& f = out_.emplace_back();
  std::memcpy(f.head, &header, sizeof(header));
  FrameHeader* const h = reinterpret_cast<FrameHeader*>(f.head);
  h->release_ns = 0;
  h->release_slack_us = 0;
  f.head_len = sizeof(header);
  if (length <= kInlineCopyBytes) {
    if (length > 0) std::memcpy(f.head + sizeof(header), payload, length);
    f.head_len += length;
  } else {
    f.ref = payload;
    f.ref_len = length;
  }
  f.is_request = IsRequest(static_cast<FrameType>(header.type));
  if (link_ != nullptr) {
    const LinkEmulator::Slot slot = link_->Schedule(not_before, f.head_len + f.ref_len);
    // Sent (or released) when it arrives, or up to kMaxEarlyNs sooner when
    // queued behind other frames, but never before it would arrive on an
    // idle link: bursts go out in one send per wake-up.
    const int64_t due = std::max(slot.idle_arrival_ns, slot.arrival_ns - kMaxEarlyNs);
    f.send_ns = due;
    f.slack_ns = slot.arrival_ns - due;
    if (link_->release() != LinkRelease::kSender) {
      // The exact times: the emulator took its host path off (link.h).
      h->release_ns = due + link_->host_path_ns();
      h->release_slack_us = static_cast<uint16_t>(std::min<int64_t>(f.slack_ns / 1000, UINT16_MAX));
    }
    // kReceiver: every frame; kStamped: a small response (an ACK, a short
    // READ's data), which the requester holds until its stamp and its
    // polling thread releases (Channel::Poll), so that no thread of the
    // responder's spins for it. Requests stay with their sender and are
    // executed at their arrival.
    const bool receiver_holds = link_->release() == LinkRelease::kReceiver ||
                                (link_->release() == LinkRelease::kStamped &&
                                 IsResponse(static_cast<FrameType>(header.type)) &&
                                 f.head_len + f.ref_len < kSenderHeldBytes);
    if (receiver_holds) {
      last_release_ns_ = slot.arrival_ns;
      // A small frame goes at once (or when a stall ends); a large one about
      // when it is due, less the host's own path, so that the peer's socket
      // buffers do not fill with payloads it may not take yet (its TCP
      // window would close).
      if (f.head_len + f.ref_len >= kSenderHeldBytes) {
        f.send_ns = std::max(not_before, due - kHostPathNs);
        f.slack_ns = std::max<int64_t>(0, slot.arrival_ns - kHostPathNs - f.send_ns);
      } else {
        f.send_ns = not_before;
        f.slack_ns = slot.arrival_ns - not_before;
      }
    }
  } else {
    f.send_ns = not_before;
    f.slack_ns = 0;
  }
  return f;
}

void FrameWriter::QueueRequest(const FrameHeader& header, const char* payload, uint32_t length,
                               int64_t not_before) {
  QueueFrame(header, payload, length, not_before);
}

void FrameWriter::QueueResponse(const FrameHeader& header, const char* payload, uint32_t length) {
  if (close_queued_ || out_closed_) return;  // nobody will read it
  OutFrame& f = QueueFrame(header, payload, length, MonotonicNowNs());
  const auto type = static_cast<FrameType>(header.type);
  if (type == FrameType::kReadResponse || type == FrameType::kAtomicResponse) {
    f.response = true;
    ++responses_queued_;
  }
  if (f.ref != nullptr) {
    f.response_ref = true;
    ++response_refs_;
    response_ref_bytes_ += f.ref_len;
  }
}

void FrameWriter::QueueClose(int64_t not_before, const std::string& reason) {
  // Frames leave in order, so the close follows everything queued before.
  OutFrame& f = out_.emplace_back();
  f.close_after = true;
  // Where the peer releases the frames, the connection ends when the last
  // of them has arrived, as when their sender held them.
  f.send_ns = std::max(not_before, last_release_ns_);
  close_queued_ = true;
  close_reason_ = reason;
}

bool FrameWriter::ExtendQueuedAck(uint64_t seq) {
  // With a link model a later ACK must travel on its own.
  if (link_ != nullptr || out_.empty()) return false;
  OutFrame& last = out_.back();
  FrameHeader* lh = reinterpret_cast<FrameHeader*>(last.head);
  if (last.sent == 0 && last.head_len == sizeof(FrameHeader) &&
      lh->type == static_cast<uint8_t>(FrameType::kAck)) {
    lh->seq = seq;
    return true;
  }
  return false;
}

void FrameWriter::MaterializeResponseRefs() {
  if (response_refs_ == 0) return;
  for (size_t i = 0; i < out_.size(); ++i) {
    OutFrame& f = out_[i];
    if (!f.response_ref) continue;
    f.TakeCopy();
    f.response_ref = false;
  }
  response_refs_ = 0;
  response_ref_bytes_ = 0;
}

FrameWriter::Stop FrameWriter::Flush(int64_t send_by, std::string* why) {
  out_blocked_ = false;
  while (!out_closed_ && !out_.empty()) {
    OutFrame& head = out_.front();
    if (head.send_ns > send_by) break;
    if (head.close_after) {
      // Everything queued before the close is out.
      shutdown(fd_, SHUT_WR);
      out_closed_ = true;
      out_.clear();
      responses_queued_ = response_refs_ = 0;
      response_ref_bytes_ = 0;
      *why = close_reason_;
      return Stop::kCloseSent;
    }
    iovec iov[kMaxIov];
    int n = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < out_.size() && n + 2 <= kMaxIov && bytes < kMaxBytesPerSend; ++i) {
      const OutFrame& f = out_[i];
      if (f.close_after) break;
      if (f.send_ns > send_by) break;
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
    const ssize_t wrote = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        out_blocked_ = true;
        break;
      }
      *why = absl::StrCat("send: ", strerror(errno));
      out_closed_ = true;
      return Stop::kSendFailed;
    }
    Consume(static_cast<size_t>(wrote));
    if (static_cast<size_t>(wrote) < bytes) {
      out_blocked_ = true;
      break;
    }
  }
  return Stop::kNone;
}

void FrameWriter::Consume(size_t wrote) {
  size_t left = wrote;
  while (left > 0) {
    OutFrame& f = out_.front();
    const uint64_t total = f.head_len + f.ref_len;
    const uint64_t take = std::min<uint64_t>(left, total - f.sent);
    f.sent += take;
    left -= take;
    if (f.sent == total) {
      if (f.response) --responses_queued_;
      if (f.response_ref) {
        --response_refs_;
        response_ref_bytes_ -= f.ref_len;
      }
      out_.pop_front();
    }
  }
}

bool FrameWriter::NextSend(int64_t* send_ns, int64_t* slack_ns) const {
  if (out_closed_ || out_blocked_ || out_.empty()) return false;
  const OutFrame& head = out_[0];
  *send_ns = head.send_ns;
  *slack_ns = head.slack_ns;
  return true;
}

void FrameWriter::Abort() {
  out_closed_ = true;
  close_queued_ = true;
  out_.clear();
  responses_queued_ = response_refs_ = 0;
  response_ref_bytes_ = 0;
}

void FrameWriter::CloseAfterQueued(const std::string& reason) {
  if (close_queued_ || out_closed_) return;
  // Our requests that have not started are dropped (they were flushed); one
  // half sent must not read application memory any more.
  out_.RemoveIf([](const OutFrame& f) { return f.is_request && f.sent == 0; });
  for (size_t i = 0; i < out_.size(); ++i) {
    OutFrame& f = out_[i];
    if (f.is_request && f.ref != nullptr && f.owned == nullptr) f.TakeCopy();
  }
  QueueClose(MonotonicNowNs(), reason);
}

void FrameWriter::Discard() {
  out_closed_ = true;
  out_.clear();
}

}  // namespace dreplay::verbs::soft
