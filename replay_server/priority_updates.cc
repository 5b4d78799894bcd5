// Copyright dreplay authors.

#include "replay_server/priority_updates.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/shared_words.h"

namespace dreplay::server {

PriorityUpdates::PriorityUpdates(const protocol::LayoutConfig& config, const uint8_t* mailbox,
                                 const uint8_t* staging, float max_priority,
                                 replay::ReplayMemory* memory, ReplayCounters* counters)
    : config_(config),
      mailbox_(mailbox),
      staging_(staging),
      max_priority_(max_priority),
      memory_(memory),
      counters_(counters),
      entry_(protocol::MailboxEntryStride(config)) {}

absl::Span<const protocol::BatchEntry> PriorityUpdates::StagedEntries(uint64_t batch_number) const {
  // The core thread wrote the slot; nobody else writes it.
  const uint8_t* slot = staging_ + protocol::StagingSlotOffset(config_, batch_number);
  const auto* header = reinterpret_cast<const protocol::BatchHeader*>(slot);
  if (header->batch_number != batch_number || header->count > config_.batch_size) return {};
  return absl::MakeConstSpan(
      reinterpret_cast<const protocol::BatchEntry*>(slot + protocol::StagingEntriesOffset(config_)),
      header->count);
}

bool PriorityUpdates::NamesAnEntry(const protocol::PriorityRecord& record, uint32_t k,
                                   absl::Span<const protocol::BatchEntry> entries) {
  auto names = [&record](const protocol::BatchEntry& e) {
    return protocol::EntryIndex(e) == record.slot_index && e.slot_sequence == record.slot_sequence;
  };
  // A learner writes one record per entry, in order: the first look finds it.
  if (k < entries.size() && names(entries[k])) return true;
  for (const protocol::BatchEntry& e : entries) {
    if (names(e)) return true;
  }
  return false;
}

PriorityUpdates::Result PriorityUpdates::Consume(uint64_t batch_number, uint64_t epoch,
                                                 uint64_t incarnation) {
  const uint8_t* entry = mailbox_ + protocol::MailboxEntryOffset(config_, batch_number);
  const auto* commit =
      reinterpret_cast<const uint64_t*>(entry + protocol::MailboxCommitOffset(config_));
  if (LoadAcquire(commit) != protocol::BatchCommitValue(batch_number)) return Result::kNotReady;

  CopyFromShared(entry_.data(), entry, sizeof(protocol::MailboxHeader));
  protocol::MailboxHeader header;
  std::memcpy(&header, entry_.data(), sizeof(header));
  if (header.batch_number != batch_number || header.epoch != epoch ||
      header.incarnation != incarnation || header.count > config_.batch_size) {
    ++counters_->mailbox_rejects;
    return Result::kRejected;
  }
  const uint64_t records_bytes = uint64_t{header.count} * sizeof(protocol::PriorityRecord);
  CopyFromShared(entry_.data() + protocol::MailboxRecordsOffset(config_),
                 entry + protocol::MailboxRecordsOffset(config_), records_bytes);
  if (protocol::MailboxChecksum(config_, entry_.data(), header.count) != header.checksum) {
    ++counters_->mailbox_rejects;
    return Result::kRejected;
  }
  const uint8_t* records = entry_.data() + protocol::MailboxRecordsOffset(config_);
  auto record_at = [records](uint32_t k) {
    protocol::PriorityRecord record;
    std::memcpy(&record, records + k * sizeof(protocol::PriorityRecord), sizeof(record));
    return record;
  };
  // Scattered indices: prefetch a few records ahead so the misses overlap.
  constexpr uint32_t kPrefetchDistance = 8;
  for (uint32_t k = 0; k < std::min(kPrefetchDistance, header.count); ++k) {
    const protocol::PriorityRecord ahead = record_at(k);
    if (ahead.slot_index < config_.capacity) memory_->Prefetch(ahead.slot_index);
  }
  const absl::Span<const protocol::BatchEntry> entries = StagedEntries(batch_number);
  for (uint32_t k = 0; k < header.count; ++k) {
    if (k + kPrefetchDistance < header.count) {
      const protocol::PriorityRecord ahead = record_at(k + kPrefetchDistance);
      if (ahead.slot_index < config_.capacity) memory_->Prefetch(ahead.slot_index);
    }
    const protocol::PriorityRecord record = record_at(k);
    if (!NamesAnEntry(record, k, entries)) {
      ++counters_->priority_updates_invalid;
      continue;
    }
    float priority = record.priority;
    if (priority > max_priority_) {  // +inf stays invalid below
      if (std::isfinite(priority)) {
        priority = max_priority_;
        ++counters_->priorities_bounded;
      }
    }
    switch (memory_->UpdatePriority(record.slot_index, record.slot_sequence, priority)) {
      case replay::ReplayMemory::UpdateResult::kApplied:
        ++counters_->priority_updates_applied;
        break;
      case replay::ReplayMemory::UpdateResult::kStale:
        ++counters_->priority_updates_stale;
        break;
      case replay::ReplayMemory::UpdateResult::kInvalid:
        ++counters_->priority_updates_invalid;
        break;
    }
  }
  return Result::kApplied;
}

}  // namespace dreplay::server
