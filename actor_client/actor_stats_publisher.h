// Copyright dreplay authors.
//
// actor_stats_publisher.h: an actor publishes its episode statistics in its
// line of the server's actors region (protocol/stats.h, ActorLine), where the
// learner and monitors READ them without server CPU.
//
//   ASSIGN_OR_RETURN(auto stats, ActorStatsPublisher::Create(session.get()));
//   stats->RecordStep();                  // every environment step
//   stats->RecordEpisode(episode_return); // every finished episode
//   RETURN_IF_ERROR(stats->Publish(writer->stats().committed));  // now and then
//
// returns_sum / returns_count cover the last `window` finished episodes.
// Publish() seals the line (checksum) and WRITEs it whole (64 bytes, one
// WRITE); readers check the checksum, so a READ that overlaps a WRITE is
// detected. The session's key for the actors region covers this actor's
// line only.
//
// Failures: Publish reconnects the session when the connection failed and
// writes the line on the new connection (its content is the actor's running
// totals, so nothing is lost). It fails when the session cannot reconnect,
// or with FailedPrecondition when the server has no actors region
// (max_actors = 0).
//
// Thread safety: not thread-safe; one thread uses it (and its session).

#ifndef DREPLAY_ACTOR_CLIENT_ACTOR_STATS_PUBLISHER_H_
#define DREPLAY_ACTOR_CLIENT_ACTOR_STATS_PUBLISHER_H_

#include <cstdint>
#include <deque>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/session.h"
#include "protocol/layout.h"
#include "verbs/verbs.h"

namespace dreplay::actor {

class ActorStatsPublisher {
 public:
  // Returns kept for returns_sum by default.
  static constexpr uint32_t kDefaultWindow = 100;

  // `session` (an actor's) is not owned and must outlive the publisher.
  // FailedPrecondition when the server has no actors region.
  static absl::StatusOr<std::unique_ptr<ActorStatsPublisher>> Create(
      client::ClientSession* session, uint32_t window = kDefaultWindow);

  void RecordStep(uint64_t steps = 1) { env_steps_ += steps; }
  void RecordEpisode(double episode_return);

  // WRITEs the line (blocking until it completes); `transitions` is the
  // count of transitions the actor has committed. Stamps updated_ns with
  // the wall clock.
  absl::Status Publish(uint64_t transitions);

  // The line as last published.
  const protocol::ActorLine& line() const { return *line_; }
  uint64_t env_steps() const { return env_steps_; }
  uint64_t episodes() const { return episodes_; }

 private:
  ActorStatsPublisher(client::ClientSession* session, uint32_t window, int sink);
  absl::Status TryPublish();

  client::ClientSession* const session_;
  const uint32_t window_;
  const int sink_;
  std::unique_ptr<client::RegisteredBuffer> buffer_;  // one ActorLine
  protocol::ActorLine* line_ = nullptr;
  uint64_t env_steps_ = 0;
  uint64_t episodes_ = 0;
  double last_return_ = 0;
  std::deque<double> returns_;
  uint64_t next_wr_id_ = 1;
};

}  // namespace dreplay::actor

#endif  // DREPLAY_ACTOR_CLIENT_ACTOR_STATS_PUBLISHER_H_
