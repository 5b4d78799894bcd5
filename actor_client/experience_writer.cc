// Copyright dreplay authors.

#include "actor_client/experience_writer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/shared_words.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::actor {

using client::ClientSession;
using client::IsConnectionFailure;
using protocol::LayoutConfig;
using protocol::RegionKind;

namespace {

// Two slot WRITEs and two commit WRITEs at most per flush.
constexpr int kMaxRequestsPerFlush = 4;
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
  if (session->directory().lease == protocol::kNoLease) {
    return absl::FailedPreconditionError("the server granted this session no lease");
  }
  if (session->qp()->max_send_wr() < kMaxRequestsPerFlush) {
    return absl::InvalidArgumentError(
        absl::StrCat("the session's send queue holds ", session->qp()->max_send_wr(),
                     " requests; a flush posts up to ", kMaxRequestsPerFlush));
  }
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<ExperienceWriter> writer(new ExperienceWriter(session, options, sink));
  const uint64_t slot_bytes = uint64_t{options.max_batch} * config.slot_size;
  const uint64_t commit_bytes =
      protocol::RoundUp(uint64_t{options.max_batch} * sizeof(uint64_t), protocol::kCacheLine);
  const uint64_t bytes = slot_bytes + commit_bytes + sizeof(protocol::LeaseLine);
  ASSIGN_OR_RETURN(writer->buffer_, client::RegisteredBuffer::Create(session->provider(), bytes));
  writer->slots_ = writer->buffer_->data();
  writer->commits_ = reinterpret_cast<uint64_t*>(writer->buffer_->data() + slot_bytes);
  writer->lease_line_ =
      reinterpret_cast<protocol::LeaseLine*>(writer->buffer_->data() + slot_bytes + commit_bytes);
  writer->TakeGrant();
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
      next_sequence_ += pending();
      break;
    }
    if (!IsConnectionFailure(status) || reconnects >= options_.max_reconnects_per_flush) {
      return status;
    }
    const uint32_t old_lease = lease_;
    RETURN_IF_ERROR(session_->Reconnect(generation, status));
    ++stats_.reconnects;
    TakeGrant();
    if (progress == Progress::kCommitPosted) {
      if (lease_ == old_lease) {
        // The server resumes this lease after its last commit: whatever of
        // the batch it found committed is done, the rest is written again
        // under the sequences it names.
        const uint64_t first = attempted_first_;
        const uint64_t done =
            next_sequence_ > first ? std::min<uint64_t>(next_sequence_ - first, pending()) : 0;
        DropFront(done);
        stats_.committed += done;
      } else {
        LOG(WARNING) << "actor " << actor_id_ << ": lease " << old_lease << " went to another "
                     << "actor while disconnected; a batch of " << pending()
                     << " transitions may or may not have been committed there";
        stats_.abandoned += pending();
        DropFront(pending());
      }
    }
    if (pending() == 0) return absl::OkStatus();
  }
  DropFront(pending());
  return absl::OkStatus();
}

void ExperienceWriter::TakeGrant() {
  const protocol::RegionDirectory& directory = session_->directory();
  lease_ = directory.lease;
  next_sequence_ = directory.resume_sequence;
  grant_generation_ = session_->generation();
  known_cursor_ = 0;  // READ again before writing
}

void ExperienceWriter::DropFront(size_t count) {
  size_t bytes = 0;
  for (size_t i = 0; i < count; ++i) bytes += pending_lengths_[i];
  pending_bytes_.erase(pending_bytes_.begin(), pending_bytes_.begin() + bytes);
  pending_lengths_.erase(pending_lengths_.begin(), pending_lengths_.begin() + count);
  pending_priorities_.erase(pending_priorities_.begin(), pending_priorities_.begin() + count);
}

absl::Status ExperienceWriter::TryFlush(Progress* progress) {
  const auto count = static_cast<uint32_t>(pending());
  const absl::Time start = absl::Now();
  // Another user of the session may have reconnected it: a new grant.
  if (session_->generation() != grant_generation_) TakeGrant();
  const uint64_t first = next_sequence_;
  attempted_first_ = first;
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
  *progress = Progress::kCommitPosted;  // from here, commits may land
  RETURN_IF_ERROR(PostWrites(first, count, &last_wr_id));
  RETURN_IF_ERROR(session_->Wait(sink_, last_wr_id, session_->options().op_timeout));
  stats_.latency.Record(absl::Now() - start);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ExperienceWriter::ReadLeaseCursor() {
  ASSIGN_OR_RETURN(const verbs::RemoteRegion leases, session_->Region(RegionKind::kLeases));
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink_, next_wr_id_++);
  wr.opcode = verbs::Opcode::kRead;
  wr.signaled = true;
  wr.local = buffer_->mr();
  wr.local_addr = lease_line_;
  wr.length = sizeof(protocol::LeaseLine);
  wr.remote_addr = leases.addr + protocol::LeaseLineOffset(lease_);
  wr.rkey = leases.rkey;
  RETURN_IF_ERROR(session_->Post(absl::MakeConstSpan(&wr, 1)));
  RETURN_IF_ERROR(session_->Wait(sink_, wr.wr_id, session_->options().op_timeout));
  return LoadAcquire(&lease_line_->ingest_cursor);
}

absl::Status ExperienceWriter::WaitForRoom(uint64_t last_sequence) {
  if (protocol::SequenceWritable(config(), last_sequence, known_cursor_)) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.room_timeout;
  absl::Duration backoff = options_.room_backoff_initial;
  while (true) {
    ASSIGN_OR_RETURN(known_cursor_, ReadLeaseCursor());
    if (protocol::SequenceWritable(config(), last_sequence, known_cursor_)) return absl::OkStatus();
    ++stats_.room_waits;
    if (absl::Now() + backoff > deadline) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "no room for sequence ", last_sequence, " of lease ", lease_, " within ",
          absl::FormatDuration(options_.room_timeout), ": the lease's ingest cursor is at ",
          known_cursor_, " (actor window ", protocol::ActorWindow(config()), ")"));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, options_.room_backoff_max);
  }
}

absl::Status ExperienceWriter::PostWrites(uint64_t first, uint32_t count, uint64_t* wr_id) {
  // The directory's slot and commit regions cover this writer's lease only.
  ASSIGN_OR_RETURN(const verbs::RemoteRegion slots, session_->Region(RegionKind::kSlots));
  ASSIGN_OR_RETURN(const verbs::RemoteRegion commits, session_->Region(RegionKind::kCommits));
  const uint64_t lease_slots = protocol::LeaseSlots(config());
  // The batch covers lease offsets [offset, offset + count), split at the
  // lease's wrap.
  const uint64_t offset = first % lease_slots;
  const uint32_t before_wrap =
      static_cast<uint32_t>(std::min<uint64_t>(count, lease_slots - offset));
  struct Range {
    uint32_t first_item;  // position in the batch
    uint32_t items;
    uint64_t lease_offset;
  };
  Range ranges[2] = {{0, before_wrap, offset}, {before_wrap, count - before_wrap, 0}};
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
    wr.remote_addr = slots.addr + r.lease_offset * slot_size_;
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
    wr.remote_addr = commits.addr + r.lease_offset * sizeof(uint64_t);
    wr.rkey = commits.rkey;
  }
  wrs[n - 1].signaled = true;
  *wr_id = wrs[n - 1].wr_id;
  RETURN_IF_ERROR(session_->Post(absl::MakeConstSpan(wrs, n)));
  stats_.bytes_written += uint64_t{count} * (slot_size_ + sizeof(uint64_t));
  return absl::OkStatus();
}

}  // namespace dreplay::actor
