// Copyright dreplay authors.

#include "learner_client/frame_batch.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "rl/frame_stacks.h"

namespace dreplay::learner {

FrameBatchAssembler::FrameBatchAssembler(const protocol::LayoutConfig& config)
    : config_(config),
      lease_slots_(protocol::LeaseSlots(config)),
      frame_bytes_(config.frame_stack > 0 ? config.observation_size / config.frame_stack : 0),
      stack_(config.observation_size),
      next_stack_(config.observation_size) {
  CHECK_GT(config.frame_stack, 0u);
  slots_.reserve(protocol::StagingEntryCapacity(config));
}

void FrameBatchAssembler::Index(const StagedBatch& batch) {
  slots_.clear();
  for (uint32_t i = 0; i < batch.size(); ++i) slots_[batch.entry(i).slot_index] = batch.slot(i);
  for (const StagedEntry& r : batch.records()) slots_[r.entry.slot_index] = r.slot;
}

absl::Status FrameBatchAssembler::Add(const StagedBatch& batch, uint32_t i,
                                      rl::TransitionBatch* out) {
  const uint64_t lease = batch.entry(i).slot_index / lease_slots_;
  // In the batch, else in the learner cache (a record the learner held is
  // not carried again).
  auto lookup = [&](uint64_t sequence) -> absl::Span<const uint8_t> {
    const uint64_t index = protocol::LeaseSlotIndex(config_, lease, sequence);
    const auto it = slots_.find(index);
    const uint8_t* slot = it == slots_.end() ? nullptr : it->second;
    if (slot == nullptr ||
        reinterpret_cast<const protocol::SlotHeader*>(slot)->sequence != sequence) {
      slot = batch.cached_slot(index, sequence);
      if (slot == nullptr) return {};
    }
    const auto* header = reinterpret_cast<const protocol::SlotHeader*>(slot);
    if (header->sequence != sequence || header->payload_length > config_.max_payload()) return {};
    return absl::MakeConstSpan(slot + sizeof(protocol::SlotHeader), header->payload_length);
  };
  ASSIGN_OR_RETURN(const rl::StackedTransition t,
                   rl::AssembleStacks(batch.entry(i).slot_sequence, frame_bytes_, lookup,
                                      absl::MakeSpan(stack_), absl::MakeSpan(next_stack_)));
  return out->AddBytes(t.action, t.reward, t.discount, t.done, stack_, next_stack_);
}

}  // namespace dreplay::learner
