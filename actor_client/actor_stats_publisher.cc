// Copyright dreplay authors.

#include "actor_client/actor_stats_publisher.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/retry.h"
#include "common/status_macros.h"

namespace dreplay::actor {

using client::ClientSession;
using protocol::ActorLine;
using protocol::RegionKind;

absl::StatusOr<std::unique_ptr<ActorStatsPublisher>> ActorStatsPublisher::Create(
    ClientSession* session, uint32_t window) {
  if (session->options().role != protocol::Role::kActor) {
    return absl::InvalidArgumentError("ActorStatsPublisher needs an actor session");
  }
  if (window == 0) return absl::InvalidArgumentError("ActorStatsPublisher window=0 must be >= 1");
  if (!session->directory().Has(RegionKind::kActors)) {
    return absl::FailedPreconditionError(
        "the server has no actors region (it runs with max_actors=0)");
  }
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<ActorStatsPublisher> p(new ActorStatsPublisher(session, window, sink));
  ASSIGN_OR_RETURN(p->buffer_,
                   client::RegisteredBuffer::Create(session->provider(), sizeof(ActorLine)));
  p->line_ = reinterpret_cast<ActorLine*>(p->buffer_->data());
  return p;
}

ActorStatsPublisher::ActorStatsPublisher(ClientSession* session, uint32_t window, int sink)
    : session_(session), window_(window), sink_(sink) {}

void ActorStatsPublisher::RecordEpisode(double episode_return) {
  ++episodes_;
  last_return_ = episode_return;
  returns_.push_back(episode_return);
  if (returns_.size() > window_) returns_.pop_front();
}

absl::Status ActorStatsPublisher::Publish(uint64_t transitions) {
  ActorLine& l = *line_;
  l = ActorLine{};
  l.actor_id = session_->options().actor_id;
  l.returns_count = static_cast<uint32_t>(returns_.size());
  l.env_steps = env_steps_;
  l.episodes = episodes_;
  l.returns_sum = std::accumulate(returns_.begin(), returns_.end(), 0.0);
  l.last_return = last_return_;
  l.updated_ns = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  l.transitions = transitions;
  protocol::SealActorLine(&l);
  return client::WithReconnect(session_, [&] { return TryPublish(); });
}

absl::Status ActorStatsPublisher::TryPublish() {
  ASSIGN_OR_RETURN(const verbs::RemoteRegion own_line, session_->Region(RegionKind::kActors));
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink_, next_wr_id_++);
  wr.opcode = verbs::Opcode::kWrite;
  wr.signaled = true;
  wr.local = buffer_->mr();
  wr.local_addr = line_;
  wr.length = sizeof(ActorLine);
  wr.remote_addr = own_line.addr;
  wr.rkey = own_line.rkey;
  RETURN_IF_ERROR(session_->Post(absl::MakeConstSpan(&wr, 1)));
  return session_->Wait(sink_, wr.wr_id, session_->options().op_timeout);
}

}  // namespace dreplay::actor
