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
constexpr uint32_t kMaxInFlight = 64;
// Completions Poll takes from the session at a time.
constexpr int kPollBatch = 16;
// WaitInFlight polls this long before it sleeps between polls.
constexpr absl::Duration kSpinBeforeSleep = absl::Microseconds(50);
constexpr absl::Duration kPollSleep = absl::Microseconds(10);

}  // namespace

absl::Status ExperienceWriterOptions::Validate() const {
  if (max_batch == 0)
    return absl::InvalidArgumentError("ExperienceWriterOptions.max_batch=0 must be >= 1");
  if (room_backoff_initial <= absl::ZeroDuration() || room_backoff_max < room_backoff_initial) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ExperienceWriterOptions.room_backoff_initial=", absl::FormatDuration(room_backoff_initial),
        " room_backoff_max=", absl::FormatDuration(room_backoff_max), ": need 0 < initial <= max"));
  }
  if (max_in_flight == 0 || max_in_flight > kMaxInFlight) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExperienceWriterOptions.max_in_flight=", max_in_flight, " must be in [1, ",
                     kMaxInFlight, "]"));
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
  // Every batch in flight and one LeaseLine READ.
  const int requests = kMaxRequestsPerFlush * static_cast<int>(options.max_in_flight) + 1;
  if (session->qp()->max_send_wr() < requests) {
    return absl::InvalidArgumentError(
        absl::StrCat("the session's send queue holds ", session->qp()->max_send_wr(), " requests; ",
                     options.max_in_flight, " batches in flight and a READ post up to ", requests));
  }
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<ExperienceWriter> writer(new ExperienceWriter(session, options, sink));
  const uint64_t slot_bytes = uint64_t{options.max_batch} * config.slot_size;
  const uint64_t commit_bytes =
      protocol::RoundUp(uint64_t{options.max_batch} * sizeof(uint64_t), protocol::kCacheLine);
  writer->area_slot_bytes_ = slot_bytes;
  writer->area_bytes_ = protocol::RoundUp(slot_bytes + commit_bytes, protocol::kCacheLine);
  const uint64_t areas_bytes = writer->area_bytes_ * options.max_in_flight;
  const uint64_t bytes = areas_bytes + sizeof(protocol::LeaseLine);
  ASSIGN_OR_RETURN(writer->buffer_, client::RegisteredBuffer::Create(session->provider(), bytes));
  writer->lease_line_ =
      reinterpret_cast<protocol::LeaseLine*>(writer->buffer_->data() + areas_bytes);
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
      actor_id_(session->options().actor_id),
      room_backoff_(options.room_backoff_initial) {}

// Its memory is freed only once no request of its own still uses it.
ExperienceWriter::~ExperienceWriter() { session_->Settle(sink_); }

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
  pending_versions_.push_back(params_version_);
  return absl::OkStatus();
}

absl::Status ExperienceWriter::Flush() {
  RETURN_IF_ERROR(WaitInFlight());
  int reconnects = 0;
  while (pending() > 0) {
    const auto count = static_cast<uint32_t>(std::min<size_t>(pending(), options_.max_batch));
    const uint64_t generation = session_->generation();
    Progress progress = Progress::kNothing;
    const absl::Status status = TryFlush(count, &progress);
    if (status.ok()) {
      LogCommitted(0, 0, next_sequence_, count);
      stats_.committed += count;
      ++stats_.flushes;
      next_sequence_ += count;
      DropFront(count);
      continue;
    }
    if (!IsConnectionFailure(status) || reconnects >= options_.max_reconnects_per_flush) {
      return status;
    }
    ++reconnects;
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
            received_end_ > first ? std::min<uint64_t>(received_end_ - first, count) : 0;
        LogCommitted(0, 0, first, done);
        DropFront(done);
        stats_.committed += done;
      } else {
        LOG(WARNING) << "actor " << actor_id_ << ": lease " << old_lease << " went to another "
                     << "actor while disconnected; a batch of " << count
                     << " transitions may or may not have been committed there";
        stats_.abandoned += count;
        DropFront(count);
      }
    }
  }
  return absl::OkStatus();
}

void ExperienceWriter::LogCommitted(uint32_t area, uint32_t offset, uint64_t first,
                                    uint64_t count) {
  VerificationLog* log = options_.verification_log;
  if (log == nullptr) return;
  const uint64_t epoch = session_->epoch();
  for (uint64_t i = 0; i < count; ++i) {
    protocol::SlotHeader header;
    std::memcpy(&header, AreaSlots(area) + (offset + i) * slot_size_, sizeof(header));
    log->Committed(epoch, protocol::LeaseSlotIndex(config(), lease_, first + i), first + i,
                   header.checksum);
  }
}

void ExperienceWriter::TakeGrant() {
  const protocol::RegionDirectory& directory = session_->directory();
  lease_ = directory.lease;
  next_sequence_ = directory.resume_sequence;
  // Below this the server received what was written; sequences from here to
  // next_sequence_ were skipped after a restart and are written again.
  received_end_ = directory.resume_sequence -
                  uint64_t{directory.resume_skipped_laps} * protocol::LeaseSlots(config());
  grant_generation_ = session_->generation();
  known_cursor_ = 0;  // READ again before writing
}

void ExperienceWriter::DropFront(size_t count) {
  size_t bytes = 0;
  for (size_t i = 0; i < count; ++i) bytes += pending_lengths_[i];
  pending_bytes_.erase(pending_bytes_.begin(), pending_bytes_.begin() + bytes);
  pending_lengths_.erase(pending_lengths_.begin(), pending_lengths_.begin() + count);
  pending_priorities_.erase(pending_priorities_.begin(), pending_priorities_.begin() + count);
  pending_versions_.erase(pending_versions_.begin(), pending_versions_.begin() + count);
}

absl::Status ExperienceWriter::TryFlush(uint32_t count, Progress* progress) {
  const absl::Time start = absl::Now();
  // Another user of the session may have reconnected it: a new grant.
  if (session_->generation() != grant_generation_) TakeGrant();
  const uint64_t first = next_sequence_;
  attempted_first_ = first;
  RETURN_IF_ERROR(WaitForRoom(first + count - 1));

  RETURN_IF_ERROR(Seal(0, first, count));
  uint64_t last_wr_id = 0;
  *progress = Progress::kCommitPosted;  // from here, commits may land
  RETURN_IF_ERROR(PostWrites(0, first, count, &last_wr_id));
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

absl::Status ExperienceWriter::PostWrites(uint32_t area, uint64_t first, uint32_t count,
                                          uint64_t* wr_id) {
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
    wr.local_addr = AreaSlots(area) + uint64_t{r.first_item} * slot_size_;
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
    wr.local_addr = AreaCommits(area) + r.first_item;
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

uint8_t* ExperienceWriter::AreaSlots(uint32_t area) const {
  return buffer_->data() + uint64_t{area} * area_bytes_;
}

uint64_t* ExperienceWriter::AreaCommits(uint32_t area) const {
  return reinterpret_cast<uint64_t*>(AreaSlots(area) + area_slot_bytes_);
}

absl::Status ExperienceWriter::Seal(uint32_t area, uint64_t first, uint32_t count) {
  // The slots in sequence order, and their commit words. They are stamped
  // with one wall-clock time (CLOCK_REALTIME, SlotHeader::insert_time_ns):
  // the learner measures data age from it.
  const uint64_t insert_time_ns = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  uint8_t* slots = AreaSlots(area);
  uint64_t* commits = AreaCommits(area);
  const uint8_t* payload = pending_bytes_.data();
  for (uint32_t i = 0; i < count; ++i) {
    RETURN_IF_ERROR(protocol::SealSlot(slots + uint64_t{i} * slot_size_, slot_size_, first + i,
                                       actor_id_, pending_priorities_[i], insert_time_ns, payload,
                                       pending_lengths_[i], pending_versions_[i]));
    payload += pending_lengths_[i];
    commits[i] = protocol::CommitValue(first + i);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ExperienceWriter::Submit() {
  if (pending() == 0 || in_flight_.size() >= options_.max_in_flight) return false;
  if (session_->generation() != grant_generation_) {
    // Another user of the session reconnected it: what was in flight is
    // gone with the old queue pair.
    if (in_flight_.empty() && cursor_read_wr_id_ == 0) {
      TakeGrant();
    } else {
      RETURN_IF_ERROR(Recover(absl::UnavailableError("the session reconnected")));
    }
  }
  const auto count = static_cast<uint32_t>(std::min<size_t>(pending(), options_.max_batch));
  const uint64_t first = next_sequence_;
  if (!protocol::SequenceWritable(config(), first + count - 1, known_cursor_)) {
    const absl::Time now = absl::Now();
    if (no_room_since_ == absl::InfiniteFuture()) no_room_since_ = now;
    if (now - no_room_since_ > options_.room_timeout) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "no room for sequence ", first + count - 1, " of lease ", lease_, " within ",
          absl::FormatDuration(options_.room_timeout), ": the lease's ingest cursor is at ",
          known_cursor_, " (actor window ", protocol::ActorWindow(config()), ")"));
    }
    if (cursor_read_wr_id_ == 0 && now >= cursor_read_not_before_) {
      ++stats_.room_waits;
      RETURN_IF_ERROR(PostCursorRead());
      cursor_read_not_before_ = now + room_backoff_;
      room_backoff_ = std::min(room_backoff_ * 2, options_.room_backoff_max);
    }
    return false;
  }
  no_room_since_ = absl::InfiniteFuture();
  room_backoff_ = options_.room_backoff_initial;
  const uint32_t area = next_area_;
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(Seal(area, first, count));
  uint64_t wr_id = 0;
  RETURN_IF_ERROR(PostWrites(area, first, count, &wr_id));
  in_flight_.push_back(InFlight{wr_id, first, count, area, start});
  next_area_ = (next_area_ + 1) % options_.max_in_flight;
  next_sequence_ += count;
  DropFront(count);
  // Ask for the cursor ahead of need, so that the next batch finds room.
  if (!protocol::SequenceWritable(config(), next_sequence_ + options_.max_batch - 1,
                                  known_cursor_)) {
    RETURN_IF_ERROR(PostCursorRead());
  }
  return true;
}

absl::Status ExperienceWriter::PostCursorRead() {
  if (cursor_read_wr_id_ != 0) return absl::OkStatus();
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
  cursor_read_wr_id_ = wr.wr_id;
  return absl::OkStatus();
}

absl::Status ExperienceWriter::Poll() {
  if (in_flight_.empty() && cursor_read_wr_id_ == 0) return absl::OkStatus();
  if (session_->generation() != grant_generation_) {
    return Recover(absl::UnavailableError("the session reconnected"));
  }
  verbs::Completion completions[kPollBatch];
  int n = 0;
  int total = 0;
  do {
    n = session_->Poll(sink_, absl::MakeSpan(completions));
    total += n;
    for (int i = 0; i < n; ++i) {
      const verbs::Completion& c = completions[i];
      if (!c.ok()) return Recover(c.ToStatus());
      if (c.wr_id == cursor_read_wr_id_) {
        known_cursor_ = std::max(known_cursor_, LoadAcquire(&lease_line_->ingest_cursor));
        cursor_read_wr_id_ = 0;
        continue;
      }
      // The signalled last WRITE of a batch: RC completes it after every
      // request posted before it, so it ends the batches up to it.
      const uint64_t done = ClientSession::WrIdPayload(c.wr_id);
      const absl::Time now = absl::Now();
      while (!in_flight_.empty() && ClientSession::WrIdPayload(in_flight_.front().wr_id) <= done) {
        const InFlight& b = in_flight_.front();
        LogCommitted(b.area, 0, b.first, b.count);
        stats_.committed += b.count;
        ++stats_.flushes;
        stats_.latency.Record(now - b.start);
        in_flight_.pop_front();
      }
    }
  } while (n == kPollBatch);
  if (total == 0) {  // something is in flight: is it still coming?
    verbs::QueuePair* qp = session_->qp();
    if (qp == nullptr) return Recover(absl::UnavailableError("not connected"));
    if (qp->state() == verbs::QpState::kError) {
      // The new grant, not the completions, tells what was committed.
      const absl::Status error = qp->error();
      return Recover(error.ok() ? absl::UnavailableError("queue pair failed") : error);
    }
    if (!in_flight_.empty() &&
        absl::Now() - in_flight_.front().start > session_->options().op_timeout) {
      return absl::DeadlineExceededError(absl::StrCat(
          "a batch of lease ", lease_, " from sequence ", in_flight_.front().first,
          " was not complete within ", absl::FormatDuration(session_->options().op_timeout)));
    }
  }
  return absl::OkStatus();
}

absl::Status ExperienceWriter::WaitInFlight() {
  const absl::Time start = absl::Now();
  while (!in_flight_.empty() || cursor_read_wr_id_ != 0) {
    RETURN_IF_ERROR(Poll());
    if (absl::Now() - start > kSpinBeforeSleep) absl::SleepFor(kPollSleep);
  }
  return absl::OkStatus();
}

absl::Status ExperienceWriter::Recover(const absl::Status& why) {
  if (!IsConnectionFailure(why)) return why;
  const uint32_t old_lease = lease_;
  const uint64_t first = in_flight_.empty() ? next_sequence_ : in_flight_.front().first;
  const uint64_t posted = next_sequence_ - first;
  RETURN_IF_ERROR(session_->Reconnect(grant_generation_, why));
  ++stats_.reconnects;
  TakeGrant();
  cursor_read_wr_id_ = 0;
  cursor_read_not_before_ = absl::InfinitePast();
  if (posted > 0 && lease_ != old_lease) {
    LOG(WARNING) << "actor " << actor_id_ << ": lease " << old_lease << " went to another "
                 << "actor while disconnected; " << posted
                 << " transitions in flight may or may not have been committed there";
    stats_.abandoned += posted;
    in_flight_.clear();
    return absl::OkStatus();
  }
  // The server resumes the lease after its last commit (commits land in
  // order): sequences below next_sequence_ are done, the rest goes back in
  // front of the pending transitions, in order.
  const uint64_t done = received_end_ > first ? std::min(received_end_ - first, posted) : 0;
  stats_.committed += done;
  for (const InFlight& b : in_flight_) {
    if (b.first >= first + done) break;
    LogCommitted(b.area, 0, b.first, std::min<uint64_t>(b.count, first + done - b.first));
  }
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> lengths;
  std::vector<float> priorities;
  std::vector<uint32_t> versions;
  for (const InFlight& b : in_flight_) {
    for (uint32_t i = 0; i < b.count; ++i) {
      if (b.first + i < first + done) continue;
      const uint8_t* slot = AreaSlots(b.area) + uint64_t{i} * slot_size_;
      protocol::SlotHeader header;
      std::memcpy(&header, slot, sizeof(header));
      const uint8_t* payload = slot + sizeof(protocol::SlotHeader);
      bytes.insert(bytes.end(), payload, payload + header.payload_length);
      lengths.push_back(header.payload_length);
      priorities.push_back(header.initial_priority);
      versions.push_back(header.params_version);
    }
  }
  in_flight_.clear();
  pending_bytes_.insert(pending_bytes_.begin(), bytes.begin(), bytes.end());
  pending_lengths_.insert(pending_lengths_.begin(), lengths.begin(), lengths.end());
  pending_priorities_.insert(pending_priorities_.begin(), priorities.begin(), priorities.end());
  pending_versions_.insert(pending_versions_.begin(), versions.begin(), versions.end());
  return absl::OkStatus();
}

}  // namespace dreplay::actor
