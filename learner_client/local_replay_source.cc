// Copyright dreplay authors.

#include "learner_client/local_replay_source.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dreplay::learner {

absl::StatusOr<std::unique_ptr<LocalReplaySource>> LocalReplaySource::Create(
    const LearnerLoopOptions& options, TransitionStream* stream,
    const ReplaySourceContext& context) {
  RETURN_IF_ERROR(LocalLimiterOptions(options).Validate(options.batch_size));
  ASSIGN_OR_RETURN(std::unique_ptr<replay::ReplayMemory> memory,
                   replay::ReplayMemory::Create(options.memory));
  return std::unique_ptr<LocalReplaySource>(
      new LocalReplaySource(options, stream, context, std::move(memory)));
}

LocalReplaySource::LocalReplaySource(const LearnerLoopOptions& options, TransitionStream* stream,
                                     const ReplaySourceContext& context,
                                     std::unique_ptr<replay::ReplayMemory> memory)
    : beta_(options.beta),
      batch_size_(options.batch_size),
      stream_(stream),
      context_(context),
      payload_size_(rl::EncodedTransitionSize(context.observation_size, context.observation_type)),
      limiter_(LocalLimiterOptions(options)),
      memory_(std::move(memory)),
      ring_(context.frame_stack > 0 ? 0 : memory_->capacity() * payload_size_),
      insert_ns_(memory_->capacity(), 0),
      unused_(memory_->capacity(), 0),
      items_(options.batch_size) {
  // Where the stream starts forwarding: counting starts there too.
  generated_seen_ = stream->generated();
  if (context.frame_stack > 0) {
    const auto frame_bytes = static_cast<size_t>(context.observation_size / context.frame_stack);
    if (stream->keeps_records()) {
      forwarded_ = std::make_unique<ForwardedFrameIndex>(
          memory_->capacity(), context.frame_stack, frame_bytes,
          [stream](uint32_t lease, uint64_t sequence) {
            return stream->HeldRecord(lease, sequence);
          });
    } else {
      frames_ =
          std::make_unique<LocalFrameStore>(memory_->capacity(), context.frame_stack, frame_bytes);
    }
  }
}

absl::Status LocalReplaySource::AcceptRecords() {
  context_.metrics->RecordArrived(arrivals_.size());
  const uint64_t mask = memory_->capacity() - 1;
  for (const ForwardedItem& item : arrivals_) {
    // Numbered by arrival, not by item.sequence (which skips what was lost
    // on the way): the store needs its ring overwritten in arrival order.
    const uint64_t sequence = records_arrived_++;
    const uint64_t index = sequence & mask;
    bool insert = false;
    absl::Status s;
    if (forwarded_ != nullptr) {
      if (memory_->valid(index)) memory_->Remove(index);  // the arrival takes its slot
      s = forwarded_->Accept(index, stream_->records_generation(), item.lease, item.lease_sequence,
                             item.payload, &insert);
    } else {
      s = frames_->Accept(index, sequence, stream_->records_generation(), item.lease,
                          item.lease_sequence, item.payload, memory_.get(), &insert);
    }
    if (!s.ok()) {
      drops_.Count(1, absl::StrCat("forwarded record ", item.lease_sequence, " of lease ",
                                   item.lease, ": ", s.message()));
      continue;
    }
    if (!insert) continue;
    insert_ns_[index] = item.insert_time_ns;
    unused_[index] = 1;
    memory_->Insert(index, sequence, item.initial_priority);
  }
  return absl::OkStatus();
}

absl::Status LocalReplaySource::Accept() {
  if (!stream_->generated().has_value()) limiter_.Inserted(arrivals_.size());
  if (frames_ != nullptr || forwarded_ != nullptr) return AcceptRecords();
  kept_arrivals_.clear();
  for (const ForwardedItem& item : arrivals_) {
    // The encoding, without the actor's padding, is what is stored.
    const absl::StatusOr<absl::Span<const uint8_t>> encoded =
        rl::EncodedTransitionPrefix(item.payload);
    if (!encoded.ok() || encoded->size() != payload_size_) {
      drops_.Count(
          1, absl::StrCat("forwarded transition ", item.sequence, " of ", item.payload.size(),
                          " bytes does not start with a transition of ", payload_size_, " bytes"));
      continue;
    }
    absl::Status usable = rl::DecodeTransition(*encoded, context_.observation_size, &scratch_,
                                               context_.observation_type);
    if (usable.ok()) usable = rl::CheckTrainable(scratch_, context_.action_count);
    if (!usable.ok()) {
      drops_.Count(1, absl::StrCat("forwarded transition ", item.sequence, ": ", usable.message()));
      continue;
    }
    kept_arrivals_.push_back(item);
  }
  arrivals_.swap(kept_arrivals_);
  context_.metrics->RecordArrived(arrivals_.size());
  const uint64_t mask = memory_->capacity() - 1;
  for (const ForwardedItem& item : arrivals_) {
    const uint64_t index = item.sequence & mask;
    std::memcpy(ring_.data() + index * payload_size_, item.payload.data(), payload_size_);
    insert_ns_[index] = item.insert_time_ns;
    unused_[index] = 1;
    memory_->Insert(index, item.sequence, item.initial_priority);
  }
  return absl::OkStatus();
}

absl::Status LocalReplaySource::Receive(absl::Duration timeout) {
  RETURN_IF_ERROR(stream_->Next(timeout, &arrivals_));
  if (const std::optional<uint64_t> seen = stream_->generated(); seen.has_value()) {
    // A restarted server may count again from lower: from there on.
    if (generated_seen_.has_value() && *seen > *generated_seen_) {
      limiter_.Inserted(*seen - *generated_seen_);
    }
    generated_seen_ = *seen;
  }
  return arrivals_.empty() ? absl::OkStatus() : Accept();
}

absl::StatusOr<bool> LocalReplaySource::Next(absl::Duration timeout, rl::TransitionBatch* batch,
                                             std::vector<float>* weights) {
  const bool ready = limiter_.CanSample(batch_size_, memory_->size());
  RETURN_IF_ERROR(Receive(ready ? absl::ZeroDuration() : timeout));
  if (!limiter_.CanSample(batch_size_, memory_->size())) return false;

  const double beta = beta_.At(batches_sampled_++);
  sampled_count_ = memory_->SampleBatch(batch_size_, beta, absl::MakeSpan(items_));
  batch->Clear();
  weights->resize(sampled_count_);
  const uint64_t now_ns = context_.wall_clock_ns();
  for (int i = 0; i < sampled_count_; ++i) {
    RecordDataAge(context_.metrics, insert_ns_[items_[i].index], now_ns);
    // The memory holds only transitions whose records the store holds.
    if (frames_ != nullptr) {
      RETURN_IF_ERROR(frames_->Assemble(items_[i].index, batch));
    } else if (forwarded_ != nullptr) {
      RETURN_IF_ERROR(forwarded_->Assemble(items_[i].index, batch));
    } else {
      RETURN_IF_ERROR(batch->AddEncoded(
          absl::MakeConstSpan(ring_.data() + items_[i].index * payload_size_, payload_size_)));
    }
    (*weights)[i] = items_[i].weight;
  }
  return true;
}

absl::Status LocalReplaySource::Idle(absl::Duration timeout) {
  // Forwarding goes on while training is held back.
  return Receive(timeout);
}

absl::Status LocalReplaySource::Trained(absl::Span<const float> abs_td_errors) {
  if (abs_td_errors.size() != static_cast<size_t>(sampled_count_)) {
    return absl::InternalError(absl::StrCat(abs_td_errors.size(), " |TD errors| for a batch of ",
                                            sampled_count_, " rows"));
  }
  first_use_errors_.clear();
  for (int i = 0; i < sampled_count_; ++i) {
    const uint64_t index = items_[i].index;
    // The first training use of what crossed: its |TD error| now is the
    // transferred priority (an index sampled twice counts once).
    if (unused_[index] != 0 && memory_->sequence(index) == items_[i].sequence) {
      unused_[index] = 0;
      first_use_errors_.push_back(abs_td_errors[i]);
    }
    memory_->UpdatePriority(index, items_[i].sequence,
                            BoundPriority(abs_td_errors[i], context_.max_priority));
  }
  context_.metrics->RecordFirstUse(first_use_errors_);
  limiter_.Sampled(static_cast<uint64_t>(sampled_count_));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<double>> LocalReplaySource::SamplesPerInsert() {
  if (limiter_.inserted() == 0) return std::optional<double>();
  return std::optional<double>(limiter_.achieved_samples_per_insert());
}

}  // namespace dreplay::learner
