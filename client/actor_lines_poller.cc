// Copyright dreplay authors.

#include "client/actor_lines_poller.h"

#include <cstring>

#include "common/status_macros.h"

namespace dreplay::client {

using protocol::ActorLine;

absl::StatusOr<std::unique_ptr<ActorLinesPoller>> ActorLinesPoller::Create(ClientSession* session) {
  RETURN_IF_ERROR(session->Region(protocol::RegionKind::kActors).status());
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<ActorLinesPoller> p(new ActorLinesPoller(session, sink));
  ASSIGN_OR_RETURN(p->buffer_,
                   RegisteredBuffer::Create(session->provider(),
                                            protocol::ActorsRegionBytes(session->config())));
  p->known_.resize(session->config().max_actors);
  return p;
}

ActorLinesPoller::ActorLinesPoller(ClientSession* session, int sink)
    : session_(session), sink_(sink) {}

void ActorLinesPoller::Seed(const std::vector<ActorLine>& lines) {
  for (const ActorLine& line : lines) {
    if (line.actor_id < known_.size()) known_[line.actor_id] = line;
  }
}

void ActorLinesPoller::TakeAnswer() {
  ++reads_completed_;
  for (uint32_t id = 0; id < known_.size(); ++id) {
    ActorLine line;
    std::memcpy(&line, buffer_->data() + protocol::ActorLineOffset(id), sizeof(line));
    if (protocol::CheckActorLine(line, id).ok()) known_[id] = line;
  }
}

absl::Status ActorLinesPoller::Post() {
  ASSIGN_OR_RETURN(const verbs::RemoteRegion region,
                   session_->Region(protocol::RegionKind::kActors));
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink_, ++reads_posted_);
  wr.opcode = verbs::Opcode::kRead;
  wr.local = buffer_->mr();
  wr.local_addr = buffer_->data();
  wr.length = static_cast<uint32_t>(protocol::ActorsRegionBytes(session_->config()));
  wr.remote_addr = region.addr;
  wr.rkey = region.rkey;
  const absl::Status posted = session_->Post(absl::MakeConstSpan(&wr, 1));
  if (!posted.ok()) {
    // A failed connection: the next Poll posts again once it is back.
    return IsConnectionFailure(posted) ? absl::OkStatus() : posted;
  }
  pending_ = true;
  pending_generation_ = session_->generation();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ActorLine>> ActorLinesPoller::Poll() {
  if (pending_ && pending_generation_ != session_->generation()) pending_ = false;
  verbs::Completion completions[4];
  const int n = session_->Poll(sink_, absl::MakeSpan(completions));
  for (int i = 0; i < n; ++i) {
    pending_ = false;
    if (completions[i].ok()) {
      TakeAnswer();
    } else if (!IsConnectionFailure(completions[i].ToStatus())) {
      return completions[i].ToStatus();
    }
  }
  if (!pending_) RETURN_IF_ERROR(Post());
  std::vector<ActorLine> lines;
  for (const std::optional<ActorLine>& line : known_) {
    if (line.has_value()) lines.push_back(*line);
  }
  return lines;
}

}  // namespace dreplay::client
