// Copyright dreplay authors.

#include "replay_server/sampler.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/shared_words.h"
#include "common/thread_cpu.h"
#include "glog/logging.h"

namespace dreplay::server {
namespace {

// A stored value p^alpha (a double > 0) as the float a BatchEntry carries:
// kept > 0 and finite however far outside the float range it lies.
float WirePriorityAlpha(double priority_alpha) {
  return static_cast<float>(std::clamp(priority_alpha, double{std::numeric_limits<float>::min()},
                                       double{std::numeric_limits<float>::max()}));
}

}  // namespace

absl::Status SamplerOptions::Validate() const {
  if (absl::Status s = beta.Validate(); !s.ok()) return s;
  // The batch size is the layout's: ReplayCore::Create checks it again.
  if (absl::Status s = rate_limiter.Validate(1); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sampler rate_limiter: ", s.message()));
  }
  if (crossing_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampler crossing_period=", absl::FormatDuration(crossing_period), " must be >= 0"));
  }
  if (link_codec.has_value()) {
    if (absl::Status s = link_codec->Validate(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("sampler link_codec: ", s.message()));
    }
  }
  if (max_draws_per_entry == 0) {
    return absl::InvalidArgumentError("sampler max_draws_per_entry=0 must be >= 1");
  }
  if (forward != protocol::ForwardMode::kForwardOff) {
    if (rate_limiter.samples_per_insert > 0 || rate_limiter.block_inserts) {
      return absl::InvalidArgumentError(
          "forwarding stages each transition once: the learner keeps the replay and its rate "
          "limit, so the server's samples_per_insert must be 0 and block_inserts off");
    }
    if (forward == protocol::ForwardMode::kForwardFifo && forward_queue == 0) {
      return absl::InvalidArgumentError("sampler forward_queue=0 must be >= 1");
    }
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
                 Clock* clock, const uint8_t* leases_region)
    : config_(config),
      options_(options),
      control_(control),
      slots_(slots),
      commits_(commits),
      staging_(staging),
      memory_(memory),
      counters_(counters),
      clock_(clock),
      crossing_(options.crossing_period, config.batch_size),
      limiter_(options.rate_limiter),
      staged_at_(config.staging_depth),
      items_(config.batch_size),
      cached_(protocol::StagingEntryCapacity(config)),
      entries_(protocol::StagingEntryCapacity(config)),
      holdings_(config.capacity),
      staged_entries_(uint64_t{config.staging_depth} * protocol::StagingEntryCapacity(config)),
      staged_count_(config.staging_depth),
      staged_generation_(config.staging_depth),
      staged_references_(config.staging_depth) {
  CHECK_EQ(memory->capacity(), config.capacity);
  if (options.forward == protocol::ForwardMode::kForwardFifo) {
    CHECK(leases_region != nullptr) << "the FIFO forwarder reads the journal";
    queue_ = std::make_unique<ForwardQueue>(config, options.forward_queue, leases_region, control);
  }
  if (options.forward == protocol::ForwardMode::kForwardUniform) {
    CHECK(memory->options().mode == replay::SamplingMode::kUniform);
  }
  if (options.link_codec.has_value() && options.link_codec->kind != CodecKind::kRaw) {
    absl::StatusOr<std::unique_ptr<FrameCodec>> codec = FrameCodec::Create(*options.link_codec);
    CHECK(codec.ok()) << codec.status();  // validated options; out of memory otherwise
    codec_ = *std::move(codec);
    const uint64_t area = uint64_t{protocol::StagingEntryCapacity(config)} * config.slot_size;
    unpacked_.resize(area);
    packed_.resize(codec_->MaxCompressedSize(area));
  }
}

void Sampler::UseFrames(const replay::FrameTable* frames) {
  CHECK_GT(config_.frame_stack, 0u);
  frames_ = frames;
  record_items_.resize(protocol::StagingEntryCapacity(config_) - config_.batch_size);
  in_batch_.assign(config_.capacity, 0);
  in_batch_sequence_.assign(config_.capacity, 0);
}

void Sampler::ResetLearnerCache(bool learner_cache) {
  holdings_.Clear();
  // A forwarded transition crosses once, so without frames nothing would
  // ever be a reference; with frames, the records a learner holds are.
  learner_cache_ = learner_cache && (!forwarding() || frames_ != nullptr);
  ++cache_generation_;
  ++counters_->learner_cache_resets;
}

bool Sampler::OutstandingReferences() const {
  for (uint64_t n = released_; n < next_batch_; ++n) {
    if (staged_references_[n % config_.staging_depth]) return true;
  }
  return false;
}

void Sampler::Restart(uint64_t epoch, uint64_t incarnation) {
  epoch_ = epoch;
  incarnation_ = incarnation;
  next_batch_ = 0;
  released_ = 0;
  stalled_ = false;
  limiter_wait_since_ = absl::InfinitePast();
  holdings_.Clear();
  ++cache_generation_;
  if (queue_ != nullptr) queue_->Restart();
  StoreRelease(&control_->server.epoch, epoch_);
  StoreRelease(&control_->server.incarnation, incarnation_);
  StoreRelease(&control_->server.batches_staged, next_batch_);
  StoreRelease(&control_->server.batches_released, released_);
}

void Sampler::ReleaseOldest(bool learner_received) {
  DCHECK(HasOutstanding());
  const uint64_t slot = released_ % config_.staging_depth;
  if (!learner_received && learner_cache_ && staged_generation_[slot] == cache_generation_) {
    // Perhaps never READ: what it carried is not counted on again (a later
    // batch that referred to it may miss, which the learner leaves out).
    const protocol::BatchEntry* entries =
        &staged_entries_[slot * protocol::StagingEntryCapacity(config_)];
    for (uint32_t k = 0; k < staged_count_[slot]; ++k) {
      const uint64_t index = protocol::EntryIndex(entries[k]);
      if (holdings_.Holds(index, entries[k].slot_sequence)) holdings_.Forget(index);
    }
  }
  ++released_;
  ++counters_->batches_released;
  StoreRelease(&control_->server.batches_released, released_);
}

bool Sampler::StageOne() {
  if (queue_ != nullptr) forward_dropped_ += queue_->Refill();
  if (next_batch_ >= released_ + config_.staging_depth) {
    if (!stalled_) ++counters_->staging_stalls;
    stalled_ = true;
    return false;
  }
  stalled_ = false;
  const uint32_t batch_size = config_.batch_size;
  if (forwarding()) {
    const uint64_t waiting = queue_ != nullptr ? queue_->size() : memory_->size();
    if (waiting < batch_size) return false;
  } else if (!limiter_.CanSample(batch_size, memory_->size())) {
    if (memory_->size() >= options_.rate_limiter.min_size_to_sample) {
      // Held back by the ratio, not by the memory's size.
      ++counters_->limiter_sample_waits;
      if (limiter_wait_since_ == absl::InfinitePast()) limiter_wait_since_ = clock_->Now();
    }
    return false;
  }

  // With a link codec the copies gather in unpacked_, compressed at commit.
  uint8_t* payloads = codec_ != nullptr
                          ? unpacked_.data()
                          : staging_ + protocol::StagingSlotOffset(config_, next_batch_) +
                                protocol::StagingPayloadsOffset(config_);
  uint32_t payload_count = 0;
  measuring_ = crossing_.Due(clock_->Now());
  const uint32_t count =
      queue_ != nullptr ? TakeQueued(payloads) : DrawBatch(payloads, &payload_count);
  if (queue_ != nullptr) payload_count = count;
  if (measuring_) {
    crossing_.Finish(memory_->rank_keys(), /*keys_left_memory=*/forwarding(), clock_->Now());
    measuring_ = false;
  }
  if (count == 0) return false;
  int64_t record_count = 0;
  if (frames_ != nullptr) {
    record_count = StageRecords(payloads, count, &payload_count);
    if (record_count < 0) return false;
  }
  // The learner computes the weights from the entries' p^alpha and beta.
  const double beta = forwarding() ? 0.0 : options_.beta.At(counters_->batches_staged);
  CommitBatch(count, static_cast<uint32_t>(record_count), payload_count, beta);
  return true;
}

int64_t Sampler::StageRecords(uint8_t* payloads, uint32_t count, uint32_t* payload_count) {
  const uint64_t mark = ++attempt_;
  for (uint32_t k = 0; k < count; ++k) {
    in_batch_[items_[k].index] = mark;
    in_batch_sequence_[items_[k].index] = items_[k].sequence;
  }
  const uint64_t lease_slots = protocol::LeaseSlots(config_);
  uint32_t records = 0;
  for (uint32_t k = 0; k < count; ++k) {
    const uint64_t q = items_[k].sequence;
    const auto lease = static_cast<uint32_t>(items_[k].index / lease_slots);
    for (const uint16_t d : frames_->Needs(items_[k].index)) {
      const uint64_t s = q - d;
      const uint64_t index = protocol::LeaseSlotIndex(config_, lease, s);
      // In the batch already, as this very sequence; the same slot holding
      // a later sequence means the frame is gone (HoldsFrame says so below).
      if (in_batch_[index] == mark && in_batch_sequence_[index] == s) continue;
      in_batch_[index] = mark;
      in_batch_sequence_[index] = s;
      const uint64_t* commit = &commits_[index];
      const uint32_t e = count + records;
      if (!frames_->HoldsFrame(index, s)) {
        cached_[e] = 2;  // not held: fails below, like a copy
      } else if (learner_cache_ && holdings_.Holds(index, s) &&
                 LoadAcquire(commit) == protocol::CommitValue(s)) {
        // The learner holds it and finds it by the transition's own
        // references: no entry.
        continue;
      } else if (CopySlotConsistent(config_, slots_ + index * config_.slot_size, commit, s,
                                    payloads + uint64_t{*payload_count} * config_.slot_size) ==
                 SlotCopy::kOk) {
        cached_[e] = 0;
        ++*payload_count;
      } else {
        cached_[e] = 2;
      }
      if (cached_[e] == 2) {
        ++counters_->sample_copy_rejects;
        if (forwarding()) {
          // The batch's transitions have left the memory already: this one
          // goes without the record (the learner cannot assemble it and
          // leaves it out), the others go on.
          ++forward_dropped_;
          continue;
        }
        // The record is being overwritten: the transition goes (ingest
        // would release it soon), and the batch is drawn again.
        memory_->Remove(items_[k].index);
        return -1;
      }
      record_items_[records++] = replay::SampledItem{index, s};
    }
  }
  return records;
}

uint32_t Sampler::DrawBatch(uint8_t* payloads, uint32_t* payload_count) {
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
      // An index removed by an earlier entry of this batch (a copy reject,
      // or forwarded) is drawn again.
      if (memory_->sequence(item.index) != item.sequence) continue;
      const uint64_t* commit = &commits_[item.index];
      if (learner_cache_ && holdings_.Holds(item.index, item.sequence)) {
        // The learner holds (index, sequence): a reference, if the slot
        // still holds that sequence (what a copy would check first).
        if (LoadAcquire(commit) == protocol::CommitValue(item.sequence)) {
          cached_[count] = 1;
          items_[count++] = item;
          // Forwarded once (it crossed before, as a record another
          // transition needed).
          if (forwarding()) RemoveForwarded(item.index, item.sequence);
          break;
        }
      } else if (CopySlotConsistent(
                     config_, slots_ + item.index * config_.slot_size, commit, item.sequence,
                     payloads + uint64_t{*payload_count} * config_.slot_size) == SlotCopy::kOk) {
        cached_[count] = 0;
        items_[count++] = item;
        ++*payload_count;
        if (measuring_) crossing_.Add(memory_->rank_key(item.index));
        // Forwarded once: never drawn again.
        if (forwarding()) RemoveForwarded(item.index, item.sequence);
        break;
      }
      memory_->Remove(item.index);
      ++counters_->sample_copy_rejects;
    }
  }
  return count;
}

uint32_t Sampler::TakeQueued(uint8_t* payloads) {
  uint32_t count = 0;
  while (count < config_.batch_size && queue_->size() > 0) {
    const QueuedTransition t = queue_->PopFront();
    // Overwritten (or found torn by ingest) since it was queued: left behind.
    if (memory_->sequence(t.index) != t.sequence) {
      ++forward_dropped_;
      continue;
    }
    if (CopySlotConsistent(config_, slots_ + t.index * config_.slot_size, &commits_[t.index],
                           t.sequence,
                           payloads + uint64_t{count} * config_.slot_size) != SlotCopy::kOk) {
      ++counters_->sample_copy_rejects;
      ++forward_dropped_;
      memory_->Remove(t.index);
      continue;
    }
    cached_[count] = 0;
    items_[count] = replay::SampledItem{t.index, t.sequence};
    ++count;
    if (measuring_) crossing_.Add(memory_->rank_key(t.index));
    RemoveForwarded(t.index, t.sequence);
  }
  return count;
}

void Sampler::RemoveForwarded(uint64_t index, uint64_t sequence) {
  memory_->Remove(index);
  if (options_.verification_log != nullptr) options_.verification_log->Forwarded(index, sequence);
}

uint32_t Sampler::Pack(uint8_t* area, uint32_t payload_count) {
  const uint64_t raw = uint64_t{payload_count} * config_.slot_size;
  packed_in_ += raw;
  if (codec_ == nullptr) {
    packed_out_ += raw;
    return 0;
  }
  const absl::Span<const uint8_t> slots(unpacked_.data(), raw);
  const uint64_t cpu_before = ThreadCpuNanos();
  const absl::StatusOr<size_t> n =
      raw == 0 ? absl::StatusOr<size_t>(0) : codec_->Compress(slots, absl::MakeSpan(packed_));
  pack_cpu_ns_ += ThreadCpuNanos() - cpu_before;
  if (n.ok() && *n > 0 && *n < raw) {
    CopyToShared(area, packed_.data(), *n);
    packed_out_ += *n;
    return static_cast<uint32_t>(*n);
  }
  LOG_IF_EVERY_N(WARNING, !n.ok(), 1000) << "staged as it is: " << n.status();
  CopyToShared(area, unpacked_.data(), raw);  // would not shrink
  packed_out_ += raw;
  return 0;
}

void Sampler::CommitBatch(uint32_t count, uint32_t record_count, uint32_t payload_count,
                          double beta) {
  const uint64_t n = next_batch_;
  uint8_t* base = staging_ + protocol::StagingSlotOffset(config_, n);
  const uint64_t slot = n % config_.staging_depth;
  const uint32_t entries = count + record_count;
  for (uint32_t k = 0; k < entries; ++k) {
    const replay::SampledItem& item = k < count ? items_[k] : record_items_[k - count];
    const uint32_t index = static_cast<uint32_t>(item.index);
    // p^alpha as drawn (an index drawn twice may have left the memory since);
    // 1 when forwarding (beta 0), 0 for records.
    const float priority_alpha = k >= count     ? 0.0f
                                 : forwarding() ? 1.0f
                                                : WirePriorityAlpha(item.priority_alpha);
    entries_[k] = protocol::BatchEntry{
        item.sequence, cached_[k] ? (index | protocol::kEntryCachedBit) : index, priority_alpha};
  }
  std::copy(entries_.begin(), entries_.begin() + entries,
            staged_entries_.begin() + slot * protocol::StagingEntryCapacity(config_));
  staged_count_[slot] = entries;
  staged_generation_[slot] = cache_generation_;
  if (learner_cache_) {
    // The learner reads batches in order and keeps what each carried, so a
    // later batch refers to these without waiting for this one's update.
    for (uint32_t k = 0; k < entries; ++k) {
      holdings_.MarkHeld(protocol::EntryIndex(entries_[k]), entries_[k].slot_sequence);
    }
  }
  staged_references_[slot] = payload_count < entries;
  CopyToShared(base + protocol::StagingEntriesOffset(config_), entries_.data(),
               uint64_t{entries} * sizeof(protocol::BatchEntry));
  protocol::BatchHeader header{};
  header.batch_number = n;
  header.epoch = epoch_;
  header.incarnation = incarnation_;
  header.count = count;
  header.record_count = record_count;
  header.size = static_cast<uint32_t>(memory_->size());
  header.beta = static_cast<float>(beta);
  header.payload_count = payload_count;
  header.packed_bytes = Pack(base + protocol::StagingPayloadsOffset(config_), payload_count);
  header.used_bytes = protocol::StagingPayloadsOffset(config_) +
                      protocol::StagedPayloadBytes(config_, payload_count, header.packed_bytes);
  CopyToShared(base, &header, sizeof(header));
  // Plain reads of memory only this thread writes.
  header.checksum = protocol::BatchChecksumBytes(
      config_, base, entries, header.used_bytes - protocol::StagingPayloadsOffset(config_));
  StoreRelaxed(reinterpret_cast<uint64_t*>(base + offsetof(protocol::BatchHeader, checksum)),
               header.checksum);
  uint8_t* const commit_line = base + protocol::StagingCommitOffset(config_);
  StoreRelaxed(
      reinterpret_cast<uint64_t*>(commit_line + offsetof(protocol::CommitLine, entry_bytes)),
      uint64_t{entries} * sizeof(protocol::BatchEntry));
  StoreRelaxed(
      reinterpret_cast<uint64_t*>(commit_line + offsetof(protocol::CommitLine, used_bytes)),
      header.used_bytes);
  StoreRelease(reinterpret_cast<uint64_t*>(commit_line), protocol::BatchCommitValue(n));

  const absl::Time now = clock_->Now();
  staged_at_[slot] = now;
  if (limiter_wait_since_ != absl::InfinitePast()) {
    counters_->limiter_sample_wait_ns +=
        static_cast<uint64_t>(absl::ToInt64Nanoseconds(now - limiter_wait_since_));
    limiter_wait_since_ = absl::InfinitePast();
  }
  limiter_.Sampled(count);
  ++next_batch_;
  ++counters_->batches_staged;
  counters_->sampled += count;
  counters_->staged_payloads += payload_count;
  counters_->staged_cached += entries - payload_count;
  StoreRelease(&control_->server.batches_staged, next_batch_);
}

}  // namespace dreplay::server
