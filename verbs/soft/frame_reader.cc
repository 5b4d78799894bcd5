// Copyright dreplay authors.

#include "verbs/soft/frame_reader.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verbs/soft/link.h"

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
// Input handled per Read() before other sockets get their turn.
constexpr size_t kMaxInputPerTurn = 4 << 20;
// A frame this close to its release time is released now.
constexpr int64_t kReleaseAheadNs = 1000;

}  // namespace

FrameReader::FrameReader(Handler* handler, bool releases)
    : handler_(handler), releases_(releases), buf_(new char[kInputBufferBytes]) {}

FrameReader::End FrameReader::Read(int fd, Mutex* mu, std::string* why) {
  size_t budget = kMaxInputPerTurn;
  now_ns_ = 0;
  while (!closed_ && budget > 0) {
    ParseBuffered();
    if (closed_ || paused_ || held_until_ != 0) break;
    ssize_t got;
    // A read that returns less than it asked for has emptied the socket:
    // the next would fail with EAGAIN, and epoll reports what comes later.
    bool drained = false;
    if (phase_ == Phase::kPayload && begin_ == end_ && left_ >= kDirectReadBytes) {
      bool placed = false;
      got = ReceiveInPlace(fd, mu, &placed, &drained);
      if (got > 0 && !placed) continue;
    } else {
      got = ReceiveBuffered(fd, &drained);
    }
    if (got == 0) {
      closed_ = true;
      return End::kPeerClosed;
    }
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      *why = absl::StrCat("recv: ", strerror(errno));
      closed_ = true;
      return End::kFailed;
    }
    budget -= std::min<size_t>(budget, got);
    if (drained) break;
  }
  if (!closed_ && !paused_) ParseBuffered();
  return End::kOpen;
}

ssize_t FrameReader::ReceiveInPlace(int fd, Mutex* mu, bool* placed, bool* drained) {
  // Straight into place, plus the start of whatever follows. The lock is
  // released meanwhile so that the application can post and poll; the
  // destination stays valid because Detach() and deregistration wait for
  // the placement to end.
  char* const dst = dst_;
  iovec iov[2] = {{dst, left_}, {buf_.get(), kTailBytes}};
  begin_ = end_ = 0;
  placing_ = true;
  mu->Unlock();
  const ssize_t got = readv(fd, iov, 2);
  const int saved_errno = errno;
  *drained = got > 0 && static_cast<size_t>(got) < iov[0].iov_len + iov[1].iov_len;
  mu->Lock();
  placing_ = false;
  placement_done_.SignalAll();
  errno = saved_errno;
  *placed = false;
  if (got <= 0) return got;
  // The queue pair failed meanwhile: drop the rest.
  if (phase_ != Phase::kPayload || dst_ != dst) return got;
  *placed = true;
  const size_t direct = std::min<size_t>(got, left_);
  dst_ += direct;
  left_ -= direct;
  end_ = got - direct;
  if (left_ == 0) FinishFrame();
  return got;
}

ssize_t FrameReader::ReceiveBuffered(int fd, bool* drained) {
  if (phase_ == Phase::kDrain || begin_ == end_) {
    begin_ = end_ = 0;
  } else if (begin_ > 0) {
    // Only a partial header can be left over.
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  size_t room = kInputBufferBytes - end_;
  // After a large frame, read just enough to see the next header, so a
  // large payload that follows is received in place.
  if (last_frame_large_ && phase_ == Phase::kHeader) {
    room = std::min(room, kTailBytes);
  }
  const ssize_t got = recv(fd, buf_.get() + end_, room, MSG_DONTWAIT);
  if (got > 0) end_ += got;
  *drained = got > 0 && static_cast<size_t>(got) < room;
  return got;
}

void FrameReader::ParseBuffered() {
  while (begin_ < end_ && !paused_) {
    if (phase_ == Phase::kDrain) {
      begin_ = end_;
      break;
    }
    if (phase_ == Phase::kHeader) {
      if (end_ - begin_ < sizeof(FrameHeader)) break;
      if (releases_ && MustHold(buf_.get() + begin_)) break;
      std::memcpy(&header_, buf_.get() + begin_, sizeof(FrameHeader));
      begin_ += sizeof(FrameHeader);
      StartFrame();
    } else {
      const size_t take = std::min<size_t>(end_ - begin_, left_);
      std::memcpy(dst_, buf_.get() + begin_, take);
      dst_ += take;
      left_ -= static_cast<uint32_t>(take);
      begin_ += take;
      if (left_ == 0) FinishFrame();
    }
  }
}

bool FrameReader::MustHold(const char* header) {
  int64_t release;
  std::memcpy(&release, header + offsetof(FrameHeader, release_ns), sizeof(release));
  // The clock is read again only when a frame looks early.
  if (release - kReleaseAheadNs > now_ns_) now_ns_ = MonotonicNowNs();
  held_until_ = release - kReleaseAheadNs > now_ns_ ? release : 0;
  if (held_until_ == 0) return false;
  FrameHeader h;
  std::memcpy(&h, header, sizeof(h));
  held_slack_ns_ = int64_t{h.release_slack_us} * 1000;
  held_response_ = IsResponse(static_cast<FrameType>(h.type));
  return true;
}

void FrameReader::StartFrame() {
  last_frame_large_ = header_.payload_length >= kDirectReadBytes;
  dst_is_memory_ = false;
  const PayloadTarget target = handler_->OnFrameHeader(header_);
  switch (target.kind) {
    case PayloadTarget::Kind::kNone:
      return;
    case PayloadTarget::Kind::kPause:
      begin_ -= sizeof(FrameHeader);  // offered again after Resume()
      paused_ = true;
      return;
    case PayloadTarget::Kind::kSmall:
      CHECK_LE(header_.payload_length, sizeof(small_))
          << "a frame handler chose the small buffer for a large payload";
      ExpectPayload(small_, /*into_memory=*/false);
      return;
    case PayloadTarget::Kind::kMemory:
      ExpectPayload(target.memory, /*into_memory=*/true);
      return;
  }
}

void FrameReader::ExpectPayload(char* dst, bool into_memory) {
  dst_ = dst;
  left_ = header_.payload_length;
  dst_is_memory_ = into_memory;
  if (left_ == 0) {
    FinishFrame();
  } else {
    phase_ = Phase::kPayload;
  }
}

void FrameReader::FinishFrame() {
  phase_ = Phase::kHeader;
  handler_->OnFrameComplete(header_, small_);
}

void FrameReader::WaitForPlacement(Mutex* mu) {
  while (placing_) placement_done_.Wait(mu);
}

bool FrameReader::PlacingInto(const char* begin, const char* end) const {
  return phase_ == Phase::kPayload && dst_is_memory_ && dst_ >= begin && dst_ < end;
}

void FrameReader::Drain() {
  paused_ = false;
  held_until_ = 0;
  phase_ = Phase::kDrain;
  dst_ = nullptr;
}

}  // namespace dreplay::verbs::soft
