// Copyright dreplay authors.
//
// forward_reader.h: the baseline ("existing approach") data path. The buffer
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
// The reader follows the server's published ingest_cursor (it READs the
// control block's ServerLine, more rarely while nothing new arrives) and
// READs every sequence below it, in chunks of up to chunk_slots sequences
// that do not cross the ring's wrap: one READ of the chunk's commit words,
// then one of its slots, on the same queue pair (executed in that order).
// Up to max_chunks_in_flight chunks are in flight, to cover the link's
// bandwidth-delay product. Each sequence q is handed over only when its
// commit word is CommitValue(q) and its slot verifies (VerifySlot: sequence
// and checksum); a sequence the server abandoned (never committed) is
// skipped, and one overwritten by a later sequence before it was READ (the
// reader fell more than the ring behind) is skipped and counted. Only
// sequences below the published cursor are READ; the ServerLine READs that
// ask for a new cursor are polling, the commit words metadata and the slots
// experience (client/link_bytes.h).
//
// Under a saturated link the reader falls behind the cursor; what it does
// then is options.policy: kInOrder READs everything in order and loses what
// the server overwrites first (the oldest, counted as overwritten; sequences
// known to be lapped, more than a ring behind the cursor, are skipped
// without a READ and counted the same); kFreshest
// jumps, whenever it is more than `window` sequences behind the cursor, to
// the newest `window` sequences, and counts those it jumped over
// (stats().skipped_behind).
//
// Starting point: the ingest cursor at Create (only what is ingested from
// then on), or with from_oldest the oldest sequence the ring may still hold.
// After a reconnection the reader continues where it was; when the epoch
// changed (the server restarted from a checkpoint, which may have lost the
// sequences after it), it continues from min(where it was, the restored
// cursor), so sequences reused by the new epoch are READ again.
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
  // kFreshest: how far behind the cursor the reader may be before it jumps.
  // 0: capacity / 2, which keeps the READs clear of the sequences actors
  // are overwriting while still delivering half the ring's worth of recent
  // transitions. At most the server's capacity.
  uint64_t window = 0;
  // Sequences per chunk (READ size: chunk_slots * slot_size bytes of slots).
  uint32_t chunk_slots = 256;
  uint32_t max_chunks_in_flight = 8;
  // Start at the oldest sequence still in the ring instead of the cursor.
  bool from_oldest = false;
  // READs of the ServerLine while caught up: from poll_initial, doubling
  // while the cursor does not move, up to poll_max.
  absl::Duration poll_initial = absl::Microseconds(50);
  absl::Duration poll_max = absl::Milliseconds(2);

  absl::Status Validate() const;
};

// A transition as READ: views into the reader's buffers.
struct ForwardedTransition {
  uint64_t sequence = 0;
  const protocol::SlotHeader* header = nullptr;  // the whole slot starts here
  absl::Span<const uint8_t> payload;
  float initial_priority() const { return header->initial_priority; }
  // When the actor sealed it (SlotHeader::insert_time_ns; 0: unknown).
  uint64_t insert_time_ns() const { return header->insert_time_ns; }
};

struct ForwardReaderStats {
  uint64_t transitions = 0;          // handed over
  uint64_t skipped_uncommitted = 0;  // abandoned sequences (never committed)
  uint64_t overwritten = 0;          // lapped or torn before they were READ
  uint64_t skipped_behind = 0;       // jumped over (kFreshest), never READ
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
  // `session` (a learner's) is not owned and must outlive the reader.
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

  // The first sequence not handed over yet (all below it were handled).
  uint64_t next_sequence() const { return next_; }
  // The ingest cursor as last READ.
  uint64_t known_cursor() const { return target_; }
  const ForwardReaderStats& stats() const { return stats_; }

 private:
  struct Chunk {
    uint64_t first = 0;  // sequence
    uint32_t count = 0;
    int reads_pending = 0;
    bool in_use = false;
  };

  ForwardReader(client::ClientSession* session, const ForwardReaderOptions& options, int sink,
                uint64_t window);
  uint64_t* commits_of(uint32_t chunk) const;
  uint8_t* slots_of(uint32_t chunk) const;
  absl::Status PostCursorRead();
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
  // Registered: the ServerLine (one cache line), then max_chunks_in_flight
  // chunks of [commit words | slots].
  std::unique_ptr<client::RegisteredBuffer> memory_;
  std::vector<Chunk> chunks_;
  std::deque<uint32_t> order_;        // chunks in flight, oldest first
  std::vector<uint32_t> handed_out_;  // chunks whose views the caller holds
  uint64_t next_ = 0;                 // first sequence not handed over
  uint64_t next_post_ = 0;            // first sequence not READ yet
  uint64_t target_ = 0;               // ingest cursor as last READ
  uint64_t epoch_ = 0;
  uint64_t incarnation_ = 0;
  uint64_t generation_ = 0;
  bool cursor_read_pending_ = false;
  absl::Time next_cursor_read_ = absl::InfinitePast();
  absl::Duration poll_interval_;
  uint64_t next_wr_id_ = 1;
  // The highest sequence handed over + 1: a sequence READ again after an
  // epoch change is not counted as distinct twice.
  uint64_t delivered_end_ = 0;
  ForwardReaderStats stats_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_FORWARD_READER_H_
