// Copyright dreplay authors.

#include "learner_client/buffer_replay_source.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dreplay::learner {

BufferReplaySource::BufferReplaySource(BatchSource* batches,
                                       std::function<absl::StatusOr<uint64_t>()> server_ingested,
                                       const ReplaySourceContext& context)
    : batches_(batches), server_ingested_(std::move(server_ingested)), context_(context) {}

absl::Status BufferReplaySource::Start() {
  if (!server_ingested_) return absl::OkStatus();
  ASSIGN_OR_RETURN(const uint64_t ingested, server_ingested_());
  ingested_at_start_ = ingested;
  return absl::OkStatus();
}

void BufferReplaySource::DropUntrainableRows(rl::TransitionBatch* batch,
                                             std::vector<float>* weights) {
  kept_rows_.clear();
  absl::Status first_bad;
  for (uint32_t i = 0; i < batch->size(); ++i) {
    const absl::Status row = batch->CheckRow(i, context_.action_count);
    if (row.ok()) {
      kept_rows_.push_back(i);
    } else if (first_bad.ok()) {
      first_bad = row;
    }
  }
  if (kept_rows_.size() == batch->size()) return;
  const uint64_t dropped = batch->size() - kept_rows_.size();
  batch->KeepRows(kept_rows_);
  for (size_t k = 0; k < kept_rows_.size(); ++k) {
    (*weights)[k] = (*weights)[kept_rows_[k]];
    if (!origins_.empty()) origins_[k] = origins_[kept_rows_[k]];
  }
  weights->resize(kept_rows_.size());
  if (!origins_.empty()) origins_.resize(kept_rows_.size());
  drops_.Count(dropped, absl::StrCat(dropped, " batch entries that cannot be trained on (first: ",
                                     first_bad.message(), ")"));
}

absl::StatusOr<bool> BufferReplaySource::Next(absl::Duration timeout, rl::TransitionBatch* batch,
                                              std::vector<float>* weights) {
  ASSIGN_OR_RETURN(const bool got, batches_->Next(timeout, batch, weights, &origins_));
  if (!got) return false;
  if (!origins_.empty() && origins_.size() != batch->size()) {
    return absl::InternalError(absl::StrCat("a batch of ", batch->size(), " transitions came with ",
                                            origins_.size(), " origins"));
  }
  entries_ = batch->size();
  DropUntrainableRows(batch, weights);
  if (batch->size() == 0) {
    // Nothing to train on; the server still needs the batch answered.
    entry_priorities_.assign(entries_, 0.0f);
    RETURN_IF_ERROR(batches_->WritePriorities(entry_priorities_));
    return false;
  }
  const uint64_t now_ns = context_.wall_clock_ns();
  for (const EntryOrigin& origin : origins_) {
    RecordDataAge(context_.metrics, origin.insert_time_ns, now_ns);
    if (origin.policy_lag >= 0) context_.metrics->RecordPolicyLag(origin.policy_lag);
  }
  return true;
}

absl::Status BufferReplaySource::Trained(absl::Span<const float> abs_td_errors) {
  if (abs_td_errors.size() != kept_rows_.size()) {
    return absl::InternalError(absl::StrCat(abs_td_errors.size(), " |TD errors| for a batch of ",
                                            kept_rows_.size(), " rows"));
  }
  // The entries that crossed the link now; their |TD errors| under the
  // networks before the update are what TrainStep computed.
  if (origins_.empty()) {
    context_.metrics->RecordTransferred(abs_td_errors);
  } else {
    arrived_errors_.clear();
    for (size_t i = 0; i < origins_.size(); ++i) {
      if (origins_[i].arrived) arrived_errors_.push_back(abs_td_errors[i]);
    }
    context_.metrics->RecordTransferred(arrived_errors_);
  }
  sampled_ += kept_rows_.size();
  entry_priorities_.assign(entries_, 0.0f);  // dropped rows: the lowest priority
  for (size_t k = 0; k < kept_rows_.size(); ++k) {
    entry_priorities_[kept_rows_[k]] = BoundPriority(abs_td_errors[k], context_.max_priority);
  }
  return batches_->WritePriorities(entry_priorities_);
}

absl::StatusOr<std::optional<double>> BufferReplaySource::SamplesPerInsert() {
  if (!server_ingested_ || !ingested_at_start_.has_value()) return std::optional<double>();
  ASSIGN_OR_RETURN(const uint64_t ingested, server_ingested_());
  if (ingested <= *ingested_at_start_) return std::optional<double>();
  return std::optional<double>(static_cast<double>(sampled_) /
                               static_cast<double>(ingested - *ingested_at_start_));
}

}  // namespace dreplay::learner
