// Copyright dreplay authors.

#include "learner_client/batch_reader.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::learner {

using client::ClientSession;
using protocol::LayoutConfig;
using protocol::RegionKind;

namespace {

constexpr uint64_t kMaxReadBytes = uint64_t{1} << 30;
constexpr int kPollBatch = 16;
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
      buffers_(depth) {}

BatchReader::~BatchReader() = default;

uint8_t* BatchReader::image(uint32_t b) const { return buffers_memory_->data() + b * stride_; }

absl::Status BatchReader::PostRead(uint64_t batch) {
  Buffer& b = buffers_[batch % depth_];
  CHECK(!b.outstanding) << "READ into a buffer with a READ in flight";
  b.batch = batch;
  ASSIGN_OR_RETURN(const verbs::RemoteRegion staging, session_->Region(RegionKind::kStaging));
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink_, batch);
  wr.opcode = verbs::Opcode::kRead;
  wr.signaled = true;
  wr.local = buffers_memory_->mr();
  wr.local_addr = image(static_cast<uint32_t>(batch % depth_));
  wr.length = static_cast<uint32_t>(stride_);
  wr.remote_addr = staging.addr + protocol::StagingSlotOffset(session_->config(), batch);
  wr.rkey = staging.rkey;
  const absl::Status status = session_->Post(absl::MakeConstSpan(&wr, 1));
  if (absl::IsResourceExhausted(status)) {  // send queue full: try again soon
    ScheduleRetry(&b, /*grow=*/false);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(status);
  b.state = State::kReading;
  b.outstanding = true;
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

absl::Status BatchReader::Check(Buffer* b) {
  const LayoutConfig& config = session_->config();
  const uint8_t* img = image(static_cast<uint32_t>(b->batch % depth_));
  const absl::Status status = protocol::CheckStagedBatch(config, img, b->batch, epoch_);
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
  if (options_.verify_slots) {
    const StagedBatch view(&config, img);
    for (uint32_t i = 0; i < view.size(); ++i) {
      if (protocol::VerifySlot(view.slot(i), config.slot_size, view.entry(i).slot_sequence) !=
          protocol::SlotCheck::kOk) {
        // The batch checksum held, so the server staged a bad copy: never
        // hand it over; READ again (a later staging of this number is not
        // expected, so this shows up as a stall and in the stats).
        ++stats_.bad_slots;
        ScheduleRetry(b, /*grow=*/true);
        return absl::OkStatus();
      }
    }
  }
  b->state = State::kReady;
  b->backoff = absl::ZeroDuration();
  return absl::OkStatus();
}

absl::StatusOr<bool> BatchReader::PollCompletions() {
  verbs::Completion completions[kPollBatch];
  const int n = session_->Poll(sink_, absl::MakeSpan(completions));
  for (int i = 0; i < n; ++i) {
    if (!completions[i].ok()) return completions[i].ToStatus();
    const uint64_t batch = ClientSession::WrIdPayload(completions[i].wr_id);
    Buffer& b = buffers_[batch % depth_];
    b.outstanding = false;
    if (b.batch != batch || b.state != State::kReading) continue;  // stale
    ++stats_.reads;
    stats_.bytes_read += stride_;
    RETURN_IF_ERROR(Check(&b));
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
        buffers_[ClientSession::WrIdPayload(completions[i].wr_id) % depth_].outstanding = false;
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
  const bool same_epoch = line.epoch == epoch_;
  if (epoch_ != 0 && !same_epoch) ++stats_.epoch_changes;
  if (!same_epoch) highest_returned_ = 0;
  if (same_epoch && line.batches_released < highest_returned_) {
    stats_.redelivered += highest_returned_ - line.batches_released;
    highest_returned_ = line.batches_released;
  }
  epoch_ = line.epoch;
  next_ = line.batches_released;
  release_pending_ = false;
  ++stats_.resyncs;
  for (uint32_t i = 0; i < depth_; ++i) RETURN_IF_ERROR(PostRead(next_ + i));
  return absl::OkStatus();
}

absl::Status BatchReader::Recover(const absl::Status& failure) {
  if (!client::IsConnectionFailure(failure)) return failure;
  const uint64_t before = session_->generation();
  RETURN_IF_ERROR(session_->Reconnect(generation_, failure));
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
    const absl::Time now = absl::Now();
    for (Buffer& b : buffers_) {
      if (b.state == State::kRetry && b.retry_at <= now) {
        const absl::Status s = PostRead(b.batch);
        if (!s.ok()) {
          RETURN_IF_ERROR(Recover(s));
          break;
        }
      }
    }
    Buffer& head = buffers_[next_ % depth_];
    if (head.state == State::kReady && head.batch == next_) {
      const StagedBatch batch(&session_->config(), image(static_cast<uint32_t>(next_ % depth_)));
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
