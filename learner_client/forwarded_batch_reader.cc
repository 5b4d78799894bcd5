// Copyright dreplay authors.

#include "learner_client/forwarded_batch_reader.h"

#include <cstring>
#include <utility>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "protocol/leases.h"

namespace dreplay::learner {

absl::Status ForwardedBatchReaderOptions::Validate() const {
  RETURN_IF_ERROR(batch_reader.Validate());
  if (batch_reader.learner_cache) {
    return absl::InvalidArgumentError(
        "a forwarded transition crosses once: the learner cache must stay off");
  }
  if (generated_read_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("generated_read_interval must be >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ForwardedBatchReader>> ForwardedBatchReader::Create(
    client::ClientSession* session, const ForwardedBatchReaderOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (session->policy().forward == 0) {
    return absl::FailedPreconditionError(
        "the server does not forward: start replay_server with --forward=priority (or "
        "uniform, or fifo) for the hybrid placement");
  }
  std::unique_ptr<ForwardedBatchReader> reader(new ForwardedBatchReader(session, options));
  ASSIGN_OR_RETURN(reader->reader_, BatchReader::Create(session, options.batch_reader));
  ASSIGN_OR_RETURN(reader->writer_, PriorityWriter::Create(session));
  // Generated transitions are counted from here.
  ASSIGN_OR_RETURN(const protocol::ServerLine line, session->ReadServerLine());
  reader->server_ingested_ = line.ingest_cursor;
  reader->ingested_read_at_ = absl::Now();
  return reader;
}

void ForwardedBatchReader::Take(const StagedBatch& batch, std::vector<ForwardedTransition>* out) {
  const protocol::LayoutConfig& c = session_->config();
  const uint64_t lease_slots = protocol::LeaseSlots(c);
  for (uint32_t i = 0; i < batch.size(); ++i) {
    const size_t at = slots_.size();
    slots_.resize(at + c.slot_size);
    std::memcpy(slots_.data() + at, batch.slot(i), c.slot_size);
    ForwardedTransition t;
    t.sequence = arrivals_++;
    t.lease = static_cast<uint32_t>(protocol::EntryIndex(batch.entry(i)) / lease_slots);
    t.lease_sequence = batch.entry(i).slot_sequence;
    // Pointers into slots_ are set once it stops growing.
    offsets_.push_back(at);
    lengths_.push_back(batch.slot_header(i).payload_length);
    out->push_back(t);
  }
}

absl::Status ForwardedBatchReader::Next(absl::Duration timeout,
                                        std::vector<ForwardedTransition>* out) {
  out->clear();
  slots_.clear();
  offsets_.clear();
  lengths_.clear();
  absl::Status status;
  const absl::Time now = absl::Now();
  if (now - ingested_read_at_ >= options_.generated_read_interval) {
    absl::StatusOr<protocol::ServerLine> line = session_->ReadServerLine();
    if (!line.ok()) return line.status();
    server_ingested_ = line->ingest_cursor;
    ingested_read_at_ = now;
  }
  for (uint32_t take = 0; take < reader_->depth(); ++take) {
    absl::StatusOr<StagedBatch> batch = reader_->Next(take == 0 ? timeout : absl::ZeroDuration());
    if (absl::IsDeadlineExceeded(batch.status())) break;  // none staged (yet)
    if (!batch.ok()) {
      status = batch.status();
      break;
    }
    // The answer goes first: if it fails, the batch is staged again.
    status = writer_->Write(batch->batch_number(), batch->epoch(), batch->incarnation(), {});
    if (!status.ok()) break;
    Take(*batch, out);
  }
  for (size_t k = 0; k < out->size(); ++k) {
    const uint8_t* slot = slots_.data() + offsets_[k];
    (*out)[k].header = reinterpret_cast<const protocol::SlotHeader*>(slot);
    (*out)[k].payload = absl::MakeConstSpan(slot + sizeof(protocol::SlotHeader), lengths_[k]);
  }
  // What was taken is handed over; a failure is the next call's.
  return out->empty() ? status : absl::OkStatus();
}

}  // namespace dreplay::learner
