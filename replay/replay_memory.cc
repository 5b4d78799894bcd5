// Copyright dreplay authors.

#include "replay/replay_memory.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace dreplay::replay {

absl::Status ReplayMemoryOptions::Validate() const {
  if (capacity < 1 || (capacity & (capacity - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("replay memory capacity=", capacity, " must be a power of two"));
  }
  if (mode != SamplingMode::kPrioritized && mode != SamplingMode::kUniform) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling mode=", static_cast<uint32_t>(mode), " is unknown"));
  }
  if (!(alpha >= 0 && alpha <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("alpha=", alpha, " must be in [0, 1]"));
  }
  if (!(priority_epsilon > 0 && std::isfinite(priority_epsilon))) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority_epsilon=", priority_epsilon, " must be > 0 and finite"));
  }
  if (!(initial_max_priority > 0 && std::isfinite(initial_max_priority))) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial_max_priority=", initial_max_priority, " must be > 0 and finite"));
  }
  return absl::OkStatus();
}

absl::Status BetaSchedule::Validate() const {
  if (!(initial >= 0 && initial <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("beta initial=", initial, " must be in [0, 1]"));
  }
  if (!(final >= 0 && final <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("beta final=", final, " must be in [0, 1]"));
  }
  return absl::OkStatus();
}

double BetaSchedule::At(uint64_t step) const {
  if (steps == 0 || step >= steps) return final;
  const double fraction = static_cast<double>(step) / static_cast<double>(steps);
  return initial + (final - initial) * fraction;
}

absl::StatusOr<std::unique_ptr<ReplayMemory>> ReplayMemory::Create(
    const ReplayMemoryOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  return std::unique_ptr<ReplayMemory>(new ReplayMemory(options));
}

ReplayMemory::ReplayMemory(const ReplayMemoryOptions& options)
    : options_(options),
      tree_(options.capacity),
      sequences_(options.capacity, kNoSequence),
      rank_keys_(options.capacity, std::numeric_limits<float>::quiet_NaN()),
      rng_(options.seed) {}

double ReplayMemory::StoredValue(float raw_priority) const {
  if (options_.mode == SamplingMode::kUniform || options_.alpha == 0) return 1.0;
  const double p = static_cast<double>(raw_priority) + options_.priority_epsilon;
  const double v = options_.alpha == 1 ? p : std::pow(p, options_.alpha);
  // Keep every valid index drawable and the tree finite.
  return std::min(std::max(v, std::numeric_limits<double>::min()),
                  std::numeric_limits<double>::max() / static_cast<double>(capacity()));
}

float ReplayMemory::RankKey(float raw_priority) {
  return raw_priority > 0 && std::isfinite(raw_priority) ? raw_priority
                                                         : std::numeric_limits<float>::infinity();
}

bool ReplayMemory::InsertReadsMax(float raw_priority) const {
  return !(raw_priority > 0 && std::isfinite(raw_priority)) &&
         options_.mode != SamplingMode::kUniform;
}

double ReplayMemory::InsertValue(float raw_priority) const {
  if (InsertReadsMax(raw_priority)) return size_ > 0 ? tree_.Max() : options_.initial_max_priority;
  return StoredValue(raw_priority);  // 1 in uniform mode, whatever the priority
}

void ReplayMemory::Insert(uint64_t index, uint64_t sequence, float raw_priority) {
  DCHECK_LT(index, capacity());
  DCHECK_NE(sequence, kNoSequence);
  const double value = InsertValue(raw_priority);
  if (observer_ != nullptr) observer_->BeforeEntryChange(index);
  if (sequences_[index] == kNoSequence) ++size_;
  sequences_[index] = sequence;
  rank_keys_[index] = RankKey(raw_priority);
  tree_.Set(index, value);
}

void ReplayMemory::InsertRun(uint64_t first_index, uint64_t first_sequence,
                             absl::Span<const float> raw_priorities) {
  const size_t n = raw_priorities.size();
  DCHECK_LE(first_index + n, capacity());
  run_values_.resize(n);
  size_t applied = 0;  // run_values_[0, applied) are in the tree
  for (size_t k = 0; k < n; ++k) {
    const float raw = raw_priorities[k];
    if (InsertReadsMax(raw)) {
      // Insert would read the tree's max with the earlier entries in place.
      tree_.SetRange(first_index + applied,
                     absl::MakeConstSpan(run_values_).subspan(applied, k - applied));
      applied = k;
    }
    run_values_[k] = InsertValue(raw);
    const uint64_t index = first_index + k;
    DCHECK_NE(first_sequence + k, kNoSequence);
    if (observer_ != nullptr) observer_->BeforeEntryChange(index);
    if (sequences_[index] == kNoSequence) ++size_;
    sequences_[index] = first_sequence + k;
    rank_keys_[index] = RankKey(raw);
  }
  tree_.SetRange(first_index + applied, absl::MakeConstSpan(run_values_).subspan(applied));
}

void ReplayMemory::RemoveRun(uint64_t first_index, uint64_t count) {
  DCHECK_LE(first_index + count, capacity());
  for (uint64_t index = first_index; index < first_index + count; ++index) {
    if (sequences_[index] == kNoSequence) continue;  // its leaf is already 0
    if (observer_ != nullptr) observer_->BeforeEntryChange(index);
    sequences_[index] = kNoSequence;
    rank_keys_[index] = std::numeric_limits<float>::quiet_NaN();
    --size_;
  }
  run_values_.assign(count, 0.0);
  tree_.SetRange(first_index, run_values_);
}

void ReplayMemory::Remove(uint64_t index) {
  DCHECK_LT(index, capacity());
  if (sequences_[index] == kNoSequence) return;
  if (observer_ != nullptr) observer_->BeforeEntryChange(index);
  sequences_[index] = kNoSequence;
  rank_keys_[index] = std::numeric_limits<float>::quiet_NaN();
  --size_;
  tree_.Set(index, 0);
}

void ReplayMemory::Clear() {
  std::fill(sequences_.begin(), sequences_.end(), kNoSequence);
  std::fill(rank_keys_.begin(), rank_keys_.end(), std::numeric_limits<float>::quiet_NaN());
  tree_.Clear();
  size_ = 0;
}

ReplayMemory::UpdateResult ReplayMemory::UpdatePriority(uint64_t index, uint64_t sequence,
                                                        float raw_priority) {
  if (index >= capacity() || !(raw_priority >= 0) || !std::isfinite(raw_priority)) {
    return UpdateResult::kInvalid;
  }
  if (sequence == kNoSequence || sequences_[index] != sequence) return UpdateResult::kStale;
  tree_.Set(index, StoredValue(raw_priority));
  rank_keys_[index] = raw_priority;  // finite and >= 0: an estimate, 0 included
  return UpdateResult::kApplied;
}

double ReplayMemory::NextUniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

SampledItem ReplayMemory::SampleOne(uint32_t stratum, uint32_t num_strata) {
  DCHECK_GT(size_, 0u);
  const double total = tree_.Total();
  const double segment = total / num_strata;
  const double prefix = (stratum + NextUniform()) * segment;
  SampledItem item;
  item.index = tree_.Find(prefix);
  item.sequence = sequences_[item.index];
  item.priority_alpha = tree_.Get(item.index);
  item.probability = item.priority_alpha / total;
  return item;
}

void ReplayMemory::SampleStrata(uint32_t num_strata, absl::Span<SampledItem> out) {
  DCHECK_GT(size_, 0u);
  DCHECK_LE(out.size(), num_strata);
  const double total = tree_.Total();
  const double segment = total / num_strata;
  constexpr size_t kChunk = 64;
  double prefixes[kChunk];
  uint64_t found[kChunk];
  for (size_t begin = 0; begin < out.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, out.size() - begin);
    for (size_t k = 0; k < n; ++k) {
      prefixes[k] = (static_cast<double>(begin + k) + NextUniform()) * segment;
    }
    tree_.FindBatch(absl::MakeConstSpan(prefixes, n), absl::MakeSpan(found, n));
    for (size_t k = 0; k < n; ++k) {
      SampledItem& item = out[begin + k];
      item.index = found[k];
      item.sequence = sequences_[found[k]];
      item.priority_alpha = tree_.Get(found[k]);
      item.probability = item.priority_alpha / total;
    }
  }
}

void ReplayMemory::Prefetch(uint64_t index) const {
  __builtin_prefetch(&sequences_[index], 1);
  tree_.PrefetchPath(index);
}

void ReplayMemory::ComputeWeights(double beta, absl::Span<SampledItem> items) const {
  if (items.empty()) return;
  // (N P_i)^-beta / max_j (N P_j)^-beta = (P_min / P_i)^beta: N cancels, and
  // the ratio form cannot overflow however small a probability is.
  double min_probability = items[0].probability;
  for (const SampledItem& item : items) {
    min_probability = std::min(min_probability, item.probability);
  }
  for (SampledItem& item : items) {
    item.weight = item.probability > 0
                      ? static_cast<float>(std::pow(min_probability / item.probability, beta))
                      : 1.0f;
  }
}

int ReplayMemory::SampleBatch(uint32_t batch_size, double beta, absl::Span<SampledItem> out) {
  if (size_ == 0) return 0;
  const uint32_t count = static_cast<uint32_t>(std::min<size_t>(batch_size, out.size()));
  SampleStrata(count, out.first(count));
  ComputeWeights(beta, out.first(count));
  return static_cast<int>(count);
}

absl::Status ReplayMemory::Restore(absl::Span<const double> stored_values,
                                   absl::Span<const uint64_t> sequences) {
  if (stored_values.size() != capacity() || sequences.size() != capacity()) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore needs ", capacity(), " values and sequences, got ",
                     stored_values.size(), " and ", sequences.size()));
  }
  for (uint64_t i = 0; i < capacity(); ++i) {
    const double v = stored_values[i];
    const bool is_valid = sequences[i] != kNoSequence;
    if (!(v >= 0) || !std::isfinite(v) || (is_valid != (v > 0))) {
      Clear();
      return absl::InvalidArgumentError(absl::StrCat("restore: index ", i, " has stored value ", v,
                                                     " and sequence ", sequences[i]));
    }
  }
  size_ = 0;
  std::fill(rank_keys_.begin(), rank_keys_.end(), std::numeric_limits<float>::quiet_NaN());
  for (uint64_t i = 0; i < capacity(); ++i) {
    sequences_[i] = sequences[i];
    if (sequences[i] != kNoSequence) ++size_;
    tree_.SetLeafNoUpdate(i, stored_values[i]);
  }
  tree_.Rebuild();
  return absl::OkStatus();
}

InsertRunBuffer::InsertRunBuffer(ReplayMemory* memory, size_t expected_run) : memory_(memory) {
  priorities_.reserve(expected_run);
}

void InsertRunBuffer::Add(uint64_t index, uint64_t sequence, float raw_priority) {
  if (!priorities_.empty() && (index != first_index_ + priorities_.size() ||
                               sequence != first_sequence_ + priorities_.size())) {
    Flush();
  }
  if (priorities_.empty()) {
    first_index_ = index;
    first_sequence_ = sequence;
  }
  priorities_.push_back(raw_priority);
}

void InsertRunBuffer::Flush() {
  if (priorities_.empty()) return;
  memory_->InsertRun(first_index_, first_sequence_, priorities_);
  priorities_.clear();
}

}  // namespace dreplay::replay
