// Copyright dreplay authors.
//
// forwarded_batch_reader.h: the hybrid placement's data path at the
// learner. A server started with --forward stages each transition at most
// once (protocol/README.md, "Forwarding"): by priority, uniformly, or
// oldest first. This reader takes those batches as they are staged, copies
// their transitions out, answers each batch with an update of no records
// (which frees its staging slot for the next one), and hands the
// transitions over in arrival order, as the learner placement's
// ForwardReader does (forward_reader.h): the caller keeps its own replay.
//
//   ASSIGN_OR_RETURN(auto reader, ForwardedBatchReader::Create(session.get(), {}));
//   std::vector<ForwardedTransition> fresh;
//   while (training) {
//     RETURN_IF_ERROR(reader->Next(absl::Milliseconds(1), &fresh));
//     for (const ForwardedTransition& t : fresh) local_memory.Insert(t.sequence, t.payload, ...);
//     ...
//   }
//
// One Next() takes the first batch within `timeout`, then every batch the
// BatchReader has already READ, up to its depth. ForwardedTransition::
// sequence numbers the transitions 0, 1, 2, ... in arrival order; lease
// and lease_sequence say which slot of which lease each came from, and
// header points at its copied slot (header and payload), valid until the
// next Next(). A failure after the first batch ends the take early: what
// was taken is handed over and the next call meets the failure. A batch
// whose answer was lost is staged again after a reconnection (the
// BatchReader's resynchronisation), so a transition can arrive twice then.
//
// server_ingested(): the ServerLine's ingest_cursor (the transitions the
// actors generated). Next() posts a READ of it at most every
// options.generated_read_interval (polling on the link) and takes the
// answer in a later call: it never waits for it, because on a link the
// forwarded batches saturate the answer queues behind them (a blocking
// READ every 20 ms held a learner on a 4.8 Mb/s link to a few percent of
// its train steps). Likewise a batch is taken only once its answer can be
// posted without waiting for the WRITE that last used the same answer
// buffer (whose completion also queues behind the forwarded batches); it
// stays staged until then. Waiting there held a learner on a 2.2 Mb/s link
// to about half its governed updates.
//
// Thread safety: not thread-safe; one thread uses it (and its session).

#ifndef DREPLAY_LEARNER_CLIENT_FORWARDED_BATCH_READER_H_
#define DREPLAY_LEARNER_CLIENT_FORWARDED_BATCH_READER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/server_line_poller.h"
#include "client/session.h"
#include "learner_client/batch_reader.h"
#include "learner_client/forward_reader.h"
#include "learner_client/priority_writer.h"

namespace dreplay::learner {

// How often Next() looks again for a free answer buffer while it waits.
inline constexpr absl::Duration kAnswerPoll = absl::Microseconds(200);

struct ForwardedBatchReaderOptions {
  // depth and verify_slots; learner_cache must stay off (a forwarded
  // transition never crosses again; with frames stored once the reader
  // keeps the records itself).
  BatchReaderOptions batch_reader;
  absl::Duration generated_read_interval = absl::Milliseconds(20);

  absl::Status Validate() const;
};

class ForwardedBatchReader {
 public:
  // `session` (a learner's) is not owned and must outlive the reader.
  // FailedPrecondition when the server does not forward (its PolicyLine);
  // InvalidArgument for bad options; the clients' errors otherwise.
  static absl::StatusOr<std::unique_ptr<ForwardedBatchReader>> Create(
      client::ClientSession* session, const ForwardedBatchReaderOptions& options);

  // Clears *out and fills it with what arrived (see the file comment),
  // waiting up to `timeout` for the first batch; OK with *out empty when
  // none was staged in time. Errors: the session's.
  absl::Status Next(absl::Duration timeout, std::vector<ForwardedTransition>* out);

  // The server's ingest cursor as last READ.
  uint64_t server_ingested() const { return line_->known().ingest_cursor; }
  const BatchReaderStats& stats() const { return reader_->stats(); }

  // Frames stored once (the server's frame_stack > 0): the reader keeps
  // every record it receives (transitions and the records they need) by
  // its server slot, and this is the payload of (lease, sequence) while
  // that slot holds it; empty otherwise, and always without frames. Valid
  // until the next Next().
  absl::Span<const uint8_t> HeldRecord(uint32_t lease, uint64_t sequence) const;
  // Changes when the reader forgets the records it held (a server restart).
  uint64_t records_generation() const { return reader_->cache_generation(); }

 private:
  ForwardedBatchReader(client::ClientSession* session, const ForwardedBatchReaderOptions& options)
      : session_(session), options_(options) {}
  // Copies `batch`'s slots out and appends its transitions to *out.
  void Take(const StagedBatch& batch, std::vector<ForwardedTransition>* out);
  // Whether the next batch's answer can be posted at once, polling until
  // `deadline` at most (kAnswerPoll apart). Errors: the writer's.
  absl::StatusOr<bool> AnswerableBy(absl::Time deadline);

  client::ClientSession* const session_;
  const ForwardedBatchReaderOptions options_;
  std::unique_ptr<BatchReader> reader_;
  std::unique_ptr<PriorityWriter> writer_;
  std::vector<uint8_t> slots_;     // the copied slots of the last Next()
  std::vector<size_t> offsets_;    // where each transition's slot starts in slots_
  std::vector<uint32_t> lengths_;  // and its payload's length
  uint64_t arrivals_ = 0;
  std::unique_ptr<client::ServerLinePoller> line_;  // the ingest cursor
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_FORWARDED_BATCH_READER_H_
