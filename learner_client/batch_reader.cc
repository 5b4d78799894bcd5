// Copyright dreplay authors.

#include "learner_client/batch_reader.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/thread_cpu.h"
#include "glog/logging.h"

namespace dreplay::learner {

using client::ClientSession;
using client::TrafficClass;
using protocol::LayoutConfig;
using protocol::RegionKind;

namespace {

constexpr uint64_t kMaxReadBytes = uint64_t{1} << 30;
// Work request ids: the batch number, then this bit for the batch READs
// (clear: the commit line READ).
constexpr int kPhaseBits = 1;
constexpr uint64_t kBatchPhase = 1;
constexpr int kPollBatch = 16;
// Commit lines in a row with sizes no batch has before the reader gives up.
constexpr int kMaxImpossibleLines = 3;
// Next() spins this long before it sleeps between polls.
constexpr absl::Duration kSpinBeforeSleep = absl::Microseconds(200);
constexpr absl::Duration kPollSleep = absl::Microseconds(20);

}  // namespace

absl::Status BatchReaderOptions::Validate() const {
  if (retry_initial <= absl::ZeroDuration() || retry_max < retry_initial) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchReaderOptions.retry_initial=", absl::FormatDuration(retry_initial),
                     " retry_max=", absl::FormatDuration(retry_max), ": need 0 < initial <= max"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BatchReader>> BatchReader::Create(
    ClientSession* session, const BatchReaderOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (session->options().role != protocol::Role::kLearner) {
    return absl::InvalidArgumentError("BatchReader needs a learner session");
  }
  const LayoutConfig& config = session->config();
  const uint32_t depth = options.depth == 0 ? config.staging_depth : options.depth;
  if (depth > config.staging_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchReaderOptions.depth=", options.depth,
                     " exceeds the server's staging_depth=", config.staging_depth));
  }
  const uint64_t stride = protocol::StagingSlotStride(config);
  if (stride > kMaxReadBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a staging slot of ", stride, " bytes exceeds the largest READ (", kMaxReadBytes, ")"));
  }
  ASSIGN_OR_RETURN(const int sink, session->AddSink());
  std::unique_ptr<BatchReader> reader(new BatchReader(session, options, sink, depth));
  ASSIGN_OR_RETURN(reader->buffers_memory_,
                   client::RegisteredBuffer::Create(session->provider(), depth * stride));
  if (const uint32_t codec = session->policy().link_codec; codec != 0) {
    static constexpr CodecKind kKinds[] = {CodecKind::kRaw, CodecKind::kLz4, CodecKind::kLz4Hc,
                                           CodecKind::kZstd};
    if (codec >= std::size(kKinds)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the server compresses batches with link codec ", codec,
                       ", which this learner does not know"));
    }
    CodecOptions options;
    options.kind = kKinds[codec];
    options.level = DefaultCodecLevel(options.kind);
    ASSIGN_OR_RETURN(reader->codec_, FrameCodec::Create(options));
    reader->unpacked_stride_ = uint64_t{protocol::StagingEntryCapacity(config)} * config.slot_size;
    reader->unpacked_.reset(new uint8_t[depth * reader->unpacked_stride_]);
  }
  if (options.learner_cache) {
    // Not zero-filled: only the slots the cache holds are ever read.
    reader->cache_slots_.reset(new uint8_t[uint64_t{config.capacity} * config.slot_size]);
    reader->cache_sequence_.assign(config.capacity, 0);
  }
  RETURN_IF_ERROR(reader->Resync());
  return reader;
}

BatchReader::BatchReader(ClientSession* session, const BatchReaderOptions& options, int sink,
                         uint32_t depth)
    : session_(session),
      options_(options),
      sink_(sink),
      depth_(depth),
      stride_(protocol::StagingSlotStride(session->config())),
      buffers_(depth),
      entries_(depth),
      records_(depth) {}

// Its memory is freed only once no request of its own still uses it.
BatchReader::~BatchReader() { session_->Settle(sink_); }

uint8_t* BatchReader::image(uint32_t b) const { return buffers_memory_->data() + b * stride_; }

absl::Status BatchReader::PostRead(uint64_t batch) {
  Buffer& b = buffers_[batch % depth_];
  CHECK(!b.outstanding) << "READ into a buffer with a READ in flight";
  b.batch = batch;
  const LayoutConfig& config = session_->config();
  ASSIGN_OR_RETURN(const verbs::RemoteRegion staging, session_->Region(RegionKind::kStaging));
  const uint64_t line_offset = protocol::StagingCommitOffset(config);
  // Nothing of an older batch may pass for this one.
  std::memset(image(static_cast<uint32_t>(batch % depth_)) + line_offset, 0,
              sizeof(protocol::CommitLine));
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink_, batch << kPhaseBits);
  wr.opcode = verbs::Opcode::kRead;
  wr.signaled = true;
  wr.local = buffers_memory_->mr();
  wr.local_addr = image(static_cast<uint32_t>(batch % depth_)) + line_offset;
  wr.length = sizeof(protocol::CommitLine);
  wr.remote_addr = staging.addr + protocol::StagingSlotOffset(config, batch) + line_offset;
  wr.rkey = staging.rkey;
  const absl::Status status = session_->Post(absl::MakeConstSpan(&wr, 1), TrafficClass::kPolling);
  if (absl::IsResourceExhausted(status)) {  // send queue full: try again soon
    ScheduleRetry(&b, /*grow=*/false);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(status);
  b.state = State::kPolling;
  b.outstanding = true;
  return absl::OkStatus();
}

absl::Status BatchReader::PostBatchRead(Buffer* b) {
  const LayoutConfig& config = session_->config();
  ASSIGN_OR_RETURN(const verbs::RemoteRegion staging, session_->Region(RegionKind::kStaging));
  uint8_t* img = image(static_cast<uint32_t>(b->batch % depth_));
  const uint64_t remote = staging.addr + protocol::StagingSlotOffset(config, b->batch);
  const uint64_t payloads = protocol::StagingPayloadsOffset(config);
  // Header and the entries used (metadata), then the copied slots
  // (experience): RC executes them in order, so the last one's completion
  // covers both.
  verbs::WorkRequest wrs[2];
  const TrafficClass classes[2] = {TrafficClass::kMetadata, TrafficClass::kExperience};
  const int n = b->used_bytes > payloads ? 2 : 1;
  for (int i = 0; i < n; ++i) {
    verbs::WorkRequest& wr = wrs[i];
    wr.wr_id = ClientSession::WrId(sink_, (b->batch << kPhaseBits) | kBatchPhase);
    wr.opcode = verbs::Opcode::kRead;
    wr.signaled = i == n - 1;
    wr.local = buffers_memory_->mr();
    const uint64_t begin = i == 0 ? 0 : payloads;
    const uint64_t end =
        i == 0 ? protocol::StagingEntriesOffset(config) + b->entry_bytes : b->used_bytes;
    wr.local_addr = img + begin;
    wr.length = static_cast<uint32_t>(end - begin);
    wr.remote_addr = remote + begin;
    wr.rkey = staging.rkey;
  }
  const absl::Status status =
      session_->Post(absl::MakeConstSpan(wrs, n), absl::MakeConstSpan(classes, n));
  if (absl::IsResourceExhausted(status)) {
    ScheduleRetry(b, /*grow=*/false);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(status);
  b->state = State::kReading;
  b->outstanding = true;
  return absl::OkStatus();
}

void BatchReader::ScheduleRetry(Buffer* b, bool grow) {
  b->state = State::kRetry;
  if (grow && b->backoff > absl::ZeroDuration()) {
    b->backoff = std::min(b->backoff * 2, options_.retry_max);
  } else {
    b->backoff = options_.retry_initial;
  }
  b->retry_at = absl::Now() + b->backoff;
}

absl::Status BatchReader::CheckLine(Buffer* b) {
  const LayoutConfig& config = session_->config();
  protocol::CommitLine line;
  std::memcpy(
      &line,
      image(static_cast<uint32_t>(b->batch % depth_)) + protocol::StagingCommitOffset(config),
      sizeof(line));
  if (line.commit > protocol::BatchCommitValue(b->batch)) {
    // A later batch in this slot: the server released b->batch without its
    // update and reused the slot. It is never staged again; Next() resyncs.
    b->state = State::kIdle;
    superseded_ = true;
    return absl::OkStatus();
  }
  const absl::StatusOr<uint64_t> used = protocol::StagedBatchBytes(config, line, b->batch);
  if (absl::IsUnavailable(used.status())) {
    ++stats_.not_staged;
    ScheduleRetry(b, /*grow=*/true);
    return absl::OkStatus();
  }
  if (!used.ok()) {
    // DataLoss: a value no batch has. READ again a few times (the line may
    // have been read while memory was being changed under it), then give up:
    // waiting would only end in "not staged".
    ++stats_.torn;
    if (++b->impossible_lines >= kMaxImpossibleLines) {
      return absl::DataLossError(
          absl::StrCat("the server's staging slot for batch ", b->batch, " is impossible ",
                       b->impossible_lines, " times in a row: ", used.status().message(),
                       " (not a dreplay server of this layout, or its memory is corrupt)"));
    }
    ScheduleRetry(b, /*grow=*/false);
    return absl::OkStatus();
  }
  b->impossible_lines = 0;
  b->used_bytes = *used;
  b->entry_bytes = line.entry_bytes;
  return PostBatchRead(b);
}

uint64_t BatchReader::BytesRead(const Buffer& b) const {
  const LayoutConfig& config = session_->config();
  return protocol::StagingEntriesOffset(config) + b.entry_bytes + b.used_bytes -
         protocol::StagingPayloadsOffset(config);
}

absl::Status BatchReader::Check(Buffer* b) {
  const LayoutConfig& config = session_->config();
  const uint8_t* img = image(static_cast<uint32_t>(b->batch % depth_));
  const auto& header = *reinterpret_cast<const protocol::BatchHeader*>(img);
  absl::Status status = protocol::CheckBatchImage(config, img, b->used_bytes, b->batch, epoch_);
  if (status.ok() && (uint64_t{header.count} + header.record_count) * sizeof(protocol::BatchEntry) >
                         b->entry_bytes) {
    status = absl::DataLossError("more entries than the commit line said (torn read)");
  }
  if (absl::IsUnavailable(status)) {
    ++stats_.not_staged;
    ScheduleRetry(b, /*grow=*/true);
    return absl::OkStatus();
  }
  if (absl::IsDataLoss(status)) {
    ++stats_.torn;
    ScheduleRetry(b, /*grow=*/false);
    return absl::OkStatus();
  }
  if (!status.ok()) return status;  // FailedPrecondition: another epoch
  if (header.incarnation != incarnation_) {
    return absl::FailedPreconditionError(
        absl::StrCat("staged batch ", b->batch, " is of server incarnation ", header.incarnation,
                     ", expected ", incarnation_));
  }
  if (!Unpack(b)) {
    // The checksum held, so the server staged a block that does not
    // decompress: never hand it over (counted as a bad slot).
    ++stats_.bad_slots;
    ScheduleRetry(b, /*grow=*/true);
    return absl::OkStatus();
  }
  if (options_.verify_slots) {
    const auto* entries =
        reinterpret_cast<const protocol::BatchEntry*>(img + protocol::StagingEntriesOffset(config));
    const uint8_t* slot = payloads(BufferIndex(b));
    // CheckBatchImage bounded count + record_count by the entry capacity.
    for (uint32_t i = 0; i < header.count + header.record_count; ++i) {
      if (protocol::EntryCached(entries[i])) continue;
      if (protocol::VerifySlot(slot, config.slot_size, entries[i].slot_sequence) !=
          protocol::SlotCheck::kOk) {
        // The batch checksum held, so the server staged a bad copy: never
        // hand it over; READ again (a later staging of this number is not
        // expected, so this shows up as a stall and in the stats).
        ++stats_.bad_slots;
        ScheduleRetry(b, /*grow=*/true);
        return absl::OkStatus();
      }
      slot += config.slot_size;
    }
  }
  b->state = State::kReady;
  b->backoff = absl::ZeroDuration();
  return absl::OkStatus();
}

uint32_t BatchReader::BufferIndex(const Buffer* buffer) const {
  return static_cast<uint32_t>(buffer - buffers_.data());
}

const uint8_t* BatchReader::payloads(uint32_t b) const {
  const uint8_t* img = image(b);
  const auto& header = *reinterpret_cast<const protocol::BatchHeader*>(img);
  if (header.packed_bytes != 0) return unpacked_.get() + b * unpacked_stride_;
  return img + protocol::StagingPayloadsOffset(session_->config());
}

bool BatchReader::Unpack(Buffer* buffer) {
  const uint32_t b = BufferIndex(buffer);
  const uint8_t* img = image(b);
  const auto& header = *reinterpret_cast<const protocol::BatchHeader*>(img);
  if (header.packed_bytes == 0) return true;
  if (codec_ == nullptr) return false;  // the server's policy names no codec
  const protocol::LayoutConfig& config = session_->config();
  const uint64_t cpu_before = ThreadCpuNanos();
  const absl::Status s = codec_->Decompress(
      absl::MakeConstSpan(img + protocol::StagingPayloadsOffset(config), header.packed_bytes),
      absl::MakeSpan(unpacked_.get() + b * unpacked_stride_,
                     uint64_t{header.payload_count} * config.slot_size));
  stats_.unpack_cpu_ns += ThreadCpuNanos() - cpu_before;
  if (!s.ok()) {
    LOG_EVERY_N(WARNING, 1000) << "staged batch " << buffer->batch << " (" << google::COUNTER
                               << " so far): " << s;
    return false;
  }
  stats_.unpacked_bytes += uint64_t{header.payload_count} * config.slot_size;
  return true;
}

const uint8_t* StagedBatch::cached_slot(uint64_t index, uint64_t sequence) const {
  if (index >= cache_.capacity || cache_.sequences[index] != protocol::CommitValue(sequence)) {
    return nullptr;
  }
  return cache_.slots + index * cache_.slot_size;
}

const uint8_t* BatchReader::cached_slot(uint64_t index, uint64_t sequence) const {
  if (index >= cache_sequence_.size() ||
      cache_sequence_[index] != protocol::CommitValue(sequence)) {
    return nullptr;
  }
  return cache_slots_.get() + index * session_->config().slot_size;
}

void BatchReader::Resolve(uint32_t b) {
  const LayoutConfig& config = session_->config();
  const uint8_t* img = image(b);
  const auto& header = *reinterpret_cast<const protocol::BatchHeader*>(img);
  const auto* staged =
      reinterpret_cast<const protocol::BatchEntry*>(img + protocol::StagingEntriesOffset(config));
  const uint32_t count = std::min(header.count, config.batch_size);
  const uint32_t all =
      std::min(count + header.record_count, protocol::StagingEntryCapacity(config));
  std::vector<StagedEntry>& out = entries_[b];
  out.clear();
  records_[b].clear();
  // The weights of every transition as staged, before misses are left out.
  weights_.resize(count);
  protocol::StagedWeights(absl::MakeConstSpan(staged, count), header.beta,
                          absl::MakeSpan(weights_));
  // The arrived slots first: they are new in the cache before any reference
  // of this batch is looked up (a batch never holds two sequences of one
  // index: it is sampled from one state of the memory).
  const uint8_t* slot = payloads(b);
  for (uint32_t i = 0; i < all; ++i) {
    if (protocol::EntryCached(staged[i])) continue;
    const uint32_t index = protocol::EntryIndex(staged[i]);
    const uint64_t value = protocol::CommitValue(staged[i].slot_sequence);
    if (i < count) {
      ++stats_.transitions_fetched;
      uint64_t& seen = fetched_[index];
      if (value > seen) {
        ++stats_.distinct_transitions_fetched;
        seen = value;
      }
    } else {
      ++stats_.records_fetched;
    }
    if (!cache_sequence_.empty() && index < config.capacity) {
      std::memcpy(cache_slots_.get() + uint64_t{index} * config.slot_size, slot, config.slot_size);
      cache_sequence_[index] = value;
    }
    slot += config.slot_size;
  }
  slot = payloads(b);
  for (uint32_t i = 0; i < all; ++i) {
    StagedEntry e;
    e.entry = staged[i];
    e.entry.slot_index = protocol::EntryIndex(staged[i]);
    if (i < count) e.weight = weights_[i];
    if (!protocol::EntryCached(staged[i])) {
      e.slot = slot;
      e.arrived = true;
      slot += config.slot_size;
    } else {
      const uint32_t index = e.entry.slot_index;
      if (cache_sequence_.empty() || index >= config.capacity ||
          cache_sequence_[index] != protocol::CommitValue(e.entry.slot_sequence)) {
        ++stats_.cache_misses;  // never a stale payload: leave it out
        continue;
      }
      ++stats_.cache_hits;
      e.slot = cache_slots_.get() + uint64_t{index} * config.slot_size;
    }
    (i < count ? out : records_[b]).push_back(e);
  }
}

absl::StatusOr<bool> BatchReader::PollCompletions() {
  verbs::Completion completions[kPollBatch];
  const int n = session_->Poll(sink_, absl::MakeSpan(completions));
  for (int i = 0; i < n; ++i) {
    if (!completions[i].ok()) return completions[i].ToStatus();
    const uint64_t payload = ClientSession::WrIdPayload(completions[i].wr_id);
    const uint64_t batch = payload >> kPhaseBits;
    const bool batch_phase = (payload & kBatchPhase) != 0;
    Buffer& b = buffers_[batch % depth_];
    b.outstanding = false;
    const State expected = batch_phase ? State::kReading : State::kPolling;
    if (b.batch != batch || b.state != expected) continue;  // stale
    ++stats_.reads;
    if (batch_phase) {
      stats_.bytes_read += BytesRead(b);
      RETURN_IF_ERROR(Check(&b));
    } else {
      ++stats_.polls;
      stats_.bytes_read += sizeof(protocol::CommitLine);
      RETURN_IF_ERROR(CheckLine(&b));
    }
  }
  return n > 0;
}

absl::Status BatchReader::Resync() {
  if (generation_ == session_->generation()) {
    // Same connection: READs still in flight must land before their buffers
    // are reused.
    const absl::Time deadline = absl::Now() + session_->options().op_timeout;
    verbs::Completion completions[kPollBatch];
    while (std::any_of(buffers_.begin(), buffers_.end(),
                       [](const Buffer& b) { return b.outstanding; })) {
      const int n = session_->Poll(sink_, absl::MakeSpan(completions));
      for (int i = 0; i < n; ++i) {
        if (!completions[i].ok()) return completions[i].ToStatus();
        const uint64_t batch = ClientSession::WrIdPayload(completions[i].wr_id) >> kPhaseBits;
        buffers_[batch % depth_].outstanding = false;
      }
      if (n == 0 && absl::Now() > deadline) {
        return absl::DeadlineExceededError("staging READs did not complete");
      }
    }
  }
  // A new connection has none of the old READs.
  for (Buffer& b : buffers_) b = Buffer{};
  generation_ = session_->generation();
  ASSIGN_OR_RETURN(const protocol::ServerLine line, session_->ReadServerLine());
  // A restarted server may run the epoch number again, never the
  // incarnation.
  const bool same_epoch = line.epoch == epoch_ && line.incarnation == incarnation_;
  if (epoch_ != 0 && !same_epoch) ++stats_.epoch_changes;
  if (!same_epoch) highest_returned_ = 0;
  // A restored server may write other records under sequences the cache
  // holds (those after its checkpoint): none is served again.
  if (!same_epoch && !cache_sequence_.empty()) {
    std::fill(cache_sequence_.begin(), cache_sequence_.end(), 0);
    ++cache_generation_;
  }
  if (same_epoch && line.batches_released < highest_returned_) {
    stats_.redelivered += highest_returned_ - line.batches_released;
    highest_returned_ = line.batches_released;
  }
  if (same_epoch && line.batches_released > next_) {
    stats_.superseded += line.batches_released - next_;
  }
  epoch_ = line.epoch;
  incarnation_ = line.incarnation;
  next_ = line.batches_released;
  release_pending_ = false;
  superseded_ = false;
  ++stats_.resyncs;
  for (uint32_t i = 0; i < depth_; ++i) RETURN_IF_ERROR(PostRead(next_ + i));
  return absl::OkStatus();
}

absl::Status BatchReader::Recover(const absl::Status& failure) {
  if (!client::IsConnectionFailure(failure)) return failure;
  const uint64_t before = session_->generation();
  const absl::Status reconnected = session_->Reconnect(generation_, failure);
  if (absl::IsDeadlineExceeded(reconnected)) {
    // Still disconnected: a connection failure, not Next()'s "not staged in
    // time" (which a caller would wait out without reconnecting again).
    return absl::UnavailableError(reconnected.message());
  }
  RETURN_IF_ERROR(reconnected);
  if (session_->generation() != before) ++stats_.reconnects;
  return Resync();
}

absl::StatusOr<StagedBatch> BatchReader::Next(absl::Duration timeout) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  if (generation_ != session_->generation()) {
    absl::Status s = Resync();
    if (!s.ok()) RETURN_IF_ERROR(Recover(s));
  }
  if (release_pending_) {
    release_pending_ = false;
    const uint64_t done = next_ - 1;
    buffers_[done % depth_].state = State::kIdle;
    const absl::Status s = PostRead(done + depth_);
    if (!s.ok()) RETURN_IF_ERROR(Recover(s));
  }
  while (true) {
    absl::StatusOr<bool> polled = PollCompletions();
    if (absl::IsFailedPrecondition(polled.status())) {
      // A staged batch of another epoch: the server restarted.
      LOG(INFO) << "batch reader: " << polled.status().message() << "; resynchronising";
      absl::Status s = Resync();
      if (!s.ok()) RETURN_IF_ERROR(Recover(s));
      continue;
    }
    if (!polled.ok()) {
      RETURN_IF_ERROR(Recover(polled.status()));
      continue;
    }
    if (superseded_) {
      // The server released a batch this reader waits for (its update
      // timeout): continue from batches_released.
      VLOG(1) << "batch reader: a batch from " << next_ << " on was superseded; resynchronising";
      absl::Status s = Resync();
      if (!s.ok()) RETURN_IF_ERROR(Recover(s));
      continue;
    }
    const absl::Time now = absl::Now();
    // The server stages batches in order, so a batch cannot be staged before
    // a lower one: only the lowest batch waiting for a retry polls, the
    // others follow once it has been seen (a limiter holding the learner
    // back then costs one poll at a time, not one per buffer).
    uint64_t lowest_retry = UINT64_MAX;
    for (const Buffer& b : buffers_) {
      if (b.state == State::kRetry) lowest_retry = std::min(lowest_retry, b.batch);
    }
    for (Buffer& b : buffers_) {
      if (b.state == State::kRetry && b.batch == lowest_retry && b.retry_at <= now) {
        const absl::Status s = PostRead(b.batch);
        if (!s.ok()) {
          RETURN_IF_ERROR(Recover(s));
          break;
        }
      }
    }
    Buffer& head = buffers_[next_ % depth_];
    if (head.state == State::kReady && head.batch == next_) {
      const auto b = static_cast<uint32_t>(next_ % depth_);
      Resolve(b);
      StagedBatch::CacheView cache;
      if (!cache_sequence_.empty()) {
        cache = {cache_slots_.get(), cache_sequence_.data(), cache_sequence_.size(),
                 session_->config().slot_size};
      }
      const StagedBatch batch(image(b), entries_[b], records_[b], cache);
      ++next_;
      highest_returned_ = std::max(highest_returned_, next_);
      release_pending_ = true;
      ++stats_.batches;
      stats_.transitions += batch.size();
      return batch;
    }
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("batch ", next_, " of epoch ", epoch_,
                                                      " was not staged within ",
                                                      absl::FormatDuration(timeout)));
    }
    if (!*polled && now - start > kSpinBeforeSleep) absl::SleepFor(kPollSleep);
  }
}

}  // namespace dreplay::learner
