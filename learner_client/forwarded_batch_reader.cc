// Copyright dreplay authors.

#include "learner_client/forwarded_batch_reader.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "protocol/leases.h"

namespace dreplay::learner {

absl::Status ForwardedBatchReaderOptions::Validate() const {
  RETURN_IF_ERROR(batch_reader.Validate());
  if (batch_reader.learner_cache) {
    return absl::InvalidArgumentError(
        "a forwarded transition crosses once: the learner cache stays off (the reader keeps "
        "frame records itself when the server stores frames once)");
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
  BatchReaderOptions batches = options.batch_reader;
  // Frames stored once: every record received is kept by its slot, where
  // the replay's stacks are assembled from (and the server, told of the
  // cache, leaves out what is kept).
  batches.learner_cache = session->config().frame_stack > 0;
  ASSIGN_OR_RETURN(reader->reader_, BatchReader::Create(session, batches));
  ASSIGN_OR_RETURN(reader->writer_, PriorityWriter::Create(session));
  // Generated transitions are counted from here.
  ASSIGN_OR_RETURN(reader->line_,
                   client::ServerLinePoller::Create(session, options.generated_read_interval));
  return reader;
}

absl::StatusOr<bool> ForwardedBatchReader::AnswerableBy(absl::Time deadline) {
  while (true) {
    ASSIGN_OR_RETURN(const bool ready, writer_->Ready(reader_->next_batch()));
    if (ready) return true;
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    absl::SleepFor(std::min(deadline - now, kAnswerPoll));
  }
}

absl::Span<const uint8_t> ForwardedBatchReader::HeldRecord(uint32_t lease,
                                                           uint64_t sequence) const {
  const protocol::LayoutConfig& c = session_->config();
  if (lease >= c.leases) return {};
  const uint8_t* slot =
      reader_->cached_slot(protocol::LeaseSlotIndex(c, lease, sequence), sequence);
  if (slot == nullptr) return {};
  const auto* header = reinterpret_cast<const protocol::SlotHeader*>(slot);
  if (sizeof(protocol::SlotHeader) + header->payload_length > c.slot_size) return {};
  return absl::MakeConstSpan(slot + sizeof(protocol::SlotHeader), header->payload_length);
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
  RETURN_IF_ERROR(line_->Poll().status());
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status status;
  for (uint32_t take = 0; take < reader_->depth(); ++take) {
    // A batch is taken only when its answer can be posted at once. On a
    // busy link the completion of the answer that used the same buffer
    // queues behind the batches in flight; waiting for it would stop the
    // learner's training, so the batch stays staged until then.
    absl::StatusOr<bool> answerable = AnswerableBy(take == 0 ? deadline : absl::Now());
    if (!answerable.ok()) {
      status = answerable.status();
      break;
    }
    if (!*answerable) break;
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    absl::StatusOr<StagedBatch> batch = reader_->Next(take == 0 ? left : absl::ZeroDuration());
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
