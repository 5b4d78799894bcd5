// Copyright dreplay authors.
//
// priority_writer.h: the learner WRITEs new priorities for a batch into the
// server's priority mailbox (protocol/README.md, "Priority updates").
//
//   ASSIGN_OR_RETURN(auto priorities, PriorityWriter::Create(session.get()));
//   RETURN_IF_ERROR(priorities->Write(batch, td_errors));  // batch from BatchReader
//
// Write() encodes the update (EncodePriorityUpdate: header, records,
// checksum) into local buffer n % staging_depth and posts two WRITEs on the
// session's queue pair (counted as priorities): the entry's header and the
// records used to mailbox entry n % staging_depth, then its commit line. RC places the commit after
// the body. Only the commit WRITE is signalled; Write() does not wait for it, except when it needs
// the local buffer of batch n - staging_depth again. The server consumes updates oldest batch first
// and only then stages batch n + staging_depth in that staging slot: the mailbox is the flow
// control of the staging ring.
//
// Failures: if the connection fails, Write() reconnects through the session
// and returns OK; updates in flight may be lost (stats().lost). The batch
// reader then resynchronises from the server's batches_released and returns
// the batches whose update did not arrive again, so they are answered again.
//
// Thread safety: not thread-safe; one thread uses it (and its session).

#ifndef DREPLAY_LEARNER_CLIENT_PRIORITY_WRITER_H_
#define DREPLAY_LEARNER_CLIENT_PRIORITY_WRITER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/session.h"
#include "learner_client/batch_reader.h"
#include "protocol/layout.h"

namespace dreplay::learner {

struct PriorityWriterStats {
  uint64_t updates = 0;  // updates posted
  uint64_t records = 0;  // priority records in them
  uint64_t bytes_written = 0;
  uint64_t lost = 0;  // updates in flight when the connection failed
  uint64_t reconnects = 0;
};

class PriorityWriter {
 public:
  // `session` (a learner's) is not owned and must outlive the writer.
  static absl::StatusOr<std::unique_ptr<PriorityWriter>> Create(client::ClientSession* session);
  ~PriorityWriter();
  PriorityWriter(const PriorityWriter&) = delete;
  PriorityWriter& operator=(const PriorityWriter&) = delete;

  // Writes the update of batch `batch_number` of `epoch`, staged by server
  // incarnation `incarnation` (both from the batch's header). InvalidArgument
  // for more records than batch_size; connection errors only when the
  // session cannot reconnect. Blocks only while the local buffer of batch
  // `batch_number - staging_depth` is still being written.
  absl::Status Write(uint64_t batch_number, uint64_t epoch, uint64_t incarnation,
                     absl::Span<const protocol::PriorityRecord> records);
  // The same for a batch from BatchReader: record i is (entry(i)'s slot
  // sequence and index, priorities[i]), for every entry returned (the
  // learner cache's misses were left out of the batch, so they are not
  // answered). InvalidArgument unless priorities.size() == batch.size().
  absl::Status Write(const StagedBatch& batch, absl::Span<const float> priorities);

  // Whether Write(batch_number, ...) would post at once, without waiting for
  // the local buffer it reuses: handles the completions there are, and
  // never waits. Connection errors as Write's.
  absl::StatusOr<bool> Ready(uint64_t batch_number);

  // Waits (blocking, up to the session's op_timeout) until every update
  // written so far has been placed at the server.
  absl::Status Flush();

  const PriorityWriterStats& stats() const { return stats_; }

 private:
  struct Slot {
    bool outstanding = false;
    uint64_t wr_id = 0;
  };

  PriorityWriter(client::ClientSession* session, int sink);
  // Handles completions; waits for `slot` to be free when given.
  absl::Status Reap(Slot* wait_for);
  absl::Status Recover(const absl::Status& failure);

  client::ClientSession* const session_;
  const int sink_;
  const uint32_t depth_;
  const uint64_t stride_;
  std::unique_ptr<client::RegisteredBuffer> entries_;
  std::vector<Slot> slots_;
  std::vector<protocol::PriorityRecord> records_;  // scratch for Write(batch)
  uint64_t next_wr_id_ = 1;
  uint64_t generation_ = 0;
  PriorityWriterStats stats_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_PRIORITY_WRITER_H_
