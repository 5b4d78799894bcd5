// Copyright dreplay authors.

#include "learner_client/service_io.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dreplay::learner {

absl::StatusOr<std::unique_ptr<LearnerServiceIo>> LearnerServiceIo::Create(
    client::ClientSession* session, const LearnerServiceIoOptions& options) {
  std::unique_ptr<LearnerServiceIo> io(new LearnerServiceIo(options));
  if (options.placement == ReplayPlacement::kBuffer) {
    ASSIGN_OR_RETURN(io->batch_reader_, BatchReader::Create(session, options.batch_reader));
    ASSIGN_OR_RETURN(io->priority_writer_, PriorityWriter::Create(session));
  } else {
    ASSIGN_OR_RETURN(io->forward_reader_, ForwardReader::Create(session, options.forward_reader));
  }
  ASSIGN_OR_RETURN(io->publisher_, ParamPublisher::Create(session));
  ASSIGN_OR_RETURN(io->stats_reader_, client::StatsReader::Create(session));
  return io;
}

LearnerServiceIo::LearnerServiceIo(const LearnerServiceIoOptions& options) : options_(options) {}

LearnerServiceIo::~LearnerServiceIo() = default;

LearnerIo LearnerServiceIo::io() {
  LearnerIo io;
  if (batch_reader_ != nullptr) io.batches = this;
  if (forward_reader_ != nullptr) io.stream = this;
  io.params = this;
  io.actors = this;
  io.link_bytes = [this] { return link_bytes(); };
  return io;
}

uint64_t LearnerServiceIo::link_bytes() const {
  uint64_t bytes = publisher_->bytes_written();
  if (batch_reader_ != nullptr) bytes += batch_reader_->stats().bytes_read;
  if (priority_writer_ != nullptr) bytes += priority_writer_->stats().bytes_written;
  if (forward_reader_ != nullptr) bytes += forward_reader_->stats().bytes_read;
  return bytes;
}

absl::StatusOr<bool> LearnerServiceIo::Next(absl::Duration timeout, rl::TransitionBatch* batch,
                                            std::vector<float>* weights) {
  if (batch_reader_ == nullptr) {
    return absl::FailedPreconditionError("no batches in the learner placement");
  }
  // DeadlineExceeded is "not staged in time", not a lost connection.
  absl::StatusOr<StagedBatch> staged = batch_reader_->Next(timeout);
  if (absl::IsDeadlineExceeded(staged.status())) return false;
  if (!staged.ok()) {
    staged = client::RetryWhileDisconnected(options_.retry, [&]() -> absl::StatusOr<StagedBatch> {
      absl::StatusOr<StagedBatch> next = batch_reader_->Next(timeout);
      if (absl::IsDeadlineExceeded(next.status())) {
        return absl::NotFoundError("not staged yet");
      }
      return next;
    });
    if (absl::IsNotFound(staged.status())) return false;
    if (!staged.ok()) return staged.status();
  }
  batch->Clear();
  weights->clear();
  for (uint32_t i = 0; i < staged->size(); ++i) {
    const absl::Status s = batch->AddEncoded(staged->payload(i));
    if (!s.ok()) {
      return absl::DataLossError(absl::StrCat("batch ", staged->batch_number(), " entry ", i,
                                              " does not decode: ", s.message()));
    }
    weights->push_back(staged->weight(i));
  }
  last_batch_ = *std::move(staged);
  return true;
}

absl::Status LearnerServiceIo::WritePriorities(absl::Span<const float> priorities) {
  if (priority_writer_ == nullptr) {
    return absl::FailedPreconditionError("no priorities in the learner placement");
  }
  return client::RetryWhileDisconnected(
      options_.retry, [&] { return priority_writer_->Write(last_batch_, priorities); });
}

absl::Status LearnerServiceIo::Next(absl::Duration timeout, std::vector<ForwardedItem>* out) {
  if (forward_reader_ == nullptr) {
    return absl::FailedPreconditionError("no forwarded transitions in the buffer placement");
  }
  RETURN_IF_ERROR(client::RetryWhileDisconnected(
      options_.retry, [&] { return forward_reader_->Next(timeout, &forwarded_); }));
  out->clear();
  for (const ForwardedTransition& t : forwarded_) {
    out->push_back({t.sequence, t.initial_priority(), t.payload});
  }
  return absl::OkStatus();
}

absl::Status LearnerServiceIo::Publish(absl::Span<const uint8_t> params) {
  return client::RetryWhileDisconnected(options_.retry, [&] { return publisher_->Publish(params); })
      .status();
}

absl::StatusOr<ActorTotals> LearnerServiceIo::Read() {
  ASSIGN_OR_RETURN(
      const std::vector<protocol::ActorLine> lines,
      client::RetryWhileDisconnected(options_.retry, [&] { return stats_reader_->ReadActors(); }));
  ActorTotals totals;
  for (const protocol::ActorLine& line : lines) {
    totals.env_steps += line.env_steps;
    totals.episodes += line.episodes;
    totals.returns_count += line.returns_count;
    totals.returns_sum += line.returns_sum;
    ++totals.actors;
  }
  return totals;
}

}  // namespace dreplay::learner
