// Copyright dreplay authors.
//
// lease_table.h: which actor holds which lease (protocol/leases.h), and the
// rule that grants one at a handshake.
//
//   LeaseTable table(regions);
//   ASSIGN_OR_RETURN(uint32_t lease, table.Acquire(hello.actor_id));
//   ... accept the connection ...
//   table.Bind(lease, hello.actor_id, client_id);
//   ... when the client goes: table.Release(client_id);
//
// Grant rule: an actor id gets back the lease it holds or last held (a
// reconnecting actor continues its own sequence numbers and data), but only
// once its previous connection is gone: while a connection holds it,
// Acquire refuses (FailedPrecondition), and the newcomer retries. A second
// hello never displaces the holder: only the same identity takes a lease
// back (the handshake authenticates the actor id, protocol::
// ActorCredential), and only after the old connection closed, so the old
// one can write no more. Otherwise it gets the lowest lease never held, then
// the lowest released one (a dead actor's data stays sampled until the new
// holder's writes evict it). When every lease is held by a connected actor,
// Acquire fails with ResourceExhausted naming the count; both refusals are
// temporary.
//
// ResumeSequence() is where the holder continues: the first sequence at or
// after the lease's ingest cursor whose commit word is not set. After a
// restart that cursor was moved up whole laps past what the previous server
// may have handed out (no sequence is reused); the first holder is told how
// many (SkippedLaps).
//
// Thread safety: none; the server's accept thread owns the table. The lease
// lines it publishes (state, holder, grants) are written with release
// stores for readers elsewhere.

#ifndef DREPLAY_REPLAY_SERVER_LEASE_TABLE_H_
#define DREPLAY_REPLAY_SERVER_LEASE_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "protocol/layout.h"
#include "replay_server/regions.h"

namespace dreplay::server {

class LeaseTable {
 public:
  // `regions` (not owned, outlives the table) holds the lease lines the
  // table publishes to and the commit words ResumeSequence reads. The table
  // starts from the holders the lease lines name (a restored checkpoint's,
  // ReplayCore::RestoreCheckpoint): each such lease is released and kept for
  // its actor id, so after a restart an actor gets its own lease back, with
  // its own cursor and data. Fresh regions name none.
  explicit LeaseTable(ReplayRegions* regions);

  // See the file comment: the lease for `actor_id`; FailedPrecondition
  // while a connection holds that actor's lease, ResourceExhausted when
  // every lease is held.
  absl::StatusOr<uint32_t> Acquire(uint32_t actor_id) const;
  // Records that `client_id` (non-zero) now holds `lease` for `actor_id`,
  // and publishes it.
  void Bind(uint32_t lease, uint32_t actor_id, uint64_t client_id);
  // The client went: its lease (if any) becomes released.
  void Release(uint64_t client_id);

  // The first sequence of `lease` at or after its published ingest cursor
  // whose commit word is not CommitValue of it. REQUIRES: no connection can
  // write the lease (its previous holder's queue pair is closed). After a
  // restart the published cursor is already above every sequence the
  // previous server may have handed out (sequence_reservations.h).
  uint64_t ResumeSequence(uint32_t lease) const;

  // Whole laps of `lease` the restart skipped (ReplayCore::
  // resume_skipped_laps), told to the lease's next holder with its resume
  // sequence (RegionDirectory::resume_skipped_laps) so that it knows which
  // of its in-flight sequences were received; Bind clears it.
  void NoteSkippedLaps(uint32_t lease, uint32_t laps) { entries_[lease].skipped_laps = laps; }
  uint32_t SkippedLaps(uint32_t lease) const { return entries_[lease].skipped_laps; }

  uint32_t held() const;

 private:
  struct Entry {
    protocol::LeaseState state = protocol::LeaseState::kNeverHeld;
    uint32_t actor_id = 0;
    uint64_t client_id = 0;  // while held
    uint64_t grants = 0;
    uint32_t skipped_laps = 0;  // until the next Bind
  };
  void Publish(uint32_t lease);

  ReplayRegions* const regions_;
  std::vector<Entry> entries_;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_LEASE_TABLE_H_
