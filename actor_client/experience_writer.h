// Copyright dreplay authors.
//
// experience_writer.h: an actor's insertion of transitions into the replay
// server, with one-sided RDMA only (no server CPU on the write path).
//
//   ASSIGN_OR_RETURN(auto session, ClientSession::Connect(provider, options));
//   ASSIGN_OR_RETURN(auto writer, ExperienceWriter::Create(session.get(), {}));
//   for (...) {
//     RETURN_IF_ERROR(writer->Append(encoded_transition, td_error));
//   }
//   RETURN_IF_ERROR(writer->Flush());
//
// Append() copies a transition (the encoded payload, at most
// config.max_payload() bytes) into the pending batch; when max_batch are
// pending it flushes first. Flush() inserts the pending k transitions
// (protocol/README.md, "Actor insert"):
//
// The writer writes into the lease the handshake granted its session
// (protocol/leases.h), with sequence numbers of its own (no atomics):
//
//   1. the batch takes the next sequences s .. s+k-1 of the lease (the
//      handshake says where to start: resume_sequence);
//   2. until SequenceWritable(config, s+k-1, lease cursor) (the server has
//      ingested far enough) it READs its lease's LeaseLine, backing off, so
//      it never laps a slot;
//   3. seals the k slots (SealSlot, stamped with the wall-clock time:
//      SlotHeader::insert_time_ns) in a registered local buffer and WRITEs
//      them, one WRITE per contiguous range of the lease (two at its wrap),
//      then WRITEs their commit words the same way, on the same queue pair:
//      RC places them after the slots. Only the last WRITE is signalled.
//      All of it is posted at once (one doorbell).
//   4. returns when that last WRITE completes: the batch is committed.
//
// Insert latency (stats().latency) runs from sealing to the completion of
// the last commit WRITE (room waits included).
//
// Pipelined use (many writers on one thread, tools/bench/replay_bench_clients.h):
// Submit() seals up to max_batch pending transitions and posts their WRITEs
// (steps 1-3) without waiting; Poll() takes the completions that have come
// and retires the batches they end. Up to max_in_flight batches of one
// writer are in flight at once (each has its own registered staging area);
// RC completes them in order. Room (step 2) is known from the last LeaseLine
// READ: without room Submit posts one READ (backing off as Flush does) and
// returns false; a later Poll takes its answer. A thread keeps hundreds of
// leases busy this way:
//
//   for (auto& w : writers) {
//     RETURN_IF_ERROR(w->Poll());
//     if (w->pending() == 0) { ... w->Append(...) up to max_batch ... }
//     ASSIGN_OR_RETURN(bool posted, w->Submit());
//   }
//
// Flush() first waits for every batch in flight, so the two APIs mix.
//
// Failures: when the connection fails (server crash or restart, link down),
// Flush (or Poll, for batches in flight) reconnects through the session (with back-off; a restarted
// server has a new epoch). The new handshake grants the same lease back and says where to resume:
// the first sequence at or after the lease's ingest cursor whose commit word is not set (after a
// restart moved up by whole laps, resume_skipped_laps, so no sequence is reused). Transitions of
// the batch below that first uncommitted sequence were committed (counted committed, not written
// again); the rest are written again from the resume sequence (Poll puts them back in front of the
// pending ones), so each transition is ingested exactly once. Only when the lease went to another
// actor meanwhile is a batch whose commits were posted but not confirmed abandoned
// (stats().abandoned). Flush fails only when the session cannot reconnect within its deadline or
// the server came back with another configuration, or with ResourceExhausted when the server makes
// no room within room_timeout (the transitions stay pending).
//
// Thread safety: not thread-safe; one thread uses a writer (and its session).

#ifndef DREPLAY_ACTOR_CLIENT_EXPERIENCE_WRITER_H_
#define DREPLAY_ACTOR_CLIENT_EXPERIENCE_WRITER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/session.h"
#include "common/latency_histogram.h"
#include "common/verification_log.h"
#include "protocol/layout.h"
#include "verbs/verbs.h"

namespace dreplay::actor {

struct ExperienceWriterOptions {
  // Transitions per Flush (Append flushes when this many are pending).
  // Larger batches amortise the two round trips of an insert. In [1,
  // ActorWindow(config)]; k * slot_size must stay below 1 GiB.
  uint32_t max_batch = 32;
  // Batches one writer may have posted and not yet completed (Submit); each
  // has its own registered staging area of max_batch slots. In [1, 64].
  uint32_t max_in_flight = 1;
  // Waiting for room in the ring: READs of the ServerLine back off from
  // room_backoff_initial to room_backoff_max; ResourceExhausted after
  // room_timeout without room.
  absl::Duration room_backoff_initial = absl::Microseconds(50);
  absl::Duration room_backoff_max = absl::Milliseconds(5);
  absl::Duration room_timeout = absl::Seconds(60);
  // Reconnections one Flush attempts before it gives up (each one is itself
  // retried for the session's connect_deadline).
  int max_reconnects_per_flush = 3;
  // Not owned; null: none. Each transition whose commit the writer counts
  // (stats().committed) gets a P record naming the server's epoch, its ring
  // index, sequence and checksum (common/verification_log.h), so a checker
  // can prove what actors were told was ingested or lost with a server.
  VerificationLog* verification_log = nullptr;

  absl::Status Validate() const;
};

struct ExperienceWriterStats {
  uint64_t committed = 0;      // transitions whose commit WRITE completed
  uint64_t abandoned = 0;      // transitions of batches lost to a failure
  uint64_t flushes = 0;        // batches committed
  uint64_t reconnects = 0;     // reconnections this writer triggered or saw
  uint64_t room_waits = 0;     // LeaseLine READs that found no room
  uint64_t bytes_written = 0;  // slot and commit bytes WRITTEN
  LatencyHistogram latency;    // per committed batch: reserve -> commit
};

class ExperienceWriter {
 public:
  // `session` (an actor's) is not owned and must outlive the writer.
  // InvalidArgument for bad options or a max_batch above the actor window;
  // the registration's errors.
  static absl::StatusOr<std::unique_ptr<ExperienceWriter>> Create(
      client::ClientSession* session, const ExperienceWriterOptions& options);
  ~ExperienceWriter();
  ExperienceWriter(const ExperienceWriter&) = delete;
  ExperienceWriter& operator=(const ExperienceWriter&) = delete;

  // Adds one transition to the pending batch (copied), flushing first when
  // the batch is full. `initial_priority` <= 0 or not finite: the server
  // gives it the current maximum. InvalidArgument when the payload exceeds
  // config.max_payload(); otherwise Flush's status. Blocks only to flush.
  absl::Status Append(absl::Span<const uint8_t> payload, float initial_priority);
  // The version of the parameters the actor acts with now (the fetcher's;
  // 0: none): sealed into each transition appended from now on
  // (SlotHeader::params_version, its low 32 bits).
  void set_params_version(uint64_t version) { params_version_ = static_cast<uint32_t>(version); }

  // Inserts the pending transitions; blocks until they are committed (or
  // abandoned after a failure, see the file comment). OK with nothing pending.
  absl::Status Flush();

  // Non-blocking: posts the WRITEs of up to max_batch pending transitions
  // (slots, then commit words; only the last signalled) and returns true;
  // false when nothing is pending, max_in_flight batches are in flight, or
  // the lease has no room as far as the last LeaseLine READ says (one READ
  // is then posted, with back-off). ResourceExhausted after room_timeout
  // without room; the errors of posting (the batch stays pending; call
  // Poll, which recovers).
  absl::StatusOr<bool> Submit();
  // Non-blocking unless the connection failed: takes this writer's
  // completions, retires the batches they end (counted committed, latency
  // recorded) and the answer of a LeaseLine READ. On a connection failure it
  // reconnects (blocking, as Flush does) and puts the batches not committed
  // back in front of the pending transitions. Errors: those of Reconnect;
  // DeadlineExceeded when the oldest batch is not complete within the
  // session's op_timeout.
  absl::Status Poll();

  size_t pending() const { return pending_lengths_.size(); }
  // Batches posted by Submit and not yet retired by Poll.
  size_t in_flight() const { return in_flight_.size(); }
  const ExperienceWriterStats& stats() const { return stats_; }
  const protocol::LayoutConfig& config() const { return session_->config(); }
  // The lease written to, and its next sequence.
  uint32_t lease() const { return lease_; }
  uint64_t next_sequence() const { return next_sequence_; }

 private:
  enum class Progress {
    kNothing,       // no commit WRITE posted
    kCommitPosted,  // commit WRITEs posted, completion not seen
  };

  ExperienceWriter(client::ClientSession* session, const ExperienceWriterOptions& options,
                   int sink);
  // One attempt at inserting the pending batch; `progress` tells how far it
  // got when it fails.
  absl::Status TryFlush(uint32_t count, Progress* progress);
  // A batch posted by Submit: its sequences, staging area and signalled WR.
  struct InFlight {
    uint64_t wr_id;
    uint64_t first;
    uint32_t count;
    uint32_t area;
    absl::Time start;
  };
  // Blocks until no batch or READ is in flight (Poll until then).
  absl::Status WaitInFlight();
  // After a failure of batches in flight: reconnects, counts what the new
  // grant says was committed and puts the rest back in front of pending.
  absl::Status Recover(const absl::Status& why);
  // Seals the first `count` pending transitions from `first` on into
  // staging area `area`.
  absl::Status Seal(uint32_t area, uint64_t first, uint32_t count);
  // Posts a LeaseLine READ unless one is in flight.
  absl::Status PostCursorRead();
  uint8_t* AreaSlots(uint32_t area) const;
  uint64_t* AreaCommits(uint32_t area) const;
  // Takes the lease and resume sequence of the session's directory.
  void TakeGrant();
  // Drops the first `count` pending transitions.
  void DropFront(size_t count);
  // P records (options_.verification_log) for `count` committed slots of
  // staging area `area` from its slot `offset` on, sequences from `first`.
  void LogCommitted(uint32_t area, uint32_t offset, uint64_t first, uint64_t count);
  // READs the lease's LeaseLine; returns its ingest cursor.
  absl::StatusOr<uint64_t> ReadLeaseCursor();
  absl::Status WaitForRoom(uint64_t last_sequence);
  absl::Status PostWrites(uint32_t area, uint64_t first_sequence, uint32_t count, uint64_t* wr_id);

  client::ClientSession* const session_;
  const ExperienceWriterOptions options_;
  const int sink_;
  const uint32_t slot_size_;
  const uint32_t actor_id_;

  // Registered: max_in_flight staging areas (max_batch slots, then
  // max_batch commit words, to a cache line), then a LeaseLine READ back.
  std::unique_ptr<client::RegisteredBuffer> buffer_;
  uint64_t area_bytes_ = 0;
  uint64_t area_slot_bytes_ = 0;
  protocol::LeaseLine* lease_line_ = nullptr;

  // Pending transitions: payload bytes back to back.
  std::vector<uint8_t> pending_bytes_;
  std::vector<uint32_t> pending_lengths_;
  std::vector<float> pending_priorities_;
  std::vector<uint32_t> pending_versions_;  // SlotHeader::params_version
  uint32_t params_version_ = 0;

  uint64_t next_wr_id_ = 1;
  uint32_t lease_ = protocol::kNoLease;
  uint64_t next_sequence_ = 0;     // the lease's next sequence to write
  uint64_t attempted_first_ = 0;   // the first sequence of the last attempt
  uint64_t received_end_ = 0;      // the grant's resume, less its skipped laps
  uint64_t known_cursor_ = 0;      // the lease's ingest cursor as last READ
  uint64_t grant_generation_ = 0;  // the session generation of the grant

  // Pipelined state (Submit / Poll), oldest batch first.
  std::deque<InFlight> in_flight_;
  uint32_t next_area_ = 0;
  uint64_t cursor_read_wr_id_ = 0;  // the LeaseLine READ in flight (0: none)
  absl::Time cursor_read_not_before_ = absl::InfinitePast();
  absl::Duration room_backoff_;
  absl::Time no_room_since_ = absl::InfiniteFuture();
  ExperienceWriterStats stats_;
};

}  // namespace dreplay::actor

#endif  // DREPLAY_ACTOR_CLIENT_EXPERIENCE_WRITER_H_
