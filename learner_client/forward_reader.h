// Copyright dreplay authors.
//
// forward_reader.h: the learner placement's data path. The buffer
// node only forwards: the learner READs every newly ingested slot range in
// FIFO order and keeps its own replay memory.
//
//   ASSIGN_OR_RETURN(auto forward, ForwardReader::Create(session.get(), {}));
//   std::vector<ForwardedTransition> fresh;
//   while (training) {
//     RETURN_IF_ERROR(forward->Next(absl::Milliseconds(1), &fresh));
//     for (const ForwardedTransition& t : fresh) local_memory.Insert(t.sequence, t.payload, ...);
//     ...
//   }
//
// Actors write into leases (protocol/leases.h), each with sequences of its
// own, so there is no one global sequence to follow. The reader follows
// the forward journal instead: it READs the control block's ServerLine for
// journal_end (more rarely while nothing new arrives), READs the journal
// entries up to it (up to kJournalBatch per READ), and for each entry (a run
// of one lease's sequences that ingest handled in one step, not crossing the
// lease's wrap) READs the run in chunks of up to chunk_slots sequences: one
// READ of the chunk's commit words, then one of its slots, on the same queue
// pair (executed in that order). READ sizes are those of the runs: as large
// as what one lease's actor committed between two ingest steps. Up to
// max_chunks_in_flight chunks are in flight. Each sequence q is handed over
// only when its commit word is CommitValue(q) and its slot verifies
// (VerifySlot: sequence and checksum); one the server found torn is
// skipped (skipped_uncommitted), one overwritten before it was READ (the
// reader fell more than a lease behind) is skipped and counted
// (overwritten). The ServerLine READs are polling, the journal and commit
// words metadata, the slots experience (client/link_bytes.h).
//
// Handed-over transitions are numbered in journal order (`sequence`: 0, 1,
// 2, ... over every journalled sequence, unique and increasing within a
// reader), which is the order ingest handled them in; the lease and the
// lease's own sequence come with them.
//
// When the reader falls behind: kInOrder READs every entry in order; the
// journal is a ring of kJournalEntries, so entries the server overwrote
// before they were READ are lost (counted in journal_entries_lost, and
// their sequences are never handed over). kFreshest jumps, whenever it is
// more than kJournalEntries / 2 entries behind, to the newest quarter of the
// journal, and counts the entries it jumped over (stats().skipped_behind,
// in entries); and of the sequences it took from the journal and has not
// READ yet it keeps the newest `window`, skipping the older ones
// (stats().skipped_sequences).
//
// Starting point: the journal's end at Create (only what is ingested from
// then on), or with from_oldest the oldest entry the journal still holds.
// After a reconnection the reader continues where it was; when the epoch
// changed (the server restarted from a checkpoint, which may have lost the
// entries after it), it continues from min(where it was, the restored
// journal end).
//
// Thread safety: not thread-safe; one thread uses it (and its session).

#ifndef DREPLAY_LEARNER_CLIENT_FORWARD_READER_H_
#define DREPLAY_LEARNER_CLIENT_FORWARD_READER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/session.h"
#include "protocol/layout.h"

namespace dreplay::learner {

enum class ForwardPolicy : uint8_t {
  kInOrder,   // every sequence in order; lapped ones are lost
  kFreshest,  // skip to the newest `window` sequences when further behind
};

struct ForwardReaderOptions {
  ForwardPolicy policy = ForwardPolicy::kInOrder;
  // kFreshest: sequences taken from the journal and not READ yet that are
  // kept, the newest ones (0: capacity / 2). In [0, capacity].
  uint64_t window = 0;
  // Sequences per chunk (READ size: chunk_slots * slot_size bytes of slots).
  uint32_t chunk_slots = 256;
  uint32_t max_chunks_in_flight = 8;
  // Start at the oldest sequence still in the ring instead of the cursor.
  bool from_oldest = false;
  // READs of the ServerLine while caught up: from poll_initial, doubling
  // while the journal does not grow, up to poll_max.
  absl::Duration poll_initial = absl::Microseconds(50);
  absl::Duration poll_max = absl::Milliseconds(2);
  // READs of the ServerLine while behind, at most this often (>= 0): the
  // journal's end and the server's ingest cursor (server_ingested()) stay
  // this fresh even when the link binds. 64 bytes of polling each.
  absl::Duration busy_poll_interval = absl::Milliseconds(20);

  absl::Status Validate() const;
};

// A transition as READ: views into the reader's buffers.
struct ForwardedTransition {
  uint64_t sequence = 0;  // the journal order (see the file comment)
  uint32_t lease = 0;
  uint64_t lease_sequence = 0;                   // the lease's own sequence (header->sequence)
  const protocol::SlotHeader* header = nullptr;  // the whole slot starts here
  absl::Span<const uint8_t> payload;
  float initial_priority() const { return header->initial_priority; }
  // When the actor sealed it (SlotHeader::insert_time_ns; 0: unknown).
  uint64_t insert_time_ns() const { return header->insert_time_ns; }
};

struct ForwardReaderStats {
  uint64_t transitions = 0;           // handed over
  uint64_t skipped_uncommitted = 0;   // journalled but not committed (torn, overrun)
  uint64_t overwritten = 0;           // lapped or torn before they were READ
  uint64_t skipped_behind = 0;        // journal entries jumped over (kFreshest)
  uint64_t skipped_sequences = 0;     // sequences beyond the window (kFreshest)
  uint64_t journal_entries_lost = 0;  // overwritten in the journal before READ
  uint64_t journal_reads = 0;         // READs of journal entries
  // Slots READ (they crossed the link), and the distinct (index, sequence)
  // among them that verified (the transitions handed over, each once).
  uint64_t transitions_fetched = 0;
  uint64_t distinct_transitions_fetched = 0;
  uint64_t chunks = 0;        // chunks READ
  uint64_t cursor_reads = 0;  // ServerLine READs
  uint64_t bytes_read = 0;    // by all of those READs
  uint64_t reconnects = 0;
  uint64_t epoch_changes = 0;
};

class ForwardReader {
 public:
  // `session` (a learner's, opened with
  // ClientSessionOptions::learner_placement) is not owned and must outlive
  // the reader. InvalidArgument for bad options or another role's session;
  // FailedPrecondition for a session without learner_placement (the server
  // gave it no key to the slots, commit words or journal).
  static absl::StatusOr<std::unique_ptr<ForwardReader>> Create(client::ClientSession* session,
                                                               const ForwardReaderOptions& options);
  ~ForwardReader();
  ForwardReader(const ForwardReader&) = delete;
  ForwardReader& operator=(const ForwardReader&) = delete;

  // Clears *out, then fills it with the transitions READ since the last
  // call, in sequence order. Waits up to `timeout` for at least one chunk;
  // OK with *out empty when none arrived. The views stay valid until the
  // next call. Errors: the session's, when it cannot reconnect.
  absl::Status Next(absl::Duration timeout, std::vector<ForwardedTransition>* out);

  // The journal order number of the next sequence to hand over.
  uint64_t next_sequence() const { return forward_next_; }
  // The journal end as last READ.
  uint64_t known_cursor() const { return journal_target_; }
  // The server's ingest cursor (transitions its ingest accepted, which is
  // what the actors generated) in the last ServerLine READ; no extra
  // traffic. Restarts with the server's counts after a new epoch.
  uint64_t server_ingested() const { return server_ingested_; }
  const ForwardReaderStats& stats() const { return stats_; }

 private:
  struct Run {
    uint32_t lease = 0;
    uint64_t first = 0;  // the lease's sequence
    uint64_t count = 0;
  };
  struct Chunk {
    uint32_t lease = 0;
    uint64_t first = 0;  // the lease's sequence
    uint32_t count = 0;
    uint64_t forward_first = 0;  // journal order of `first`
    int reads_pending = 0;
    bool in_use = false;
  };

  ForwardReader(client::ClientSession* session, const ForwardReaderOptions& options, int sink,
                uint64_t window);
  uint64_t* commits_of(uint32_t chunk) const;
  uint8_t* slots_of(uint32_t chunk) const;
  protocol::JournalEntry* journal_buffer() const;
  absl::Status PostCursorRead();
  absl::Status PostJournalRead();
  void TakeJournal();
  absl::Status PostChunks();
  absl::StatusOr<bool> PollCompletions();
  void Deliver(uint32_t chunk, std::vector<ForwardedTransition>* out);
  absl::Status Recover(const absl::Status& failure);
  // Continues from the ServerLine after a new connection.
  absl::Status Resync();

  client::ClientSession* const session_;
  const ForwardReaderOptions options_;
  const int sink_;
  const uint64_t chunk_bytes_;
  const uint64_t window_;  // kFreshest
  // Registered: the ServerLine (one cache line), kJournalBatch journal
  // entries, then max_chunks_in_flight chunks of [commit words | slots].
  std::unique_ptr<client::RegisteredBuffer> memory_;
  std::vector<Chunk> chunks_;
  std::deque<uint32_t> order_;        // chunks in flight, oldest first
  std::vector<uint32_t> handed_out_;  // chunks whose views the caller holds
  std::deque<Run> runs_;              // journalled, not READ yet
  uint64_t queued_ = 0;               // sequences in runs_
  uint64_t journal_next_ = 0;         // first journal entry not READ
  uint64_t journal_target_ = 0;       // journal_end as last READ
  uint64_t server_ingested_ = 0;
  uint64_t journal_read_first_ = 0;  // the entry the pending journal READ starts at
  uint32_t journal_read_count_ = 0;  // entries it covers (0: none pending)
  uint64_t forward_next_ = 0;        // journal order of the next to hand over
  uint64_t forward_post_ = 0;        // journal order of the next to READ
  uint64_t epoch_ = 0;
  uint64_t incarnation_ = 0;
  uint64_t generation_ = 0;
  bool cursor_read_pending_ = false;
  absl::Time next_cursor_read_ = absl::InfinitePast();
  absl::Time last_cursor_post_ = absl::InfinitePast();
  absl::Duration poll_interval_;
  uint64_t next_wr_id_ = 1;

  ForwardReaderStats stats_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_FORWARD_READER_H_
