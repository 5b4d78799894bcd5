// Copyright dreplay authors.
//
// challenge_table.h: the server nonces handed out and not yet answered, per
// source host.
//
// The first exchange of a handshake (protocol/handshake.h) hands a client a
// fresh nonce; its hello must name it. Each nonce is good for one hello,
// from the source host it was issued to, within `lifetime` of its issue:
// Consume() forgets it whatever the outcome, so a hello recorded on the wire
// and sent again on a new connection names a nonce that is gone.
//
// Bounds, so that a flood costs bounded memory and spares other hosts:
//   - a source holds at most `per_source` nonces; one more forgets that
//     source's oldest (a flooding host evicts only its own nonces);
//   - the table holds at most `capacity` nonces; one more forgets the oldest
//     nonce of the source holding the most (many flooding hosts evict each
//     other's first);
//   - expired and consumed nonces are forgotten at once: the table holds
//     exactly size() entries, however many were issued.
// An honest client that lost its nonce this way is refused retryably and
// asks again.
//
//   ChallengeTable table({.capacity = 4096, .per_source = 64});
//   ASSIGN_OR_RETURN(protocol::Nonce nonce, table.Issue("10.0.0.7", now));
//   ... later: if (!table.Consume(hello.server_nonce, "10.0.0.7", now)) refuse
//
// Not thread-safe: the server's accept thread owns it.

#ifndef DREPLAY_REPLAY_SERVER_CHALLENGE_TABLE_H_
#define DREPLAY_REPLAY_SERVER_CHALLENGE_TABLE_H_

#include <cstddef>
#include <list>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "protocol/auth.h"

namespace dreplay::server {

struct ChallengeTableOptions {
  size_t capacity = 4096;  // nonces held at most, all sources together
  size_t per_source = 64;  // nonces held at most for one source host
  absl::Duration lifetime = absl::Seconds(30);
  // InvalidArgument unless 1 <= per_source <= capacity and lifetime > 0.
  absl::Status Validate() const;
};

class ChallengeTable {
 public:
  // REQUIRES: options.Validate().ok().
  explicit ChallengeTable(const ChallengeTableOptions& options);

  // A fresh nonce (protocol::RandomNonce) for `source` (a host, without the
  // port), remembered until `now + lifetime`. Internal when the random
  // generator fails.
  absl::StatusOr<protocol::Nonce> Issue(absl::string_view source, absl::Time now);

  // True when `nonce` was issued to `source`, not consumed, not evicted and
  // not expired at `now`. Forgets it in any case.
  bool Consume(const protocol::Nonce& nonce, absl::string_view source, absl::Time now);

  // Nonces held, and sources holding any.
  size_t size() const { return entries_.size(); }
  size_t sources() const { return by_source_.size(); }
  // Nonces forgotten before their hello came: by the per-source bound, and
  // by the table's capacity.
  uint64_t evicted_per_source() const { return evicted_per_source_; }
  uint64_t evicted_by_capacity() const { return evicted_by_capacity_; }

 private:
  struct Entry {
    absl::Time expiry;
    std::string source;
    std::list<std::string>::iterator in_order;   // position in order_
    std::list<std::string>::iterator in_source;  // position in by_source_[source]
  };
  static std::string Key(const protocol::Nonce& nonce);
  void Forget(const std::string& key);
  // Forgets expired nonces (the oldest first, so it stops at a fresh one).
  void Expire(absl::Time now);
  // The source holding the most nonces.
  const std::string& Largest() const;

  const ChallengeTableOptions options_;
  absl::flat_hash_map<std::string, Entry> entries_;  // by nonce
  std::list<std::string> order_;                     // every held nonce, issue order
  absl::flat_hash_map<std::string, std::list<std::string>> by_source_;  // issue order
  uint64_t evicted_per_source_ = 0;
  uint64_t evicted_by_capacity_ = 0;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHALLENGE_TABLE_H_
