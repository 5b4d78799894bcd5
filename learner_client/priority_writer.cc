// Copyright dreplay authors.

#include "learner_client/priority_writer.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::learner {

using client::ClientSession;
using protocol::RegionKind;

namespace {

// The slot index rides in the low bits of a work request id.
constexpr int kSlotBits = 11;
static_assert((1u << kSlotBits) > protocol::kMaxStagingDepth, "a slot index fits its bits");
constexpr int kPollBatch = 16;
constexpr absl::Duration kPollSleep = absl::Microseconds(20);

}  // namespace

absl::StatusOr<std::unique_ptr<PriorityWriter>> PriorityWriter::Create(ClientSession* session) {
  if (session->options().role != protocol::Role::kLearner) {
    return absl::InvalidArgumentError("PriorityWriter needs a learner session");
  }
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<PriorityWriter> writer(new PriorityWriter(session, sink));
  ASSIGN_OR_RETURN(writer->entries_, client::RegisteredBuffer::Create(
                                         session->provider(), writer->depth_ * writer->stride_));
  return writer;
}

PriorityWriter::PriorityWriter(ClientSession* session, int sink)
    : session_(session),
      sink_(sink),
      depth_(session->config().staging_depth),
      stride_(protocol::MailboxEntryStride(session->config())),
      slots_(depth_),
      generation_(session->generation()) {
  records_.reserve(session->config().batch_size);
}

// Its memory is freed only once no request of its own still uses it.
PriorityWriter::~PriorityWriter() { session_->Settle(sink_); }

absl::Status PriorityWriter::Recover(const absl::Status& failure) {
  if (!client::IsConnectionFailure(failure)) return failure;
  for (Slot& s : slots_) {
    if (s.outstanding) ++stats_.lost;
    s = Slot{};
  }
  const uint64_t before = session_->generation();
  RETURN_IF_ERROR(session_->Reconnect(generation_, failure));
  if (session_->generation() != before) ++stats_.reconnects;
  generation_ = session_->generation();
  return absl::OkStatus();
}

absl::Status PriorityWriter::Reap(Slot* wait_for) {
  if (generation_ != session_->generation()) {
    // Another client reconnected: what was in flight went with the old
    // connection.
    for (Slot& s : slots_) {
      if (s.outstanding) ++stats_.lost;
      s = Slot{};
    }
    generation_ = session_->generation();
  }
  const absl::Time deadline = absl::Now() + session_->options().op_timeout;
  verbs::Completion completions[kPollBatch];
  while (true) {
    const int n = session_->Poll(sink_, absl::MakeSpan(completions));
    for (int i = 0; i < n; ++i) {
      if (!completions[i].ok()) return Recover(completions[i].ToStatus());
      const uint64_t payload = ClientSession::WrIdPayload(completions[i].wr_id);
      Slot& s = slots_[payload & ((1u << kSlotBits) - 1)];
      if (s.outstanding && s.wr_id == completions[i].wr_id) s.outstanding = false;
    }
    if (wait_for == nullptr || !wait_for->outstanding) return absl::OkStatus();
    if (n > 0) continue;
    if (absl::Now() > deadline) {
      return Recover(absl::DeadlineExceededError("a priority update WRITE did not complete"));
    }
    absl::SleepFor(kPollSleep);
  }
}

absl::Status PriorityWriter::Write(uint64_t batch_number, uint64_t epoch, uint64_t incarnation,
                                   absl::Span<const protocol::PriorityRecord> records) {
  const protocol::LayoutConfig& config = session_->config();
  if (records.size() > config.batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority update with ", records.size(),
                     " records, more than batch_size=", config.batch_size));
  }
  const uint32_t index = static_cast<uint32_t>(batch_number % depth_);
  Slot& slot = slots_[index];
  RETURN_IF_ERROR(Reap(&slot));
  uint8_t* entry = entries_->data() + index * stride_;
  RETURN_IF_ERROR(protocol::EncodePriorityUpdate(config, batch_number, epoch, incarnation, records,
                                                 absl::MakeSpan(entry, stride_)));
  ASSIGN_OR_RETURN(const verbs::RemoteRegion mailbox, session_->Region(RegionKind::kMailbox));
  const uint64_t remote = mailbox.addr + protocol::MailboxEntryOffset(config, batch_number);
  const uint64_t commit_offset = protocol::MailboxCommitOffset(config);
  verbs::WorkRequest wrs[2];
  for (int i = 0; i < 2; ++i) {
    wrs[i].wr_id = ClientSession::WrId(sink_, (next_wr_id_++ << kSlotBits) | index);
    wrs[i].opcode = verbs::Opcode::kWrite;
    wrs[i].local = entries_->mr();
    wrs[i].rkey = mailbox.rkey;
  }
  // The body (header + the records used: the server reads no more) ...
  const uint64_t body =
      protocol::MailboxRecordsOffset(config) + records.size() * sizeof(protocol::PriorityRecord);
  wrs[0].signaled = false;
  wrs[0].local_addr = entry;
  wrs[0].length = static_cast<uint32_t>(body);
  wrs[0].remote_addr = remote;
  // ... then the commit line, placed after it.
  wrs[1].signaled = true;
  wrs[1].local_addr = entry + commit_offset;
  wrs[1].length = sizeof(protocol::CommitLine);
  wrs[1].remote_addr = remote + commit_offset;
  absl::Status status =
      session_->Post(absl::MakeConstSpan(wrs, 2), client::TrafficClass::kPriorities);
  if (!status.ok()) {
    ++stats_.lost;
    return Recover(status);
  }
  slot.outstanding = true;
  slot.wr_id = wrs[1].wr_id;
  ++stats_.updates;
  stats_.records += records.size();
  stats_.bytes_written += body + sizeof(protocol::CommitLine);
  return absl::OkStatus();
}

absl::Status PriorityWriter::Write(const StagedBatch& batch, absl::Span<const float> priorities) {
  if (priorities.size() != batch.size()) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", batch.batch_number(), " has ",
                                                   batch.size(), " transitions but ",
                                                   priorities.size(), " priorities were given"));
  }
  records_.clear();
  for (uint32_t i = 0; i < batch.size(); ++i) {
    const protocol::BatchEntry& e = batch.entry(i);
    records_.push_back(protocol::PriorityRecord{e.slot_sequence, e.slot_index, priorities[i]});
  }
  return Write(batch.batch_number(), batch.epoch(), batch.incarnation(), records_);
}

absl::StatusOr<bool> PriorityWriter::Ready(uint64_t batch_number) {
  RETURN_IF_ERROR(Reap(nullptr));
  return !slots_[batch_number % depth_].outstanding;
}

absl::Status PriorityWriter::Flush() {
  for (Slot& slot : slots_) RETURN_IF_ERROR(Reap(&slot));
  return absl::OkStatus();
}

}  // namespace dreplay::learner
