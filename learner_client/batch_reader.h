// Copyright dreplay authors.
//
// batch_reader.h: the learner READs the batches the server pre-sampled.
//
//   ASSIGN_OR_RETURN(auto session, ClientSession::Connect(provider, learner_options));
//   ASSIGN_OR_RETURN(auto reader, BatchReader::Create(session.get(), {}));
//   ASSIGN_OR_RETURN(auto priorities, PriorityWriter::Create(session.get()));
//   while (training) {
//     ASSIGN_OR_RETURN(StagedBatch batch, reader->Next(absl::Seconds(30)));
//     std::vector<float> td = Train(batch);       // batch.payload(i), batch.weight(i)
//     RETURN_IF_ERROR(priorities->Write(batch, td));
//   }
//
// The server stages batch n (numbers start at 0 in every epoch) in staging
// slot n % staging_depth, and reuses that slot for batch n + staging_depth
// only after the learner's priority update for batch n (priority_writer.h).
// The reader keeps `depth` batches in flight, one per staging slot, each
// READ into local buffer n % depth in two steps (protocol/staging.h):
//   1. the staging slot's commit line (64 B, counted as polling), until
//      StagedBatchBytes says batch n is committed there; a batch not staged
//      yet is asked for again after a back-off;
//   2. the bytes the batch uses, [0, used_bytes): header and entries
//      (metadata), then the copied slots (experience), as two READs on the
//      queue pair. The image is checked with CheckBatchImage (batch number,
//      epoch, checksum) and, optionally, every copied slot with VerifySlot.
//      A READ that overlapped the server's write (DataLoss), or found another
//      batch, goes back to step 1. A commit line with sizes no batch of the
//      layout has (no torn READ makes one: the server's fault) is READ again
//      up to 3 times, then Next() fails with DataLoss.
// So an idle learner moves 64 B per staging slot and back-off, never whole
// batches. Batches are returned in order.
//
// Transfer-once learner cache (options.learner_cache, with
// ClientSessionOptions::learner_cache so that the server knows): the reader
// keeps every transition it receives in a local store of `capacity` slots,
// keyed by slot index, holding the copied slot and its sequence. An entry
// staged as a reference (EntryCached) is served from the store only when the
// store holds exactly that (index, sequence); otherwise it is a miss: counted
// (stats().cache_misses) and left out of the batch returned, never served
// with a stale payload. The store is updated when a batch is returned (its
// arrived slots first, then its references are looked up), so the views of
// a returned batch stay valid until the next Next(). Without the cache, any
// reference the server stages is a miss.
//
// Starting point and resynchronisation: a new reader starts at the server's
// batches_released (the oldest batch still waiting for a priority update).
// When the connection is re-established (by this reader or another client
// of the session), or the epoch or incarnation changes (the server
// restarted), the reader READs the ServerLine again and continues from its
// batches_released in its epoch; batches it returned whose priority update
// never reached the server are then returned again (stats().redelivered),
// and the caller must write their priorities again, as for any batch.
//
// Superseded batches: with an update timeout the server releases a batch
// the learner has not answered in time and stages a later one in its
// staging slot. A reader that finds a later batch in the slot of the batch
// it waits for (a paused learner) resynchronises the same way, skipping the
// batches released meanwhile (stats().superseded), instead of waiting for a
// batch that will never be staged there again.
//
// Thread safety: not thread-safe; one thread uses the reader (and its
// session). The views of a StagedBatch stay valid until the next call of
// Next(), which reuses their buffers for later batches.

#ifndef DREPLAY_LEARNER_CLIENT_BATCH_READER_H_
#define DREPLAY_LEARNER_CLIENT_BATCH_READER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/session.h"
#include "common/frame_codec.h"
#include "protocol/layout.h"

namespace dreplay::learner {

// One entry of a returned batch.
struct StagedEntry {
  // As staged, with kEntryCachedBit cleared from slot_index.
  protocol::BatchEntry entry;
  // The copied slot (SlotHeader, then the payload): in the batch's image
  // when it arrived with the batch, in the learner cache otherwise.
  const uint8_t* slot = nullptr;
  bool arrived = false;  // its slot crossed the link with this batch
  // A transition's importance-sampling weight, computed from the p^alpha of
  // all header().count transition entries as staged (misses included) and
  // the header's beta (protocol::StagedWeights); 0 for frame records.
  float weight = 0;
};

// A staged batch as READ: views into the reader's buffers. Entries the
// learner cache could not serve (misses) are left out: size() may be less
// than header().count.
class StagedBatch {
 public:
  StagedBatch() = default;

  uint64_t batch_number() const { return header().batch_number; }
  uint64_t epoch() const { return header().epoch; }
  // The server process that staged it (protocol::ServerLine::incarnation).
  uint64_t incarnation() const { return header().incarnation; }
  // Transitions in the batch (<= header().count <= batch_size).
  uint32_t size() const { return static_cast<uint32_t>(entries_.size()); }
  const protocol::BatchHeader& header() const {
    return *reinterpret_cast<const protocol::BatchHeader*>(image_);
  }
  // REQUIRES for the per-entry accessors: i < size().
  const protocol::BatchEntry& entry(uint32_t i) const { return entries_[i].entry; }
  // The importance-sampling weight, in (0, 1]: (N P(i))^-beta normalised
  // by the largest of the batch as staged (see StagedEntry::weight).
  float weight(uint32_t i) const { return entries_[i].weight; }
  // p^alpha as the server sampled it (protocol::BatchEntry::priority_alpha;
  // 1 in a forwarding server's batches).
  float priority_alpha(uint32_t i) const { return entry(i).priority_alpha; }
  // The copied slot: SlotHeader, then payload_length bytes of payload.
  const uint8_t* slot(uint32_t i) const { return entries_[i].slot; }
  const protocol::SlotHeader& slot_header(uint32_t i) const {
    return *reinterpret_cast<const protocol::SlotHeader*>(slot(i));
  }
  absl::Span<const uint8_t> payload(uint32_t i) const {
    return absl::MakeConstSpan(slot(i) + sizeof(protocol::SlotHeader),
                               slot_header(i).payload_length);
  }
  // When the actor sealed the transition (SlotHeader::insert_time_ns).
  uint64_t insert_time_ns(uint32_t i) const { return slot_header(i).insert_time_ns; }
  // True when the transition's slot crossed the link with this batch; false
  // when the learner cache served it.
  bool arrived(uint32_t i) const { return entries_[i].arrived; }
  // Frames stored once (LayoutConfig::frame_stack > 0): the frame records
  // the batch carries besides its transitions (protocol/staging.h), those
  // its transitions refer to that the learner did not hold. Empty otherwise.
  absl::Span<const StagedEntry> records() const { return records_; }
  // The learner cache's copy of slot `index` (SlotHeader, then the
  // payload) if it holds exactly `sequence` there; nullptr otherwise, and
  // always without the cache. How a record the batch does not carry is
  // found. Valid until the reader's next Next().
  const uint8_t* cached_slot(uint64_t index, uint64_t sequence) const;

  // What a batch sees of the reader's learner cache.
  struct CacheView {
    const uint8_t* slots = nullptr;
    const uint64_t* sequences = nullptr;  // CommitValue of each slot's sequence
    uint64_t capacity = 0;                // 0: no cache
    uint32_t slot_size = 0;
  };

 private:
  friend class BatchReader;
  StagedBatch(const uint8_t* image, absl::Span<const StagedEntry> entries,
              absl::Span<const StagedEntry> records, const CacheView& cache)
      : image_(image), entries_(entries), records_(records), cache_(cache) {}

  const uint8_t* image_ = nullptr;  // the batch's staging image, 64-byte aligned
  absl::Span<const StagedEntry> entries_;
  absl::Span<const StagedEntry> records_;
  CacheView cache_;
};

struct BatchReaderOptions {
  // READs kept in flight (local buffers); 0: the server's staging_depth.
  // At most staging_depth (more could never be staged at once).
  uint32_t depth = 0;
  // Also verify every copied slot (sequence, checksum) of a batch.
  bool verify_slots = true;
  // Keep every transition received (capacity * slot_size bytes of local
  // memory) and serve the entries the server stages as references from it
  // (see the file comment). Set ClientSessionOptions::learner_cache too.
  bool learner_cache = false;
  // Back-off before READing a batch again that was not staged yet.
  absl::Duration retry_initial = absl::Microseconds(20);
  absl::Duration retry_max = absl::Milliseconds(2);

  absl::Status Validate() const;
};

struct BatchReaderStats {
  uint64_t batches = 0;      // returned by Next
  uint64_t transitions = 0;  // in those batches (misses left out)
  uint64_t reads = 0;        // staging READs completed (commit lines, batches)
  uint64_t bytes_read = 0;   // by those READs
  uint64_t polls = 0;        // commit line READs among them
  uint64_t not_staged = 0;   // READs that found an older batch (Unavailable)
  uint64_t torn = 0;         // READs that failed a checksum (DataLoss)
  // Copied slots that crossed the link in the batches returned, and the
  // distinct (index, sequence) among them.
  uint64_t transitions_fetched = 0;
  uint64_t distinct_transitions_fetched = 0;
  // Frame records (frames stored once) that crossed the link in those
  // batches; transitions_fetched counts the transitions only.
  uint64_t records_fetched = 0;
  uint64_t cache_hits = 0;    // references served from the learner cache
  uint64_t cache_misses = 0;  // references it could not serve (left out)
  uint64_t bad_slots = 0;     // batches with a copied slot failing VerifySlot
  // Link compression: the bytes of copied slots decompressed from packed
  // batches (their link bytes are the READs').
  uint64_t unpacked_bytes = 0;
  uint64_t unpack_cpu_ns = 0;  // this reader's thread's CPU time decompressing
  uint64_t resyncs = 0;        // restarts from the ServerLine
  uint64_t epoch_changes = 0;
  uint64_t reconnects = 0;   // reconnections this reader triggered
  uint64_t redelivered = 0;  // batches returned again after a resync
  uint64_t superseded = 0;   // batches released by the server before returned
};

class BatchReader {
 public:
  // `session` (a learner's) is not owned and must outlive the reader.
  // Posts the first READs. InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<BatchReader>> Create(client::ClientSession* session,
                                                             const BatchReaderOptions& options);
  ~BatchReader();
  BatchReader(const BatchReader&) = delete;
  BatchReader& operator=(const BatchReader&) = delete;

  // Returns the next batch, blocking up to `timeout`. DeadlineExceeded when
  // it was not staged in time (the READs stay in flight; call again).
  // Connection failures are handled by reconnecting (see the file comment);
  // errors are the session's when it cannot reconnect.
  absl::StatusOr<StagedBatch> Next(absl::Duration timeout);

  // The number of the batch Next() returns next, and its epoch.
  uint64_t next_batch() const { return next_; }
  uint64_t epoch() const { return epoch_; }
  uint32_t depth() const { return depth_; }
  const BatchReaderStats& stats() const { return stats_; }
  // The learner cache's copy of slot `index` (SlotHeader, then payload)
  // if it holds exactly `sequence` there; nullptr otherwise, and always
  // without the cache. Valid until the next Next(). The cache forgets
  // everything when the server restarts (a new epoch or incarnation), and
  // cache_generation() then changes.
  const uint8_t* cached_slot(uint64_t index, uint64_t sequence) const;
  uint64_t cache_generation() const { return cache_generation_; }

 private:
  enum class State : uint8_t {
    kIdle,
    kPolling,  // the commit line READ is in flight
    kReading,  // the READs of [0, used_bytes) are in flight
    kRetry,    // READ the commit line again at retry_at
    kReady,
  };
  struct Buffer {
    uint64_t batch = 0;
    State state = State::kIdle;
    bool outstanding = false;  // a READ into it has not completed
    uint64_t used_bytes = 0;   // of the batch being READ
    uint64_t entry_bytes = 0;  // of its entry area, as its commit line says
    int impossible_lines = 0;  // commit lines in a row with impossible sizes
    absl::Time retry_at;
    absl::Duration backoff;
  };

  BatchReader(client::ClientSession* session, const BatchReaderOptions& options, int sink,
              uint32_t depth);
  uint8_t* image(uint32_t b) const;
  // Posts the commit line READ of `batch` into its buffer.
  absl::Status PostRead(uint64_t batch);
  // Bytes the READs of b's batch move: header, entries used, copied slots.
  uint64_t BytesRead(const Buffer& b) const;
  // Posts the READs of b's batch: [0, StagingEntriesOffset + entry_bytes)
  // and [StagingPayloadsOffset, used_bytes).
  absl::Status PostBatchRead(Buffer* b);
  void ScheduleRetry(Buffer* buffer, bool grow);
  // Handles a completed commit line READ; flags superseded_ when the slot
  // holds a later batch.
  absl::Status CheckLine(Buffer* buffer);
  // Checks a completed batch READ; returns FailedPrecondition on an epoch
  // or incarnation change.
  absl::Status Check(Buffer* buffer);
  // Decompresses the packed payloads of the checked batch in `buffer` (link
  // compression, BatchHeader::packed_bytes) into its unpacked area; false
  // when they do not decompress. True for a batch staged as it is.
  bool Unpack(Buffer* buffer);
  uint32_t BufferIndex(const Buffer* buffer) const;
  // The copied slots of the batch in buffer b: in its image, or unpacked.
  const uint8_t* payloads(uint32_t b) const;
  // Builds the entries of the batch in buffer `b` (updating the learner
  // cache and the fetch stats) as it is returned.
  void Resolve(uint32_t b);
  // Handles this connection's completions; false when nothing arrived.
  absl::StatusOr<bool> PollCompletions();
  // Restarts from the ServerLine (after a reconnection or epoch change).
  absl::Status Resync();
  absl::Status Recover(const absl::Status& failure);

  client::ClientSession* const session_;
  const BatchReaderOptions options_;
  const int sink_;
  const uint32_t depth_;
  const uint64_t stride_;
  std::unique_ptr<client::RegisteredBuffer> buffers_memory_;
  std::vector<Buffer> buffers_;
  std::vector<std::vector<StagedEntry>> entries_;  // per buffer, for Resolve
  std::vector<std::vector<StagedEntry>> records_;  // the same, frame records
  std::vector<float> weights_;                     // Resolve's, one per transition entry
  // The learner cache: capacity slots, and CommitValue of the sequence each
  // holds (0: none). Empty without options.learner_cache.
  std::unique_ptr<uint8_t[]> cache_slots_;
  // Link compression (the server's PolicyLine::link_codec): the codec and
  // each buffer's unpacked copied slots.
  std::unique_ptr<FrameCodec> codec_;
  std::unique_ptr<uint8_t[]> unpacked_;
  uint64_t unpacked_stride_ = 0;
  std::vector<uint64_t> cache_sequence_;
  uint64_t cache_generation_ = 0;  // counts the times the cache was forgotten
  // CommitValue of the highest sequence fetched per slot index, for
  // distinct_transitions_fetched.
  absl::flat_hash_map<uint32_t, uint64_t> fetched_;
  uint64_t next_ = 0;
  uint64_t epoch_ = 0;
  uint64_t incarnation_ = 0;
  uint64_t generation_ = 0;
  uint64_t highest_returned_ = 0;  // 1 + the highest batch number returned
  bool release_pending_ = false;   // the last returned batch's buffer is in use
  bool superseded_ = false;        // a batch waited for was superseded: Resync
  BatchReaderStats stats_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_BATCH_READER_H_
