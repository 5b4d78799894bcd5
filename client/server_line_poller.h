// Copyright dreplay authors.
//
// server_line_poller.h: the server's ServerLine (its ingest cursor: the
// transitions the actors generated) kept known without ever waiting for the
// link. Poll() takes the answer of the READ in flight if it came, and posts
// the next one once `interval` has passed since the last; it returns the
// line known. On a link that data saturates, a READ's answer queues behind
// the data: a caller that waited for it would stop meanwhile.
//
//   ASSIGN_OR_RETURN(auto poller, ServerLinePoller::Create(session.get(), absl::Milliseconds(20)));
//   ASSIGN_OR_RETURN(const protocol::ServerLine line, poller->Poll());
//
// Create READs the line once, waiting, so the poller starts known. The line
// known is at most a round trip plus `interval` old. A failed connection
// loses the READ in flight; the next Poll posts another.
//
// Thread safety: not thread-safe; one thread uses it (and its session).

#ifndef DREPLAY_CLIENT_SERVER_LINE_POLLER_H_
#define DREPLAY_CLIENT_SERVER_LINE_POLLER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/session.h"
#include "protocol/layout.h"

namespace dreplay::client {

class ServerLinePoller {
 public:
  // `session` is not owned and must outlive the poller. InvalidArgument for
  // a negative interval; the session's errors.
  static absl::StatusOr<std::unique_ptr<ServerLinePoller>> Create(ClientSession* session,
                                                                  absl::Duration interval);

  // Never waits. Errors: a READ that failed for a reason other than the
  // connection, the session's.
  absl::StatusOr<protocol::ServerLine> Poll();

  const protocol::ServerLine& known() const { return known_; }

 private:
  ServerLinePoller(ClientSession* session, absl::Duration interval, int sink);

  ClientSession* const session_;
  const absl::Duration interval_;
  const int sink_;
  std::unique_ptr<RegisteredBuffer> buffer_;
  protocol::ServerLine known_{};
  bool pending_ = false;
  uint64_t pending_generation_ = 0;  // the connection the READ was posted on
  absl::Time posted_at_ = absl::InfinitePast();
  uint64_t reads_posted_ = 0;
};

}  // namespace dreplay::client

#endif  // DREPLAY_CLIENT_SERVER_LINE_POLLER_H_
