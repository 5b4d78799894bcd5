// Copyright dreplay authors.

#include "verbs/soft/shared_path.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "glog/logging.h"
#include "verbs/shareable_memory.h"

namespace dreplay::verbs::soft {
namespace {

// Holders of writable segments: one per SharedPath in the process.
std::atomic<uint64_t> next_holder{1};
// The seed salt of the answer direction's jitter.
constexpr uint64_t kReverseSeedSalt = 0x5bd1e9955bd1e995ULL;

constexpr uint32_t kRemoteBits = kRemoteRead | kRemoteWrite;

// A segment fd a peer passed is a memfd that cannot shrink and holds at
// least `bytes`: mapping it can never fault.
bool SafeSegment(int fd, uint64_t bytes, bool writable) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) return false;
  if (writable && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) != 0) return false;
  struct stat st = {};
  return fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= bytes;
}

}  // namespace

SharedPath::SharedPath(std::unique_ptr<ShmLink> link, const LinkModel& model,
                       std::shared_ptr<SharedLink> link_out, int max_rd_atomic, FrameWriter* writer)
    : link_(std::move(link)),
      link_out_(std::move(link_out)),
      host_path_ns_(link_out_ != nullptr ? link_out_->host_path_ns() : 0),
      reverse_(model, model.seed ^ kReverseSeedSalt, host_path_ns_),
      max_rd_atomic_(static_cast<size_t>(std::max(max_rd_atomic, 1))),
      writer_(writer),
      holder_(next_holder.fetch_add(1, std::memory_order_relaxed)) {}

SharedPath::~SharedPath() {
  Revoke();
  DropMappings();
}

bool SharedPath::TryExecute(const WorkRequest& wr, bool local_ok, int64_t now, uint64_t barrier) {
  const bool is_write = wr.opcode == Opcode::kWrite;
  if ((!is_write && wr.opcode != Opcode::kRead) || !local_ok || wr.length == 0) return false;
  auto it = mappings_.find(wr.rkey);
  if (it == mappings_.end()) return false;
  // The peer's queue pair is gone: over TCP, where the request fails as it
  // would on a device (the mapping would still show the old memory).
  if (link_->peer_closed()) return false;
  const Mapping& m = it->second;
  if ((m.access & (is_write ? kRemoteWrite : kRemoteRead)) == 0) return false;
  if (wr.remote_addr < m.remote_addr || wr.length > m.length ||
      wr.remote_addr - m.remote_addr > m.length - wr.length) {
    return false;  // over TCP, where the responder refuses it
  }
  char* remote = m.base + (wr.remote_addr - m.remote_addr);
  if (is_write) {
    std::memcpy(remote, wr.local_addr, wr.length);
    // What this queue pair writes later is seen after it, on any host.
    std::atomic_thread_fence(std::memory_order_release);
    link_->CountShared(wr.length, 0);
  } else {
    std::atomic_thread_fence(std::memory_order_acquire);
    std::memcpy(wr.local_addr, remote, wr.length);
    link_->CountShared(0, wr.length);
  }
  const int64_t due = DueTime(wr, now);  // also books the link for unsignalled ones
  if (wr.signaled) {
    pending_.push_back(Pending{
        Completion{wr.wr_id, wr.opcode, WcStatus::kSuccess, is_write ? 0u : wr.length, 0, {}},
        barrier, due});
  }
  return true;
}

int64_t SharedPath::DueTime(const WorkRequest& wr, int64_t now) {
  if (link_out_ == nullptr) return now;
  const bool is_write = wr.opcode == Opcode::kWrite;
  const size_t request = sizeof(FrameHeader) + (is_write ? wr.length : 0);
  const size_t answer = sizeof(FrameHeader) + (is_write ? 0 : wr.length);
  int64_t leave = now;
  if (!is_write) {
    // Credits: with max_rd_atomic READs in flight, this one leaves when
    // the oldest of them is answered.
    while (!reads_due_.empty() && reads_due_.front() <= now) reads_due_.pop_front();
    if (reads_due_.size() >= max_rd_atomic_) {
      leave = reads_due_[reads_due_.size() - max_rd_atomic_];
    }
  }
  // An emulator of frames that their sender holds takes the loopback
  // path's own time off the delay; this path does not take it: add it back
  // each way (0 where the receiver releases frames).
  const int64_t arrival = link_out_->Schedule(leave, request).arrival_ns + host_path_ns_;
  const int64_t due = reverse_.Schedule(arrival, answer).arrival_ns + host_path_ns_;
  if (!is_write) reads_due_.push_back(due);
  return due;
}

void SharedPath::NoteKey(const WorkRequest& wr) {
  if (wr.opcode != Opcode::kWrite && wr.opcode != Opcode::kRead) return;
  if (mappings_.contains(wr.rkey) || !asked_.insert(wr.rkey).second) return;
  outstanding_[wr.rkey] = Ask{wr.remote_addr, wr.length};
  QueueControl(FrameType::kShareAsk, wr.rkey);
}

void SharedPath::QueueControl(FrameType type, uint32_t rkey) {
  FrameHeader h = {};
  h.type = static_cast<uint8_t>(type);
  h.rkey = rkey;
  writer_->QueueResponse(h, nullptr, 0);
}

void SharedPath::OnFrame(const FrameHeader& header, const char* payload) {
  switch (static_cast<FrameType>(header.type)) {
    case FrameType::kShareGrant: {
      ShareGrant grant;
      std::memcpy(&grant, payload, sizeof(grant));
      OnGrant(header, grant);
      return;
    }
    case FrameType::kShareRevoke:
      Unmap(header.rkey);
      asked_.insert(header.rkey);
      outstanding_.erase(header.rkey);
      return;
    default:  // kShareDeny: stays asked, so never asked again
      outstanding_.erase(header.rkey);
      return;
  }
}

bool SharedPath::GrantAcceptable(const FrameHeader& h, const ShareGrant& grant,
                                 const Ask& ask) const {
  const uint64_t page = ShareableMemory::PageBytes();
  // Every number of a grant comes from the peer.
  if (grant.segments == 0 || grant.segments > kMaxSharedSegments || grant.segment_bytes == 0 ||
      grant.segment_bytes % page != 0 || grant.segment_bytes > kMaxGrantBytes / grant.segments ||
      grant.length == 0 || grant.length > grant.segment_bytes * grant.segments ||
      (h.aux & ~kRemoteBits) != 0 || (h.aux & kRemoteBits) == 0) {
    return false;
  }
  const uint64_t total = grant.segment_bytes * grant.segments;
  if (total > kMaxMappedBytes - mapped_bytes_) return false;
  // It covers the request that asked.
  return ask.remote_addr >= h.remote_addr && ask.length <= grant.length &&
         ask.remote_addr - h.remote_addr <= grant.length - ask.length;
}

void SharedPath::OnGrant(const FrameHeader& h, const ShareGrant& grant) {
  const uint32_t rkey = h.rkey;
  const bool writable = (h.aux & kRemoteWrite) != 0;
  // Only the answer to an outstanding ask, and only once.
  auto ask = outstanding_.find(rkey);
  if (ask == outstanding_.end()) {
    ++grants_ignored_;
    LOG_EVERY_T(WARNING, kIgnoredGrantLogInterval_s)
        << "ignoring a same-host grant for key " << rkey << " that was not asked for ("
        << grants_ignored_ << " grants ignored on this queue pair)";
    return;
  }
  const bool acceptable = GrantAcceptable(h, grant, ask->second);
  outstanding_.erase(ask);
  if (!acceptable) {
    ++grants_ignored_;
    LOG_EVERY_T(WARNING, kIgnoredGrantLogInterval_s)
        << "ignoring a malformed or oversized same-host grant for key " << rkey << " ("
        << grants_ignored_ << " grants ignored on this queue pair)";
    return;
  }
  // The fds went ahead of the grant over the Unix socket, so they are
  // already there: no wait.
  absl::StatusOr<std::vector<Fd>> fds = link_->ReceiveFds(rkey, grant.segments, absl::Now());
  if (!fds.ok()) {
    ++grants_ignored_;
    LOG_EVERY_T(WARNING, kIgnoredGrantLogInterval_s)
        << "same-host grant for key " << rkey << ": " << fds.status();
    return;
  }
  for (const Fd& fd : *fds) {
    if (!SafeSegment(fd.get(), grant.segment_bytes, writable)) {
      ++grants_ignored_;
      LOG_EVERY_T(WARNING, kIgnoredGrantLogInterval_s)
          << "same-host grant for key " << rkey << ": not a sealed segment";
      return;
    }
  }
  const size_t total = grant.segment_bytes * grant.segments;
  void* base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return;
  const int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  for (size_t i = 0; i < fds->size(); ++i) {
    void* at = mmap(static_cast<char*>(base) + i * grant.segment_bytes, grant.segment_bytes, prot,
                    MAP_SHARED | MAP_FIXED, (*fds)[i].get(), 0);
    if (at == MAP_FAILED) {
      munmap(base, total);
      return;
    }
  }
  Unmap(rkey);
  mappings_[rkey] =
      Mapping{h.remote_addr, grant.length, h.aux & kRemoteBits, static_cast<char*>(base), total};
  mapped_bytes_ += total;
  VLOG(1) << "same-host mapping for key " << rkey << ": " << grant.length << " bytes";
}

void SharedPath::Unmap(uint32_t rkey) {
  auto it = mappings_.find(rkey);
  if (it == mappings_.end()) return;
  munmap(it->second.base, it->second.mapped);
  mapped_bytes_ -= it->second.mapped;
  mappings_.erase(it);
}

void SharedPath::DropMappings() {
  for (const auto& [key, m] : mappings_) munmap(m.base, m.mapped);
  mappings_.clear();
  mapped_bytes_ = 0;
}

void SharedPath::Revoke() {
  // The peer stops at its next operation, before the TCP close reaches it.
  link_->MarkClosed();
  granted_.clear();
  const absl::Status renewed = ShareableMemory::RenewClaimed(holder_);
  if (!renewed.ok()) {
    LOG(ERROR) << "same-host path: a peer may keep writing memory it was granted: " << renewed;
  }
}

void SharedPath::OnAsk(uint32_t rkey, const KeyRange& range) {
  const uint32_t rights = range.access & kRemoteBits;
  bool exact = false;
  std::vector<SharedSegment> segments;
  if (range.found && rights != 0) {
    segments = ShareableMemory::FindSegments(range.addr, range.length, &exact);
  }
  bool ok = exact && segments.size() <= kMaxSharedSegments;
  for (const SharedSegment& s : segments) {
    if (!ok) break;
    // One segment size; writable rights over unsealed segments only, and
    // READ-only rights over sealed ones only (the peer could otherwise
    // write through its mapping what the key does not let it write).
    ok = s.length == segments[0].length &&
         ((rights & kRemoteWrite) != 0 ? !s.read_only : s.read_only);
  }
  // Writable: this queue pair's alone until it goes (Revoke).
  if (ok && (rights & kRemoteWrite) != 0) ok = ShareableMemory::ClaimWritable(segments, holder_);
  std::vector<int> fds;
  for (const SharedSegment& s : segments) fds.push_back(s.fd);
  if (ok) {
    const absl::Status sent = link_->SendFds(rkey, fds);
    if (!sent.ok()) {
      VLOG(1) << "same-host grant for key " << rkey << ": " << sent;
      ok = false;
    }
  }
  if (!ok) {
    QueueControl(FrameType::kShareDeny, rkey);
    return;
  }
  granted_[rkey] = range.region_key;
  FrameHeader h = {};
  h.type = static_cast<uint8_t>(FrameType::kShareGrant);
  h.rkey = rkey;
  h.remote_addr = reinterpret_cast<uint64_t>(range.addr);
  h.aux = rights;
  h.payload_length = sizeof(ShareGrant);
  const ShareGrant grant{range.length, segments[0].length, static_cast<uint32_t>(segments.size()),
                         0};
  writer_->QueueResponse(h, reinterpret_cast<const char*>(&grant), sizeof(grant));
}

void SharedPath::RevokeRegion(uint32_t region_key) {
  for (auto it = granted_.begin(); it != granted_.end();) {
    if (it->second == region_key) {
      QueueControl(FrameType::kShareRevoke, it->first);
      granted_.erase(it++);
    } else {
      ++it;
    }
  }
}

int SharedPath::Poll(CompletionQueue* tcp, absl::Span<Completion> out) {
  size_t n = 0;
  int64_t now = 0;
  while (n < out.size()) {
    if (pending_.empty()) {
      n += tcp->Poll(out.subspan(n));
      break;
    }
    Pending& front = pending_.front();
    const uint64_t popped = tcp->popped();
    if (popped < front.barrier) {
      // TCP-path completions posted before it leave first.
      const size_t k =
          tcp->Poll(out.subspan(n, std::min<uint64_t>(out.size() - n, front.barrier - popped)));
      if (k == 0) break;
      n += k;
      continue;
    }
    if (now == 0) now = MonotonicNowNs();
    if (front.due_ns > now) break;
    out[n++] = std::move(front.completion);
    pending_.pop_front();
  }
  return static_cast<int>(n);
}

}  // namespace dreplay::verbs::soft
