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
// The reader keeps `depth` READs in flight, one per staging slot: batch n
// is READ (one large READ of the whole staging slot) into local buffer
// n % depth. Each image is checked with CheckStagedBatch (commit word, batch
// number, epoch, checksum) and, optionally, every copied slot with
// VerifySlot. A batch not staged yet (Unavailable) or a READ that overlapped
// the server's write (DataLoss) is READ again after a back-off. Batches are
// returned in order.
//
// Starting point and resynchronisation: a new reader starts at the server's
// batches_released (the oldest batch still waiting for a priority update).
// When the connection is re-established (by this reader or another client
// of the session), or the epoch changes (the server restarted from a
// checkpoint), the reader READs the ServerLine again and continues from its
// batches_released in its epoch; batches it returned whose priority update
// never reached the server are then returned again (stats().redelivered),
// and the caller must write their priorities again, as for any batch.
//
// Thread safety: not thread-safe; one thread uses the reader (and its
// session). The views of a StagedBatch stay valid until the next call of
// Next(), which reuses their buffer for a later batch.

#ifndef DREPLAY_LEARNER_CLIENT_BATCH_READER_H_
#define DREPLAY_LEARNER_CLIENT_BATCH_READER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/session.h"
#include "protocol/layout.h"

namespace dreplay::learner {

// A staged batch as READ: a view into the reader's buffer.
class StagedBatch {
 public:
  StagedBatch() = default;

  uint64_t batch_number() const { return header().batch_number; }
  uint64_t epoch() const { return header().epoch; }
  // Transitions in the batch (<= batch_size).
  uint32_t size() const { return header().count; }
  const protocol::BatchHeader& header() const {
    return *reinterpret_cast<const protocol::BatchHeader*>(image_);
  }
  // REQUIRES for the per-entry accessors: i < size().
  const protocol::BatchEntry& entry(uint32_t i) const {
    return reinterpret_cast<const protocol::BatchEntry*>(
        image_ + protocol::StagingEntriesOffset(*config_))[i];
  }
  float weight(uint32_t i) const { return entry(i).weight; }
  // The copied slot: SlotHeader, then payload_length bytes of payload.
  const uint8_t* slot(uint32_t i) const {
    return image_ + protocol::StagingPayloadsOffset(*config_) + uint64_t{i} * config_->slot_size;
  }
  const protocol::SlotHeader& slot_header(uint32_t i) const {
    return *reinterpret_cast<const protocol::SlotHeader*>(slot(i));
  }
  absl::Span<const uint8_t> payload(uint32_t i) const {
    return absl::MakeConstSpan(slot(i) + sizeof(protocol::SlotHeader),
                               slot_header(i).payload_length);
  }

 private:
  friend class BatchReader;
  StagedBatch(const protocol::LayoutConfig* config, const uint8_t* image)
      : config_(config), image_(image) {}

  const protocol::LayoutConfig* config_ = nullptr;
  const uint8_t* image_ = nullptr;  // StagingSlotStride bytes, 64-byte aligned
};

struct BatchReaderOptions {
  // READs kept in flight (local buffers); 0: the server's staging_depth.
  // At most staging_depth (more could never be staged at once).
  uint32_t depth = 0;
  // Also verify every copied slot (sequence, checksum) of a batch.
  bool verify_slots = true;
  // Back-off before READing a batch again that was not staged yet.
  absl::Duration retry_initial = absl::Microseconds(20);
  absl::Duration retry_max = absl::Milliseconds(2);

  absl::Status Validate() const;
};

struct BatchReaderStats {
  uint64_t batches = 0;      // returned by Next
  uint64_t transitions = 0;  // in those batches
  uint64_t reads = 0;        // staging READs completed
  uint64_t bytes_read = 0;   // by those READs
  uint64_t not_staged = 0;   // READs that found an older batch (Unavailable)
  uint64_t torn = 0;         // READs that failed a checksum (DataLoss)
  uint64_t bad_slots = 0;    // batches with a copied slot failing VerifySlot
  uint64_t resyncs = 0;      // restarts from the ServerLine
  uint64_t epoch_changes = 0;
  uint64_t reconnects = 0;   // reconnections this reader triggered
  uint64_t redelivered = 0;  // batches returned again after a resync
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

 private:
  enum class State : uint8_t { kIdle, kReading, kRetry, kReady };
  struct Buffer {
    uint64_t batch = 0;
    State state = State::kIdle;
    bool outstanding = false;  // a READ into it has not completed
    absl::Time retry_at;
    absl::Duration backoff;
  };

  BatchReader(client::ClientSession* session, const BatchReaderOptions& options, int sink,
              uint32_t depth);
  uint8_t* image(uint32_t b) const;
  // Posts the READ of `batch` into its buffer.
  absl::Status PostRead(uint64_t batch);
  void ScheduleRetry(Buffer* buffer, bool grow);
  // Checks a completed READ; returns FailedPrecondition on an epoch change.
  absl::Status Check(Buffer* buffer);
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
  uint64_t next_ = 0;
  uint64_t epoch_ = 0;
  uint64_t generation_ = 0;
  uint64_t highest_returned_ = 0;  // 1 + the highest batch number returned
  bool release_pending_ = false;   // the last returned batch's buffer is in use
  BatchReaderStats stats_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_BATCH_READER_H_
