// Copyright dreplay authors.

#include "learner_client/forwarded_batch_reader.h"

#include <cstddef>
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
  ASSIGN_OR_RETURN(reader->sink_, session->AddSink());
  ASSIGN_OR_RETURN(reader->line_, client::RegisteredBuffer::Create(session->provider(),
                                                                   sizeof(protocol::ServerLine)));
  // Generated transitions are counted from here.
  ASSIGN_OR_RETURN(const protocol::ServerLine line, session->ReadServerLine());
  reader->server_ingested_ = line.ingest_cursor;
  reader->ingested_read_at_ = absl::Now();
  return reader;
}

absl::Status ForwardedBatchReader::PollServerLine(absl::Time now) {
  if (line_generation_ != session_->generation()) {  // a new connection: nothing in flight
    line_pending_ = false;
    line_generation_ = session_->generation();
  }
  verbs::Completion completions[4];
  const int n = session_->Poll(sink_, absl::MakeSpan(completions));
  for (int i = 0; i < n; ++i) {
    if (!completions[i].ok()) return completions[i].ToStatus();
    protocol::ServerLine line;
    std::memcpy(&line, line_->data(), sizeof(line));
    server_ingested_ = line.ingest_cursor;
    line_pending_ = false;
  }
  if (line_pending_ || now - ingested_read_at_ < options_.generated_read_interval) {
    return absl::OkStatus();
  }
  // Posted, never waited for: on a busy link the answer queues behind the
  // batches in flight, and the learner trains meanwhile.
  ASSIGN_OR_RETURN(const verbs::RemoteRegion control,
                   session_->Region(protocol::RegionKind::kControl));
  verbs::WorkRequest wr;
  wr.wr_id = client::ClientSession::WrId(sink_, ++line_reads_);
  wr.opcode = verbs::Opcode::kRead;
  wr.local = line_->mr();
  wr.local_addr = line_->data();
  wr.length = sizeof(protocol::ServerLine);
  wr.remote_addr = control.addr + offsetof(protocol::ControlBlock, server);
  wr.rkey = control.rkey;
  RETURN_IF_ERROR(session_->Post(absl::MakeConstSpan(&wr, 1), client::TrafficClass::kPolling));
  line_pending_ = true;
  ingested_read_at_ = now;
  return absl::OkStatus();
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
  RETURN_IF_ERROR(PollServerLine(absl::Now()));
  absl::Status status;
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
