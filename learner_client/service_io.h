// Copyright dreplay authors.
//
// service_io.h: the learner loop's connections to the replay service
// (learner_loop.h's LearnerIo) over one session, each operation retried
// while the server is unreachable (client/retry.h):
//
//   buffer placement   a BatchReader and a PriorityWriter behind BatchSource
//   learner placement  a ForwardReader behind TransitionStream
//   hybrid placement   a ForwardedBatchReader behind TransitionStream (the
//                      server forwards each transition once, replay_server
//                      --forward; forwarded_batch_reader.h)
//   both               a ParamPublisher behind ParamsSink, a StatsReader
//                      behind ActorStatsSource, link_stats() counting what
//                      all of them moved over the link (by traffic class)
//                      and the transitions fetched, and server_ingested()
//                      (the ServerLine's ingest_cursor) for the achieved
//                      samples per insert
//
//   LearnerServiceIoOptions io_options;
//   io_options.placement = ReplayPlacement::kBuffer;
//   io_options.retry = retry;
//   ASSIGN_OR_RETURN(auto service, LearnerServiceIo::Create(session.get(), io_options));
//   LearnerIo io = service->io();
//   io.on_progress = ...;
//   ASSIGN_OR_RETURN(auto loop, LearnerLoop::Create(loop_options, io));
//
// A batch that is not staged within Next()'s timeout is "none yet" (false),
// not a lost connection. A batch's payloads are decoded into the
// TransitionBatch, without the actors' padding (rl::EncodedTransitionPrefix);
// one that does not decode is left out (counted in transitions_dropped(),
// and written back with priority 0). Actor lines are
// summed into ActorTotals. Errors otherwise are the clients' once the
// retries are over.
//
// Assembly off the learner's thread (buffer placement, assemble_ahead):
// decoding and frame-stack assembly run on BatchAssembly's worker. When
// Next() returns batch n and batch n + 1 is already staged (two or more
// staging slots), Next() READs it at once and the worker assembles it
// while the learner trains on n; n's priority update is written from a
// copy of what it needs. The next Next() then only takes it. The rows a
// caller passes in are swapped with the assembled ones, so no batch is
// copied.
//
// Thread safety: not thread-safe; the loop's thread uses it (and its
// session). The assembly worker never touches the session.

#ifndef DREPLAY_LEARNER_CLIENT_SERVICE_IO_H_
#define DREPLAY_LEARNER_CLIENT_SERVICE_IO_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/actor_lines_poller.h"
#include "client/retry.h"
#include "client/server_line_poller.h"
#include "client/session.h"
#include "client/stats_reader.h"
#include "common/verification_log.h"
#include "learner_client/batch_assembly.h"
#include "learner_client/batch_reader.h"
#include "learner_client/forward_reader.h"
#include "learner_client/forwarded_batch_reader.h"
#include "learner_client/learner_io.h"
#include "learner_client/metrics.h"
#include "learner_client/param_publisher.h"
#include "learner_client/priority_writer.h"
#include "rl/transition.h"

namespace dreplay::learner {

struct LearnerServiceIoOptions {
  ReplayPlacement placement = ReplayPlacement::kBuffer;
  BatchReaderOptions batch_reader;      // buffer placement
  ForwardReaderOptions forward_reader;  // learner placement
  // Buffer placement: keep the payloads already fetched and READ only
  // those not held (transfer-once cache).
  bool learner_cache = false;
  // Buffer placement: decode each batch, and assemble its frame stacks, on
  // a thread of its own (batch_assembly.h), and READ the next batch as
  // soon as one is returned when it is already staged, so that it is
  // assembled while the learner trains on the one before. False: on the
  // caller's thread, in Next().
  bool assemble_ahead = true;
  // Learner placement: "in_order" (every transition, in sequence order) or
  // "freshest" (the newest first, skipping what fell behind).
  std::string forward_policy = "in_order";
  // How long operations are retried while the server is away, and the
  // stop request that ends the retries.
  client::RetryPolicy retry;
  // Not owned; nullptr: off. Records an A record for every entry of a
  // batch handed to the learner (buffer placement) and for every forwarded
  // transition handed over (learner placement; common/verification_log.h),
  // for the chaos soak's checker.
  VerificationLog* verification_log = nullptr;
};

class LearnerServiceIo : public BatchSource,
                         public TransitionStream,
                         public ParamsSink,
                         public ActorStatsSource {
 public:
  // `session` (a learner's; for the learner placement opened with
  // ClientSessionOptions::learner_placement) is not owned and must outlive
  // this object. Errors: the clients' Create() (ForwardReader's
  // FailedPrecondition for a session without learner_placement);
  // FailedPrecondition when the server's policy does not stage what the
  // placement needs (the buffer placement against a forwarding server, the
  // hybrid placement against one that does not forward).
  // The clients READ the server as they are created: a connection lost
  // meanwhile (a server restart) is reconnected and the clients are created
  // again, within options.retry, as every later READ is.
  static absl::StatusOr<std::unique_ptr<LearnerServiceIo>> Create(
      client::ClientSession* session, const LearnerServiceIoOptions& options);
  ~LearnerServiceIo() override;
  LearnerServiceIo(const LearnerServiceIo&) = delete;
  LearnerServiceIo& operator=(const LearnerServiceIo&) = delete;

  // For LearnerLoop::Create(): `batches` (buffer placement) or `stream`
  // (learner placement), `params`, `actors`, `link_stats` and
  // `server_ingested`, `crossing_percentile` (not in the learner
  // placement); points into this object. on_progress and
  // wall_clock_ns are left to the caller.
  LearnerIo io();

  // Bytes moved over the link by all the clients so far.
  uint64_t link_bytes() const { return link_stats().total_bytes(); }
  // Those bytes by traffic class, and the transitions fetched.
  LinkStats link_stats() const;
  // The staged-batch reader's counts (buffer and hybrid placements: READs,
  // decompression, cache); nullptr in the learner placement.
  const BatchReaderStats* batch_reader_stats() const;
  // Buffer placement: batches READ ahead and assembled while the learner
  // trained on the one before (assemble_ahead), and the CPU time decoding
  // and assembly took, on whichever thread.
  uint64_t batches_read_ahead() const { return batches_read_ahead_; }
  uint64_t assembly_cpu_ns() const { return assembly_ != nullptr ? assembly_->cpu_ns() : 0; }
  // The server's ingest_cursor, READ now (retried while disconnected).
  absl::StatusOr<uint64_t> server_ingested();
  // The mean crossing percentile of the server's stats region, READ now
  // (retried while disconnected); nullopt before any was measured.
  absl::StatusOr<std::optional<double>> crossing_percentile();

  // Buffer placement: the batch Next() returned last, as assembled (its
  // rows, weights and origins went to the caller; its identity, records,
  // kept entries, p^alpha and beta stay) until the next Next(); nullptr
  // before the first.
  const AssembledBatch* last_batch() const {
    return options_.placement == ReplayPlacement::kBuffer ? assembled_[current_].get() : nullptr;
  }
  // Buffer placement: writes the priority records of a batch Next()
  // returned (of any such batch, not only the last: a learner over several
  // nodes answers a batch once all its rows were trained on), retried while
  // disconnected. The server consumes updates oldest batch first.
  absl::Status WriteRecords(uint64_t batch_number, uint64_t epoch, uint64_t incarnation,
                            absl::Span<const protocol::PriorityRecord> records);
  // The server's stats region (StatsBlock: its sum of p^alpha, inserts,
  // ...), READ now (published every stats interval; retried while
  // disconnected).
  absl::StatusOr<protocol::StatsBlock> ReadStats();

  // BatchSource (buffer placement).
  absl::StatusOr<bool> Next(absl::Duration timeout, rl::TransitionBatch* batch,
                            std::vector<float>* weights,
                            std::vector<EntryOrigin>* origins) override;
  absl::Status WritePriorities(absl::Span<const float> priorities) override;
  uint64_t transitions_dropped() const override { return transitions_dropped_; }
  // TransitionStream (learner and hybrid placements).
  absl::Status Next(absl::Duration timeout, std::vector<ForwardedItem>* out) override;
  std::optional<uint64_t> generated() const override;
  bool keeps_records() const override;
  absl::Span<const uint8_t> HeldRecord(uint32_t lease, uint64_t sequence) const override;
  uint64_t records_generation() const override;
  // ParamsSink.
  absl::Status Publish(absl::Span<const uint8_t> params) override;
  absl::StatusOr<bool> PublishIfIdle(absl::Span<const uint8_t> params) override;
  // ActorStatsSource.
  absl::StatusOr<ActorTotals> Read() override;
  absl::StatusOr<ActorTotals> ReadKnown() override;

 private:
  explicit LearnerServiceIo(const LearnerServiceIoOptions& options);
  // Create() without the retry.
  static absl::StatusOr<std::unique_ptr<LearnerServiceIo>> CreateOnce(
      client::ClientSession* session, const LearnerServiceIoOptions& options);
  // The next staged batch within `timeout`, retried while disconnected;
  // NotFound when none was staged in time.
  absl::StatusOr<StagedBatch> ReadStaged(absl::Duration timeout);
  // Sets each origin's policy_lag from the version published last.
  void SetPolicyLags(std::vector<EntryOrigin>* origins) const;
  // Buffer placement: READs the next batch if it is staged already and
  // starts assembling it.
  void ReadAhead();
  // Writes a forwarded transition's A record to options_.verification_log.
  void RecordForwarded(const ForwardedTransition& t);

  const LearnerServiceIoOptions options_;
  client::ClientSession* session_ = nullptr;
  std::unique_ptr<BatchReader> batch_reader_;               // buffer placement
  std::unique_ptr<PriorityWriter> priority_writer_;         // buffer placement
  std::unique_ptr<ForwardReader> forward_reader_;           // learner placement
  std::unique_ptr<ForwardedBatchReader> forwarded_reader_;  // hybrid placement
  std::unique_ptr<ParamPublisher> publisher_;
  std::unique_ptr<client::StatsReader> stats_reader_;
  // What the progress records take without waiting for the link.
  std::unique_ptr<client::ActorLinesPoller> actor_lines_;
  std::unique_ptr<client::ServerLinePoller> server_line_;  // buffer placement
  // Buffer placement: the batches' two buffers, the batch Next() returned
  // last (assembled_[current_], kept for its priority update) and the one
  // being assembled, and their decoding and stack assembly (declared after
  // the buffers and the reader, so that its worker is joined first).
  std::unique_ptr<AssembledBatch> assembled_[2];
  std::unique_ptr<BatchAssembly> assembly_;
  int current_ = 0;
  absl::Status read_ahead_error_;  // returned by the next Next()
  uint64_t batches_read_ahead_ = 0;
  uint64_t transitions_dropped_ = 0;
  std::vector<ForwardedTransition> forwarded_;  // what Next() saw last
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_SERVICE_IO_H_
