// Copyright dreplay authors.

#include "actor_client/experience_writer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::actor {

using client::ClientSession;
using client::IsConnectionFailure;
using protocol::LayoutConfig;
using protocol::RegionKind;

namespace {

// One FETCH_ADD, two slot WRITEs and two commit WRITEs at most per flush.
constexpr int kMaxRequestsPerFlush = 5;
constexpr uint64_t kMaxWriteBytes = uint64_t{1} << 30;

}  // namespace

absl::Status ExperienceWriterOptions::Validate() const {
  if (max_batch == 0)
    return absl::InvalidArgumentError("ExperienceWriterOptions.max_batch=0 must be >= 1");
  if (room_backoff_initial <= absl::ZeroDuration() || room_backoff_max < room_backoff_initial) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ExperienceWriterOptions.room_backoff_initial=", absl::FormatDuration(room_backoff_initial),
        " room_backoff_max=", absl::FormatDuration(room_backoff_max), ": need 0 < initial <= max"));
  }
  if (room_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExperienceWriterOptions.room_timeout=", absl::FormatDuration(room_timeout),
                     " must be > 0"));
  }
  if (max_reconnects_per_flush < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExperienceWriterOptions.max_reconnects_per_flush=", max_reconnects_per_flush,
                     " must be >= 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExperienceWriter>> ExperienceWriter::Create(
    ClientSession* session, const ExperienceWriterOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (session->options().role != protocol::Role::kActor) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExperienceWriter needs an actor session, not a ",
                     protocol::RoleName(session->options().role)));
  }
  const LayoutConfig& config = session->config();
  if (options.max_batch > protocol::ActorWindow(config)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExperienceWriterOptions.max_batch=", options.max_batch,
                     " exceeds the server's actor window of ", protocol::ActorWindow(config),
                     " sequences (a batch that large could never be written)"));
  }
  if (uint64_t{options.max_batch} * config.slot_size >= kMaxWriteBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExperienceWriterOptions.max_batch=", options.max_batch,
                     " times slot_size=", config.slot_size, " is 1 GiB or more"));
  }
  if (session->qp()->max_send_wr() < kMaxRequestsPerFlush) {
    return absl::InvalidArgumentError(
        absl::StrCat("the session's send queue holds ", session->qp()->max_send_wr(),
                     " requests; a flush posts up to ", kMaxRequestsPerFlush));
  }
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<ExperienceWriter> writer(new ExperienceWriter(session, options, sink));
  const uint64_t slot_bytes = uint64_t{options.max_batch} * config.slot_size;
  const uint64_t bytes = slot_bytes + (uint64_t{options.max_batch} + 1) * sizeof(uint64_t);
  ASSIGN_OR_RETURN(writer->buffer_, client::RegisteredBuffer::Create(session->provider(), bytes));
  writer->slots_ = writer->buffer_->data();
  writer->commits_ = reinterpret_cast<uint64_t*>(writer->buffer_->data() + slot_bytes);
  writer->fetch_result_ = writer->commits_ + options.max_batch;
  writer->known_cursor_ = session->server_line().ingest_cursor;
  writer->pending_bytes_.reserve(uint64_t{options.max_batch} * config.max_payload());
  return writer;
}

ExperienceWriter::ExperienceWriter(ClientSession* session, const ExperienceWriterOptions& options,
                                   int sink)
    : session_(session),
      options_(options),
      sink_(sink),
      slot_size_(session->config().slot_size),
      actor_id_(session->options().actor_id) {}

ExperienceWriter::~ExperienceWriter() = default;

absl::Status ExperienceWriter::Append(absl::Span<const uint8_t> payload, float initial_priority) {
  if (payload.size() > config().max_payload()) {
    return absl::InvalidArgumentError(absl::StrCat("transition of ", payload.size(),
                                                   " bytes exceeds the server's max payload of ",
                                                   config().max_payload(), " bytes"));
  }
  if (pending() >= options_.max_batch) RETURN_IF_ERROR(Flush());
  pending_bytes_.insert(pending_bytes_.end(), payload.begin(), payload.end());
  pending_lengths_.push_back(static_cast<uint32_t>(payload.size()));
  pending_priorities_.push_back(initial_priority);
  return absl::OkStatus();
}

absl::Status ExperienceWriter::Flush() {
  if (pending() == 0) return absl::OkStatus();
  for (int reconnects = 0;; ++reconnects) {
    const uint64_t generation = session_->generation();
    Progress progress = Progress::kNothing;
    const absl::Status status = TryFlush(&progress);
    if (status.ok()) {
      stats_.committed += pending();
      ++stats_.flushes;
      break;
    }
    if (!IsConnectionFailure(status) || reconnects >= options_.max_reconnects_per_flush) {
      return status;
    }
    if (progress == Progress::kCommitPosted) {
      LOG(WARNING) << "actor " << actor_id_ << ": abandoning a batch of " << pending()
                   << " transitions whose commit was not confirmed: " << status;
      stats_.abandoned += pending();
      pending_bytes_.clear();
      pending_lengths_.clear();
      pending_priorities_.clear();
    }
    RETURN_IF_ERROR(session_->Reconnect(generation, status));
    ++stats_.reconnects;
    known_cursor_ = session_->server_line().ingest_cursor;
    if (pending() == 0) return absl::OkStatus();
  }
  pending_bytes_.clear();
  pending_lengths_.clear();
  pending_priorities_.clear();
  return absl::OkStatus();
}

absl::Status ExperienceWriter::TryFlush(Progress* progress) {
  const auto count = static_cast<uint32_t>(pending());
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(const uint64_t first, Reserve(count));
  *progress = Progress::kReserved;
  RETURN_IF_ERROR(WaitForRoom(first + count - 1));

  // Seal the slots in sequence order and fill the commit words. They are
  // stamped with one wall-clock time (CLOCK_REALTIME, SlotHeader::
  // insert_time_ns): the learner measures data age from it.
  const uint64_t insert_time_ns = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  const uint8_t* payload = pending_bytes_.data();
  for (uint32_t i = 0; i < count; ++i) {
    RETURN_IF_ERROR(protocol::SealSlot(slots_ + uint64_t{i} * slot_size_, slot_size_, first + i,
                                       actor_id_, pending_priorities_[i], insert_time_ns, payload,
                                       pending_lengths_[i]));
    payload += pending_lengths_[i];
    commits_[i] = protocol::CommitValue(first + i);
  }
  uint64_t last_wr_id = 0;
  RETURN_IF_ERROR(PostWrites(first, count, &last_wr_id));
  *progress = Progress::kCommitPosted;
  RETURN_IF_ERROR(session_->Wait(sink_, last_wr_id, session_->options().op_timeout));
  stats_.latency.Record(absl::Now() - start);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ExperienceWriter::Reserve(uint32_t count) {
  ASSIGN_OR_RETURN(const verbs::RemoteRegion tail, session_->Region(RegionKind::kTail));
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink_, next_wr_id_++);
  wr.opcode = verbs::Opcode::kFetchAdd;
  wr.signaled = true;
  wr.local = buffer_->mr();
  wr.local_addr = fetch_result_;
  wr.length = sizeof(uint64_t);
  wr.remote_addr = tail.addr;  // the tail word is at offset 0 of its line
  wr.rkey = tail.rkey;
  wr.compare_add = count;
  RETURN_IF_ERROR(session_->Post(absl::MakeConstSpan(&wr, 1)));
  RETURN_IF_ERROR(session_->Wait(sink_, wr.wr_id, session_->options().op_timeout));
  return *fetch_result_;
}

absl::Status ExperienceWriter::WaitForRoom(uint64_t last_sequence) {
  if (protocol::SequenceWritable(config(), last_sequence, known_cursor_)) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.room_timeout;
  absl::Duration backoff = options_.room_backoff_initial;
  while (true) {
    ASSIGN_OR_RETURN(const protocol::ServerLine line, session_->ReadServerLine());
    known_cursor_ = line.ingest_cursor;
    if (protocol::SequenceWritable(config(), last_sequence, known_cursor_)) return absl::OkStatus();
    ++stats_.room_waits;
    if (absl::Now() + backoff > deadline) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "no room for sequence ", last_sequence, " within ",
          absl::FormatDuration(options_.room_timeout), ": the server's ingest cursor is at ",
          known_cursor_, " (actor window ", protocol::ActorWindow(config()), ")"));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, options_.room_backoff_max);
  }
}

absl::Status ExperienceWriter::PostWrites(uint64_t first, uint32_t count, uint64_t* wr_id) {
  ASSIGN_OR_RETURN(const verbs::RemoteRegion slots, session_->Region(RegionKind::kSlots));
  ASSIGN_OR_RETURN(const verbs::RemoteRegion commits, session_->Region(RegionKind::kCommits));
  const LayoutConfig& c = config();
  // The batch covers ring indices [index, index + count), split at the wrap.
  const uint64_t index = protocol::SlotIndex(c, first);
  const uint32_t before_wrap = static_cast<uint32_t>(std::min<uint64_t>(count, c.capacity - index));
  struct Range {
    uint32_t first_item;  // position in the batch
    uint32_t items;
    uint64_t ring_index;
  };
  Range ranges[2] = {{0, before_wrap, index}, {before_wrap, count - before_wrap, 0}};
  verbs::WorkRequest wrs[4];
  int n = 0;
  for (const Range& r : ranges) {  // slots first ...
    if (r.items == 0) continue;
    verbs::WorkRequest& wr = wrs[n++];
    wr.wr_id = ClientSession::WrId(sink_, next_wr_id_++);
    wr.opcode = verbs::Opcode::kWrite;
    wr.signaled = false;
    wr.local = buffer_->mr();
    wr.local_addr = slots_ + uint64_t{r.first_item} * slot_size_;
    wr.length = r.items * slot_size_;
    wr.remote_addr = slots.addr + r.ring_index * slot_size_;
    wr.rkey = slots.rkey;
  }
  for (const Range& r : ranges) {  // ... then their commit words
    if (r.items == 0) continue;
    verbs::WorkRequest& wr = wrs[n++];
    wr.wr_id = ClientSession::WrId(sink_, next_wr_id_++);
    wr.opcode = verbs::Opcode::kWrite;
    wr.signaled = false;
    wr.local = buffer_->mr();
    wr.local_addr = commits_ + r.first_item;
    wr.length = r.items * static_cast<uint32_t>(sizeof(uint64_t));
    wr.remote_addr = commits.addr + r.ring_index * sizeof(uint64_t);
    wr.rkey = commits.rkey;
  }
  wrs[n - 1].signaled = true;
  *wr_id = wrs[n - 1].wr_id;
  RETURN_IF_ERROR(session_->Post(absl::MakeConstSpan(wrs, n)));
  stats_.bytes_written += uint64_t{count} * (slot_size_ + sizeof(uint64_t));
  return absl::OkStatus();
}

}  // namespace dreplay::actor
