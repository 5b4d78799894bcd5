// Copyright dreplay authors.

#include "replay_server/sampler.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/shared_words.h"
#include "glog/logging.h"

namespace dreplay::server {

absl::Status SamplerOptions::Validate() const {
  if (absl::Status s = beta.Validate(); !s.ok()) return s;
  if (min_size_to_sample == 0) {
    return absl::InvalidArgumentError("sampler min_size_to_sample=0 must be >= 1");
  }
  if (max_draws_per_entry == 0) {
    return absl::InvalidArgumentError("sampler max_draws_per_entry=0 must be >= 1");
  }
  return absl::OkStatus();
}

SlotCopy CopySlotConsistent(const protocol::LayoutConfig& config, const uint8_t* slot,
                            const uint64_t* commit_word, uint64_t sequence, uint8_t* destination,
                            const std::function<void()>* during_copy) {
  const uint64_t expected = protocol::CommitValue(sequence);
  if (LoadAcquire(commit_word) != expected) return SlotCopy::kCommitChangedBefore;
  if (during_copy == nullptr) {
    CopySharedToShared(destination, slot, config.slot_size);
  } else {
    const size_t half = config.slot_size / 2 / sizeof(uint64_t) * sizeof(uint64_t);
    CopySharedToShared(destination, slot, half);
    (*during_copy)();
    CopySharedToShared(destination + half, slot + half, config.slot_size - half);
  }
  // The copy's loads are acquires: the second commit read comes after them.
  if (LoadRelaxed(commit_word) != expected) return SlotCopy::kCommitChangedAfter;
  // `destination` is written only by this thread: plain reads are fine.
  if (protocol::VerifySlot(destination, config.slot_size, sequence) != protocol::SlotCheck::kOk) {
    return SlotCopy::kBadSlot;
  }
  return SlotCopy::kOk;
}

Sampler::Sampler(const protocol::LayoutConfig& config, const SamplerOptions& options,
                 protocol::ControlBlock* control, const uint8_t* slots, const uint64_t* commits,
                 uint8_t* staging, replay::ReplayMemory* memory, ReplayCounters* counters,
                 Clock* clock)
    : config_(config),
      options_(options),
      control_(control),
      slots_(slots),
      commits_(commits),
      staging_(staging),
      memory_(memory),
      counters_(counters),
      clock_(clock),
      staged_at_(config.staging_depth),
      items_(config.batch_size),
      entries_(config.batch_size) {
  CHECK_EQ(memory->capacity(), config.capacity);
}

void Sampler::Restart(uint64_t epoch) {
  epoch_ = epoch;
  next_batch_ = 0;
  released_ = 0;
  stalled_ = false;
  StoreRelease(&control_->server.epoch, epoch_);
  StoreRelease(&control_->server.batches_staged, next_batch_);
  StoreRelease(&control_->server.batches_released, released_);
}

void Sampler::ReleaseOldest() {
  DCHECK(HasOutstanding());
  ++released_;
  ++counters_->batches_released;
  StoreRelease(&control_->server.batches_released, released_);
}

bool Sampler::StageOne() {
  if (next_batch_ >= released_ + config_.staging_depth) {
    if (!stalled_) ++counters_->staging_stalls;
    stalled_ = true;
    return false;
  }
  stalled_ = false;
  if (memory_->size() < options_.min_size_to_sample) return false;

  const uint64_t n = next_batch_;
  uint8_t* base = staging_ + protocol::StagingSlotOffset(config_, n);
  uint8_t* payloads = base + protocol::StagingPayloadsOffset(config_);
  const uint32_t batch_size = config_.batch_size;
  // Draw the whole batch at once (the tree descents overlap), then prefetch
  // every drawn slot and commit word before copying.
  memory_->SampleStrata(batch_size, absl::MakeSpan(items_.data(), batch_size));
  for (uint32_t j = 0; j < batch_size; ++j) {
    const uint8_t* slot = slots_ + items_[j].index * config_.slot_size;
    for (uint32_t offset = 0; offset < config_.slot_size; offset += protocol::kCacheLine) {
      __builtin_prefetch(slot + offset);
    }
    __builtin_prefetch(&commits_[items_[j].index]);
  }
  uint32_t count = 0;
  for (uint32_t j = 0; j < batch_size; ++j) {
    replay::SampledItem item = items_[j];  // items_[count] may be overwritten below
    for (uint32_t draw = 0; draw < options_.max_draws_per_entry; ++draw) {
      if (draw > 0) {
        if (memory_->size() == 0) break;
        item = memory_->SampleOne(j, batch_size);
      }
      // An index removed by an earlier entry of this batch is drawn again.
      if (memory_->sequence(item.index) != item.sequence) continue;
      if (CopySlotConsistent(config_, slots_ + item.index * config_.slot_size,
                             &commits_[item.index], item.sequence,
                             payloads + uint64_t{count} * config_.slot_size) == SlotCopy::kOk) {
        items_[count++] = item;
        break;
      }
      memory_->Remove(item.index);
      ++counters_->sample_copy_rejects;
    }
  }
  if (count == 0) return false;

  const double beta = options_.beta.At(counters_->batches_staged);
  memory_->ComputeWeights(beta, absl::MakeSpan(items_.data(), count));
  for (uint32_t k = 0; k < count; ++k) {
    entries_[k] = protocol::BatchEntry{items_[k].sequence, static_cast<uint32_t>(items_[k].index),
                                       items_[k].weight};
  }
  CopyToShared(base + protocol::StagingEntriesOffset(config_), entries_.data(),
               uint64_t{count} * sizeof(protocol::BatchEntry));
  protocol::BatchHeader header{};
  header.batch_number = n;
  header.epoch = epoch_;
  header.count = count;
  header.slot_size = config_.slot_size;
  header.size = memory_->size();
  header.beta = static_cast<float>(beta);
  header.payload_count = count;
  header.used_bytes = protocol::StagingUsedBytes(config_, header.payload_count);
  CopyToShared(base, &header, sizeof(header));
  // Plain reads of memory only this thread writes.
  header.checksum = protocol::BatchChecksum(config_, base, count, header.payload_count);
  StoreRelaxed(reinterpret_cast<uint64_t*>(base + offsetof(protocol::BatchHeader, checksum)),
               header.checksum);
  uint8_t* const commit_line = base + protocol::StagingCommitOffset(config_);
  StoreRelaxed(
      reinterpret_cast<uint64_t*>(commit_line + offsetof(protocol::CommitLine, used_bytes)),
      header.used_bytes);
  StoreRelease(reinterpret_cast<uint64_t*>(commit_line), protocol::BatchCommitValue(n));

  staged_at_[n % staged_at_.size()] = clock_->Now();
  ++next_batch_;
  ++counters_->batches_staged;
  counters_->sampled += count;
  StoreRelease(&control_->server.batches_staged, next_batch_);
  return true;
}

}  // namespace dreplay::server
