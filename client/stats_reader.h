// Copyright dreplay authors.
//
// stats_reader.h: READs what the server and the actors publish for
// monitoring, without server CPU: the stats region (StatsBlock; monitors
// and the learner) and the actors region (ActorLine per actor; monitors and the
// learner).
//
//   ASSIGN_OR_RETURN(auto session, ClientSession::Connect(provider, monitor_options));
//   ASSIGN_OR_RETURN(auto stats, StatsReader::Create(session.get()));
//   ASSIGN_OR_RETURN(StatsBlock s, stats->ReadStats());
//   ASSIGN_OR_RETURN(std::vector<ActorLine> actors, stats->ReadActors());
//
// A consistent StatsBlock: the replay core writes generation_begin first and
// generation_end last. One READ does not place (or read) bytes in a defined
// order, so ReadStats posts two READs of the block back to back on the
// queue pair (executed in order) and accepts the first image when its
// generation_begin, its generation_end and the second image's
// generation_begin are equal: no update began between the start of the
// first READ and the start of the second. Otherwise it READs again.
//
// Actor lines are verified with CheckActorLine (checksum); a torn line is
// READ again, a line never written is left out.
//
// Failures: a failed connection is re-established through the session and
// the READ retried. Thread safety: not thread-safe; one thread uses it (and
// its session).

#ifndef DREPLAY_CLIENT_STATS_READER_H_
#define DREPLAY_CLIENT_STATS_READER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/session.h"
#include "protocol/layout.h"

namespace dreplay::client {

class StatsReader {
 public:
  // READ rounds before a read gives up (Unavailable: the data changes faster
  // than it can be READ whole).
  static constexpr int kMaxAttempts = 100;

  // `session` (a monitor's or a learner's) is not owned and must outlive the
  // reader.
  static absl::StatusOr<std::unique_ptr<StatsReader>> Create(client::ClientSession* session);
  ~StatsReader();
  StatsReader(const StatsReader&) = delete;
  StatsReader& operator=(const StatsReader&) = delete;

  // A consistent snapshot of the stats region. FailedPrecondition for a
  // role without access (the learner).
  absl::StatusOr<protocol::StatsBlock> ReadStats();
  // Every actor line that has been published, by actor id. FailedPrecondition
  // when the server has no actors region.
  absl::StatusOr<std::vector<protocol::ActorLine>> ReadActors();

 private:
  StatsReader(client::ClientSession* session, int sink);
  // Posts READs of [offset, offset + length) of `kind` into `locals`, in
  // order, and waits for the last one.
  absl::Status ReadInOrder(protocol::RegionKind kind, uint64_t offset, uint32_t length,
                           std::initializer_list<uint8_t*> locals);
  client::ClientSession* const session_;
  const int sink_;
  std::unique_ptr<client::RegisteredBuffer> buffer_;
  uint64_t next_wr_id_ = 1;
};

}  // namespace dreplay::client

#endif  // DREPLAY_CLIENT_STATS_READER_H_
