// Copyright dreplay authors.
//
// challenge_table.h: the server nonces handed out and not yet answered.
//
// The first exchange of a handshake (protocol/handshake.h) hands a client a
// fresh nonce; its hello must name it. Each nonce is good for one hello,
// within `lifetime` of its issue: Consume() forgets it whatever the outcome,
// so a hello recorded on the wire and sent again on a new connection names a
// nonce that is gone. The table holds at most `capacity` nonces; issuing
// one more forgets the oldest, so a flood of challenge requests costs bounded
// memory (an honest client that lost its nonce this way is refused
// retryably and asks again).
//
//   ChallengeTable table(1024, absl::Seconds(10));
//   ASSIGN_OR_RETURN(protocol::Nonce nonce, table.Issue(now));
//   ... later: if (!table.Consume(hello.server_nonce, now)) refuse
//
// Not thread-safe: the server's accept thread owns it.

#ifndef DREPLAY_REPLAY_SERVER_CHALLENGE_TABLE_H_
#define DREPLAY_REPLAY_SERVER_CHALLENGE_TABLE_H_

#include <cstddef>
#include <deque>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "protocol/auth.h"

namespace dreplay::server {

class ChallengeTable {
 public:
  // REQUIRES: capacity >= 1, lifetime > 0.
  ChallengeTable(size_t capacity, absl::Duration lifetime);

  // A fresh nonce (protocol::RandomNonce), remembered until `now + lifetime`.
  // Internal when the random generator fails.
  absl::StatusOr<protocol::Nonce> Issue(absl::Time now);

  // True when `nonce` was issued, not consumed, not evicted and not expired
  // at `now`. Forgets it in any case.
  bool Consume(const protocol::Nonce& nonce, absl::Time now);

  size_t size() const { return expiry_.size(); }

 private:
  static std::string Key(const protocol::Nonce& nonce);
  // Forgets expired nonces and, past capacity, the oldest.
  void Trim(absl::Time now);

  const size_t capacity_;
  const absl::Duration lifetime_;
  absl::flat_hash_map<std::string, absl::Time> expiry_;  // by nonce
  std::deque<std::string> order_;                        // issue order; may hold consumed nonces
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHALLENGE_TABLE_H_
