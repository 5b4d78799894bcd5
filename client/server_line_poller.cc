// Copyright dreplay authors.

#include "client/server_line_poller.h"

#include <cstddef>
#include <cstring>

#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace dreplay::client {

absl::StatusOr<std::unique_ptr<ServerLinePoller>> ServerLinePoller::Create(
    ClientSession* session, absl::Duration interval) {
  if (interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("a ServerLine poll interval must be >= 0");
  }
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<ServerLinePoller> p(new ServerLinePoller(session, interval, sink));
  ASSIGN_OR_RETURN(p->buffer_,
                   RegisteredBuffer::Create(session->provider(), sizeof(protocol::ServerLine)));
  ASSIGN_OR_RETURN(p->known_, session->ReadServerLine());
  p->posted_at_ = absl::Now();
  return p;
}

ServerLinePoller::ServerLinePoller(ClientSession* session, absl::Duration interval, int sink)
    : session_(session), interval_(interval), sink_(sink) {}

absl::StatusOr<protocol::ServerLine> ServerLinePoller::Poll() {
  if (pending_ && pending_generation_ != session_->generation()) pending_ = false;
  verbs::Completion completions[4];
  const int n = session_->Poll(sink_, absl::MakeSpan(completions));
  for (int i = 0; i < n; ++i) {
    pending_ = false;
    if (completions[i].ok()) {
      std::memcpy(&known_, buffer_->data(), sizeof(known_));
    } else if (!IsConnectionFailure(completions[i].ToStatus())) {
      return completions[i].ToStatus();
    }
  }
  const absl::Time now = absl::Now();
  if (pending_ || now - posted_at_ < interval_) return known_;
  ASSIGN_OR_RETURN(const verbs::RemoteRegion control,
                   session_->Region(protocol::RegionKind::kControl));
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink_, ++reads_posted_);
  wr.opcode = verbs::Opcode::kRead;
  wr.local = buffer_->mr();
  wr.local_addr = buffer_->data();
  wr.length = sizeof(protocol::ServerLine);
  wr.remote_addr = control.addr + offsetof(protocol::ControlBlock, server);
  wr.rkey = control.rkey;
  const absl::Status posted = session_->Post(absl::MakeConstSpan(&wr, 1), TrafficClass::kPolling);
  if (!posted.ok()) {
    // A failed connection: the next Poll posts again once it is back.
    if (IsConnectionFailure(posted)) return known_;
    return posted;
  }
  pending_ = true;
  pending_generation_ = session_->generation();
  posted_at_ = now;
  return known_;
}

}  // namespace dreplay::client
