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
constexpr uint64_t kJournalRead = (1u << kChunkBits) - 2;
// Journal entries per READ.
constexpr uint32_t kJournalBatch = 256;
constexpr uint64_t kJournalBufferBytes = kJournalBatch * sizeof(protocol::JournalEntry);
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
  if (busy_poll_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ForwardReaderOptions.busy_poll_interval=", absl::FormatDuration(busy_poll_interval),
        " must be >= 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ForwardReader>> ForwardReader::Create(
    ClientSession* session, const ForwardReaderOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (session->options().role != protocol::Role::kLearner) {
    return absl::InvalidArgumentError("ForwardReader needs a learner session");
  }
  if (!session->options().learner_placement) {
    return absl::FailedPreconditionError(
        "ForwardReader needs a session opened for the learner placement "
        "(ClientSessionOptions::learner_placement): without it the server grants no key to the "
        "slots, commit words or forward journal");
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
  RETURN_IF_ERROR(session->Region(RegionKind::kLeases).status());
  ASSIGN_OR_RETURN(r->memory_, client::RegisteredBuffer::Create(
                                   session->provider(),
                                   protocol::kCacheLine + kJournalBufferBytes +
                                       uint64_t{options.max_chunks_in_flight} * r->chunk_bytes_));
  r->chunks_.resize(options.max_chunks_in_flight);
  ASSIGN_OR_RETURN(const protocol::ServerLine line, session->ReadServerLine());
  r->generation_ = session->generation();
  r->epoch_ = line.epoch;
  r->incarnation_ = line.incarnation;
  r->journal_target_ = line.journal_end;
  r->journal_next_ = line.journal_end;
  r->server_ingested_ = line.ingest_cursor;
  if (options.from_oldest) {
    r->journal_next_ = line.journal_end > protocol::kJournalEntries
                           ? line.journal_end - protocol::kJournalEntries
                           : 0;
  }
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

// Its memory is freed only once no request of its own still uses it.
ForwardReader::~ForwardReader() { session_->Settle(sink_); }

uint64_t* ForwardReader::commits_of(uint32_t chunk) const {
  return reinterpret_cast<uint64_t*>(memory_->data() + protocol::kCacheLine + kJournalBufferBytes +
                                     chunk * chunk_bytes_);
}

uint8_t* ForwardReader::slots_of(uint32_t chunk) const {
  return memory_->data() + protocol::kCacheLine + kJournalBufferBytes + chunk * chunk_bytes_ +
         uint64_t{options_.chunk_slots} * sizeof(uint64_t);
}

protocol::JournalEntry* ForwardReader::journal_buffer() const {
  return reinterpret_cast<protocol::JournalEntry*>(memory_->data() + protocol::kCacheLine);
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
  last_cursor_post_ = absl::Now();
  return absl::OkStatus();
}

absl::Status ForwardReader::PostJournalRead() {
  const LayoutConfig& c = session_->config();
  // The server overwrites entries older than a journal's length: those are
  // lost (kInOrder), or jumped over when too far behind (kFreshest).
  const bool freshest = options_.policy == ForwardPolicy::kFreshest;
  const uint64_t behind_limit =
      freshest ? protocol::kJournalEntries / 2 : protocol::kJournalEntries;
  if (journal_target_ > journal_next_ + behind_limit) {
    const uint64_t resume =
        journal_target_ - (freshest ? protocol::kJournalEntries / 4 : protocol::kJournalEntries);
    (freshest ? stats_.skipped_behind : stats_.journal_entries_lost) += resume - journal_next_;
    journal_next_ = resume;
  }
  const uint64_t ring_position = journal_next_ % protocol::kJournalEntries;
  const auto count = static_cast<uint32_t>(std::min<uint64_t>(
      {kJournalBatch, journal_target_ - journal_next_, protocol::kJournalEntries - ring_position}));
  ASSIGN_OR_RETURN(const verbs::RemoteRegion leases, session_->Region(RegionKind::kLeases));
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink_, (next_wr_id_++ << kChunkBits) | kJournalRead);
  wr.opcode = verbs::Opcode::kRead;
  wr.local = memory_->mr();
  wr.local_addr = journal_buffer();
  wr.length = count * static_cast<uint32_t>(sizeof(protocol::JournalEntry));
  wr.remote_addr = leases.addr + protocol::JournalEntryOffset(c, journal_next_);
  wr.rkey = leases.rkey;
  const absl::Status status = session_->Post(absl::MakeConstSpan(&wr, 1), TrafficClass::kMetadata);
  if (absl::IsResourceExhausted(status)) return absl::OkStatus();  // send queue full
  RETURN_IF_ERROR(status);
  journal_read_first_ = journal_next_;
  journal_read_count_ = count;
  journal_next_ += count;
  return absl::OkStatus();
}

void ForwardReader::TakeJournal() {
  const LayoutConfig& c = session_->config();
  const protocol::JournalEntry* entries = journal_buffer();
  for (uint32_t i = 0; i < journal_read_count_; ++i) {
    const protocol::JournalEntry& e = entries[i];
    // An entry being rewritten, or already the next lap's, is lost.
    if (e.number != journal_read_first_ + i || e.lease >= c.leases || e.count == 0 ||
        e.count > protocol::LeaseSlots(c)) {
      ++stats_.journal_entries_lost;
      continue;
    }
    runs_.push_back(Run{e.lease, e.first_sequence, e.count});
    queued_ += e.count;
  }
  journal_read_count_ = 0;
  if (options_.policy == ForwardPolicy::kFreshest) {
    // Keep the newest window_ sequences of what is queued.
    while (queued_ > window_) {
      Run& oldest = runs_.front();
      const uint64_t drop = std::min<uint64_t>(oldest.count, queued_ - window_);
      oldest.first += drop;
      oldest.count -= drop;
      queued_ -= drop;
      stats_.skipped_sequences += drop;
      if (oldest.count == 0) runs_.pop_front();
    }
  }
  ++stats_.journal_reads;
}

absl::Status ForwardReader::PostChunks() {
  const LayoutConfig& c = session_->config();
  const uint64_t lease_slots = protocol::LeaseSlots(c);
  while (!runs_.empty()) {
    auto free_chunk =
        std::find_if(chunks_.begin(), chunks_.end(), [](const Chunk& ch) { return !ch.in_use; });
    if (free_chunk == chunks_.end()) return absl::OkStatus();
    const auto index = static_cast<uint32_t>(free_chunk - chunks_.begin());
    Run& run = runs_.front();
    const uint64_t ring_index = protocol::LeaseSlotIndex(c, run.lease, run.first);
    const auto count = static_cast<uint32_t>(std::min<uint64_t>(
        {options_.chunk_slots, run.count, lease_slots - run.first % lease_slots}));
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
    *free_chunk = Chunk{run.lease, run.first, count, forward_post_, 2, true};
    order_.push_back(index);
    forward_post_ += count;
    run.first += count;
    run.count -= count;
    queued_ -= count;
    if (run.count == 0) runs_.pop_front();
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
      server_ingested_ = line.ingest_cursor;
      if (line.journal_end > journal_target_) {
        journal_target_ = line.journal_end;
        poll_interval_ = options_.poll_initial;
      } else {
        poll_interval_ = std::min(poll_interval_ * 2, options_.poll_max);
      }
      next_cursor_read_ = absl::Now() + poll_interval_;
    } else if (tag == kJournalRead) {
      TakeJournal();
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
        t.sequence = chunk.forward_first + i;
        t.lease = chunk.lease;
        t.lease_sequence = q;
        t.header = reinterpret_cast<const protocol::SlotHeader*>(slot);
        t.payload =
            absl::MakeConstSpan(slot + sizeof(protocol::SlotHeader), t.header->payload_length);
        out->push_back(t);
        ++stats_.transitions;
        ++stats_.distinct_transitions_fetched;
      } else {
        ++stats_.overwritten;  // rewritten while the READs were in flight
      }
    } else if (commits[i] > protocol::CommitValue(q)) {
      ++stats_.overwritten;
    } else {
      ++stats_.skipped_uncommitted;
    }
  }
  forward_next_ = chunk.forward_first + chunk.count;
  stats_.transitions_fetched += chunk.count;
  ++stats_.chunks;
}

absl::Status ForwardReader::Resync() {
  for (Chunk& chunk : chunks_) chunk = Chunk{};
  order_.clear();
  handed_out_.clear();
  // A journal READ that did not complete is made again; runs taken from
  // the journal but not READ yet are dropped with the connection.
  if (journal_read_count_ > 0) journal_next_ = journal_read_first_;
  runs_.clear();
  queued_ = 0;
  journal_read_count_ = 0;
  forward_post_ = forward_next_;
  cursor_read_pending_ = false;
  generation_ = session_->generation();
  ASSIGN_OR_RETURN(const protocol::ServerLine line, session_->ReadServerLine());
  // A restarted server may run the epoch number again, never the
  // incarnation.
  if (line.epoch != epoch_ || line.incarnation != incarnation_) {
    ++stats_.epoch_changes;
    journal_next_ = std::min(journal_next_, line.journal_end);
    epoch_ = line.epoch;
    incarnation_ = line.incarnation;
  }
  journal_target_ = line.journal_end;
  server_ingested_ = line.ingest_cursor;
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
    const bool caught_up =
        journal_next_ >= journal_target_ && journal_read_count_ == 0 && runs_.empty();
    if (status.ok() && !cursor_read_pending_ &&
        (caught_up ? now >= next_cursor_read_
                   : now >= last_cursor_post_ + options_.busy_poll_interval)) {
      status = PostCursorRead();
    }
    if (status.ok() && journal_read_count_ == 0 && journal_next_ < journal_target_) {
      status = PostJournalRead();
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
