// Copyright dreplay authors.
//
// actor_lines_poller.h: the actors' lines (protocol::ActorLine) kept known
// without ever waiting for the link. Each Poll() takes the answer of the
// READ of the actors region in flight if it came, posts the next one if
// none is in flight, and returns the lines known. StatsReader::ReadActors
// waits for its READ; on a link that forwarded data saturates, that answer
// queues behind the data, and a learner that waited for it stopped
// training meanwhile (for seconds on a 2 Mb/s link).
//
//   ASSIGN_OR_RETURN(auto poller, ActorLinesPoller::Create(session.get()));
//   poller->Seed(*stats_reader->ReadActors());   // optional: start known
//   ...
//   ASSIGN_OR_RETURN(std::vector<ActorLine> lines, poller->Poll());
//
// A line is replaced only by an intact one (CheckActorLine): a torn line
// keeps the one known before, and a line never written is left out. The
// lines known are at most one READ's round trip plus the interval between
// Polls old. A failed connection loses the READ in flight; the next Poll
// posts another on the new connection.
//
// Thread safety: not thread-safe; one thread uses it (and its session).

#ifndef DREPLAY_CLIENT_ACTOR_LINES_POLLER_H_
#define DREPLAY_CLIENT_ACTOR_LINES_POLLER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "client/session.h"
#include "protocol/layout.h"

namespace dreplay::client {

class ActorLinesPoller {
 public:
  // `session` (a learner's or a monitor's) is not owned and must outlive
  // the poller.
  static absl::StatusOr<std::unique_ptr<ActorLinesPoller>> Create(ClientSession* session);

  // Starts from these lines (e.g. a blocking StatsReader::ReadActors).
  void Seed(const std::vector<protocol::ActorLine>& lines);
  // Never waits. The lines known, by actor id. Errors: a READ that failed
  // for a reason other than the connection, the session's.
  absl::StatusOr<std::vector<protocol::ActorLine>> Poll();

  uint64_t reads_completed() const { return reads_completed_; }

 private:
  ActorLinesPoller(ClientSession* session, int sink);
  absl::Status Post();
  void TakeAnswer();

  ClientSession* const session_;
  const int sink_;
  std::unique_ptr<RegisteredBuffer> buffer_;
  std::vector<std::optional<protocol::ActorLine>> known_;  // by actor id
  bool pending_ = false;
  uint64_t pending_generation_ = 0;  // the connection the READ was posted on
  uint64_t reads_posted_ = 0;
  uint64_t reads_completed_ = 0;
};

}  // namespace dreplay::client

#endif  // DREPLAY_CLIENT_ACTOR_LINES_POLLER_H_
