// Copyright dreplay authors.

#include "learner_client/forward_reader.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::learner {

using client::ClientSession;
using client::TrafficClass;
using protocol::LayoutConfig;
using protocol::RegionKind;

namespace {

constexpr uint64_t kMaxReadBytes = uint64_t{1} << 30;
constexpr uint32_t kMaxChunksInFlight = 1024;
// Work request ids: the low bits name the chunk; this value the ServerLine.
constexpr int kChunkBits = 11;
static_assert((1u << kChunkBits) > kMaxChunksInFlight, "a chunk index fits its bits");
constexpr uint64_t kCursorRead = (1u << kChunkBits) - 1;
constexpr int kPollBatch = 32;
constexpr absl::Duration kSpinBeforeSleep = absl::Microseconds(200);
constexpr absl::Duration kPollSleep = absl::Microseconds(20);

}  // namespace

absl::Status ForwardReaderOptions::Validate() const {
  if (chunk_slots == 0)
    return absl::InvalidArgumentError("ForwardReaderOptions.chunk_slots=0 must be >= 1");
  if (max_chunks_in_flight == 0 || max_chunks_in_flight >= kMaxChunksInFlight) {
    return absl::InvalidArgumentError(
        absl::StrCat("ForwardReaderOptions.max_chunks_in_flight=", max_chunks_in_flight,
                     " must be in [1, ", kMaxChunksInFlight - 1, "]"));
  }
  if (poll_initial <= absl::ZeroDuration() || poll_max < poll_initial) {
    return absl::InvalidArgumentError(
        absl::StrCat("ForwardReaderOptions.poll_initial=", absl::FormatDuration(poll_initial),
                     " poll_max=", absl::FormatDuration(poll_max), ": need 0 < initial <= max"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ForwardReader>> ForwardReader::Create(
    ClientSession* session, const ForwardReaderOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (session->options().role != protocol::Role::kLearner) {
    return absl::InvalidArgumentError("ForwardReader needs a learner session");
  }
  RETURN_IF_ERROR(session->Region(RegionKind::kSlots).status());
  RETURN_IF_ERROR(session->Region(RegionKind::kCommits).status());
  const LayoutConfig& config = session->config();
  if (options.window > config.capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("ForwardReaderOptions.window=", options.window,
                     " exceeds the server's capacity=", config.capacity));
  }
  const uint64_t window =
      options.window != 0 ? options.window : std::max<uint64_t>(1, config.capacity / 2);
  if (uint64_t{options.chunk_slots} * config.slot_size > kMaxReadBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("ForwardReaderOptions.chunk_slots=", options.chunk_slots,
                     " makes READs larger than 1 GiB"));
  }
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<ForwardReader> r(new ForwardReader(session, options, sink, window));
  ASSIGN_OR_RETURN(r->memory_, client::RegisteredBuffer::Create(
                                   session->provider(),
                                   protocol::kCacheLine +
                                       uint64_t{options.max_chunks_in_flight} * r->chunk_bytes_));
  r->chunks_.resize(options.max_chunks_in_flight);
  ASSIGN_OR_RETURN(const protocol::ServerLine line, session->ReadServerLine());
  r->generation_ = session->generation();
  r->epoch_ = line.epoch;
  r->incarnation_ = line.incarnation;
  r->target_ = line.ingest_cursor;
  r->next_ = line.ingest_cursor;
  if (options.from_oldest) {
    r->next_ = line.ingest_cursor > config.capacity ? line.ingest_cursor - config.capacity : 0;
  }
  r->next_post_ = r->next_;
  return r;
}

ForwardReader::ForwardReader(ClientSession* session, const ForwardReaderOptions& options, int sink,
                             uint64_t window)
    : session_(session),
      options_(options),
      sink_(sink),
      chunk_bytes_(uint64_t{options.chunk_slots} *
                   (sizeof(uint64_t) + session->config().slot_size)),
      window_(window),
      poll_interval_(options.poll_initial) {}

ForwardReader::~ForwardReader() = default;

uint64_t* ForwardReader::commits_of(uint32_t chunk) const {
  return reinterpret_cast<uint64_t*>(memory_->data() + protocol::kCacheLine + chunk * chunk_bytes_);
}

uint8_t* ForwardReader::slots_of(uint32_t chunk) const {
  return memory_->data() + protocol::kCacheLine + chunk * chunk_bytes_ +
         uint64_t{options_.chunk_slots} * sizeof(uint64_t);
}

absl::Status ForwardReader::PostCursorRead() {
  ASSIGN_OR_RETURN(const verbs::RemoteRegion control, session_->Region(RegionKind::kControl));
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink_, (next_wr_id_++ << kChunkBits) | kCursorRead);
  wr.opcode = verbs::Opcode::kRead;
  wr.local = memory_->mr();
  wr.local_addr = memory_->data();
  wr.length = sizeof(protocol::ServerLine);
  wr.remote_addr = control.addr + offsetof(protocol::ControlBlock, server);
  wr.rkey = control.rkey;
  RETURN_IF_ERROR(session_->Post(absl::MakeConstSpan(&wr, 1), TrafficClass::kPolling));
  cursor_read_pending_ = true;
  return absl::OkStatus();
}

absl::Status ForwardReader::PostChunks() {
  const LayoutConfig& c = session_->config();
  // kFreshest jumps to the newest window; either policy skips what is
  // lapped (more than a ring behind: READing it would only spend the link
  // on slots that fail verification).
  const bool freshest = options_.policy == ForwardPolicy::kFreshest;
  const uint64_t behind_limit = freshest ? window_ : c.capacity;
  if (target_ > next_post_ + behind_limit) {
    const uint64_t resume = target_ - behind_limit;
    (freshest ? stats_.skipped_behind : stats_.overwritten) += resume - next_post_;
    next_post_ = resume;
    if (order_.empty()) next_ = std::max(next_, resume);  // nothing before it in flight
  }
  while (next_post_ < target_) {
    auto free_chunk =
        std::find_if(chunks_.begin(), chunks_.end(), [](const Chunk& ch) { return !ch.in_use; });
    if (free_chunk == chunks_.end()) return absl::OkStatus();
    const auto index = static_cast<uint32_t>(free_chunk - chunks_.begin());
    const uint64_t ring_index = protocol::SlotIndex(c, next_post_);
    const auto count = static_cast<uint32_t>(
        std::min<uint64_t>({options_.chunk_slots, target_ - next_post_, c.capacity - ring_index}));
    ASSIGN_OR_RETURN(const verbs::RemoteRegion commits, session_->Region(RegionKind::kCommits));
    ASSIGN_OR_RETURN(const verbs::RemoteRegion slots, session_->Region(RegionKind::kSlots));
    verbs::WorkRequest wrs[2];
    for (verbs::WorkRequest& wr : wrs) {
      wr.wr_id = ClientSession::WrId(sink_, (next_wr_id_++ << kChunkBits) | index);
      wr.opcode = verbs::Opcode::kRead;
      wr.local = memory_->mr();
    }
    // Commit words first, then the slots: the responder executes them in
    // order, so a slot READ after its commit word is at least that new.
    wrs[0].local_addr = commits_of(index);
    wrs[0].length = count * static_cast<uint32_t>(sizeof(uint64_t));
    wrs[0].remote_addr = commits.addr + ring_index * sizeof(uint64_t);
    wrs[0].rkey = commits.rkey;
    wrs[1].local_addr = slots_of(index);
    wrs[1].length = count * c.slot_size;
    wrs[1].remote_addr = slots.addr + ring_index * c.slot_size;
    wrs[1].rkey = slots.rkey;
    const TrafficClass classes[2] = {TrafficClass::kMetadata, TrafficClass::kExperience};
    const absl::Status status =
        session_->Post(absl::MakeConstSpan(wrs, 2), absl::MakeConstSpan(classes, 2));
    if (absl::IsResourceExhausted(status)) return absl::OkStatus();  // send queue full
    RETURN_IF_ERROR(status);
    *free_chunk = Chunk{next_post_, count, 2, true};
    order_.push_back(index);
    next_post_ += count;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ForwardReader::PollCompletions() {
  verbs::Completion completions[kPollBatch];
  const int n = session_->Poll(sink_, absl::MakeSpan(completions));
  for (int i = 0; i < n; ++i) {
    const verbs::Completion& c = completions[i];
    if (!c.ok()) return c.ToStatus();
    const uint64_t tag = ClientSession::WrIdPayload(c.wr_id) & ((1u << kChunkBits) - 1);
    stats_.bytes_read += c.byte_len;
    if (tag == kCursorRead) {
      cursor_read_pending_ = false;
      ++stats_.cursor_reads;
      protocol::ServerLine line;
      std::memcpy(&line, memory_->data(), sizeof(line));
      if (line.epoch != epoch_ || line.incarnation != incarnation_) {
        // Only a new connection sees another epoch; Resync handles it.
        continue;
      }
      if (line.ingest_cursor > target_) {
        target_ = line.ingest_cursor;
        poll_interval_ = options_.poll_initial;
      } else {
        poll_interval_ = std::min(poll_interval_ * 2, options_.poll_max);
      }
      next_cursor_read_ = absl::Now() + poll_interval_;
    } else if (tag < chunks_.size() && chunks_[tag].in_use) {
      --chunks_[tag].reads_pending;
    }
  }
  return n > 0;
}

void ForwardReader::Deliver(uint32_t index, std::vector<ForwardedTransition>* out) {
  const LayoutConfig& c = session_->config();
  const Chunk& chunk = chunks_[index];
  const uint64_t* commits = commits_of(index);
  const uint8_t* slots = slots_of(index);
  for (uint32_t i = 0; i < chunk.count; ++i) {
    const uint64_t q = chunk.first + i;
    const uint8_t* slot = slots + uint64_t{i} * c.slot_size;
    if (commits[i] == protocol::CommitValue(q)) {
      if (protocol::VerifySlot(slot, c.slot_size, q) == protocol::SlotCheck::kOk) {
        ForwardedTransition t;
        t.sequence = q;
        t.header = reinterpret_cast<const protocol::SlotHeader*>(slot);
        t.payload =
            absl::MakeConstSpan(slot + sizeof(protocol::SlotHeader), t.header->payload_length);
        out->push_back(t);
        ++stats_.transitions;
        if (q >= delivered_end_) {
          ++stats_.distinct_transitions_fetched;
          delivered_end_ = q + 1;
        }
      } else {
        ++stats_.overwritten;  // rewritten while the READs were in flight
      }
    } else if (commits[i] > protocol::CommitValue(q)) {
      ++stats_.overwritten;
    } else {
      ++stats_.skipped_uncommitted;
    }
  }
  next_ = chunk.first + chunk.count;
  stats_.transitions_fetched += chunk.count;
  ++stats_.chunks;
}

absl::Status ForwardReader::Resync() {
  for (Chunk& chunk : chunks_) chunk = Chunk{};
  order_.clear();
  handed_out_.clear();
  cursor_read_pending_ = false;
  generation_ = session_->generation();
  ASSIGN_OR_RETURN(const protocol::ServerLine line, session_->ReadServerLine());
  // A restarted server may run the epoch number again, never the
  // incarnation.
  if (line.epoch != epoch_ || line.incarnation != incarnation_) {
    ++stats_.epoch_changes;
    next_ = std::min(next_, line.ingest_cursor);
    epoch_ = line.epoch;
    incarnation_ = line.incarnation;
  }
  target_ = line.ingest_cursor;
  next_post_ = next_;
  return absl::OkStatus();
}

absl::Status ForwardReader::Recover(const absl::Status& failure) {
  if (!client::IsConnectionFailure(failure)) return failure;
  const uint64_t before = session_->generation();
  RETURN_IF_ERROR(session_->Reconnect(generation_, failure));
  if (session_->generation() != before) ++stats_.reconnects;
  return Resync();
}

absl::Status ForwardReader::Next(absl::Duration timeout, std::vector<ForwardedTransition>* out) {
  out->clear();
  for (uint32_t index : handed_out_) chunks_[index] = Chunk{};
  handed_out_.clear();
  if (generation_ != session_->generation()) {
    const absl::Status s = Resync();
    if (!s.ok()) RETURN_IF_ERROR(Recover(s));
  }
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  while (true) {
    absl::StatusOr<bool> polled = PollCompletions();
    absl::Status status = polled.status();
    const absl::Time now = absl::Now();
    if (status.ok() && !cursor_read_pending_ && next_post_ >= target_ && now >= next_cursor_read_) {
      status = PostCursorRead();
    }
    if (status.ok()) status = PostChunks();
    if (!status.ok()) {
      RETURN_IF_ERROR(Recover(status));
      continue;
    }
    while (!order_.empty() && chunks_[order_.front()].reads_pending == 0) {
      Deliver(order_.front(), out);
      handed_out_.push_back(order_.front());
      order_.pop_front();
    }
    if (!handed_out_.empty() || now >= deadline) return absl::OkStatus();
    if (!*polled && now - start > kSpinBeforeSleep) absl::SleepFor(kPollSleep);
  }
}

}  // namespace dreplay::learner
