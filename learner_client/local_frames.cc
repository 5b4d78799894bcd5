// Copyright dreplay authors.

#include "learner_client/local_frames.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "protocol/frame_record.h"
#include "rl/frame_stacks.h"

namespace dreplay::learner {

LocalFrameStore::LocalFrameStore(uint64_t capacity, int depth, size_t frame_bytes)
    : depth_(depth),
      frame_bytes_(frame_bytes),
      record_bytes_(protocol::FrameRecordBytes(depth, frame_bytes)),
      table_(capacity, static_cast<uint32_t>(2 * depth)),
      slots_(capacity),
      records_(capacity * record_bytes_),
      stack_(static_cast<size_t>(depth) * frame_bytes),
      next_stack_(static_cast<size_t>(depth) * frame_bytes) {
  CHECK_GE(capacity, 1u);
  CHECK_GE(depth, 1);
  CHECK_GE(frame_bytes, 1u);
  where_.reserve(capacity);
}

const LocalFrameStore::Slot* LocalFrameStore::Find(uint64_t generation, uint32_t lease,
                                                   uint64_t sequence, uint64_t* index) const {
  const auto it = where_.find(Key{generation, lease, sequence});
  if (it == where_.end()) return nullptr;
  *index = it->second;
  return &slots_[it->second];
}

absl::Status LocalFrameStore::Accept(uint64_t index, uint64_t sequence, uint64_t generation,
                                     uint32_t lease, uint64_t lease_sequence,
                                     absl::Span<const uint8_t> record, replay::ReplayMemory* memory,
                                     bool* insert) {
  *insert = false;
  Slot& slot = slots_[index];
  if (slot.held) {
    // The record there goes, and every transition that needs it.
    table_.Release(index, [&](uint64_t j, uint64_t q_j) {
      if (memory->sequence(j) != q_j) return;  // replaced already
      memory->Remove(j);
      ++evicted_;
    });
    if (memory->valid(index)) memory->Remove(index);
    // Only its own entry: a record delivered twice maps to its later slot.
    const auto it = where_.find(Key{slot.generation, slot.lease, slot.sequence});
    if (it != where_.end() && it->second == index) where_.erase(it);
    slot.held = false;
  }
  protocol::FrameRecordView view;
  RETURN_IF_ERROR(protocol::DecodeFrameRecord(record, frame_bytes_, &view));
  if (view.header.depth != depth_ || record.size() > record_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("record ", lease_sequence, " of lease ", lease,
                                                   ": depth ", view.header.depth, ", ",
                                                   record.size(), " bytes"));
  }
  std::memcpy(records_.data() + index * record_bytes_, record.data(), record.size());
  slot = Slot{generation, lease, lease_sequence, true, static_cast<uint32_t>(record.size())};
  where_[Key{generation, lease, lease_sequence}] = index;
  // Records by their lease's sequence (references count back in it);
  // transitions by the memory's (`sequence`).
  table_.Hold(index, lease_sequence, view.has_frame());
  if (!view.has_transition()) return absl::OkStatus();
  uint16_t needs[2 * protocol::kMaxFrameStackDepth];
  size_t need_count = 0;
  uint64_t oldest_index = index;
  uint16_t oldest = 0;
  for (int k = 0; k < 2 * depth_; ++k) {
    const uint16_t d = k < depth_ ? view.observation_refs[k] : view.next_refs[k - depth_];
    uint64_t at = 0;
    if (d > lease_sequence || Find(generation, lease, lease_sequence - d, &at) == nullptr ||
        !table_.HoldsFrame(at, lease_sequence - d)) {
      ++missing_;
      return absl::OkStatus();
    }
    if (d == 0 || std::find(needs, needs + need_count, d) != needs + need_count) continue;
    needs[need_count++] = d;
    if (d > oldest) {
      oldest = d;
      oldest_index = at;
    }
  }
  *insert = true;
  if (oldest > 0) table_.AddDependent(oldest_index, index, sequence);
  return absl::OkStatus();
}

absl::Status LocalFrameStore::Assemble(uint64_t index, rl::TransitionBatch* batch) {
  const Slot& slot = slots_[index];
  if (!slot.held) return absl::NotFoundError(absl::StrCat("local slot ", index, " holds nothing"));
  auto lookup = [&](uint64_t sequence) -> absl::Span<const uint8_t> {
    uint64_t at = 0;
    const Slot* s = Find(slot.generation, slot.lease, sequence, &at);
    if (s == nullptr) return {};
    return absl::MakeConstSpan(records_.data() + at * record_bytes_, s->length);
  };
  ASSIGN_OR_RETURN(const rl::StackedTransition t,
                   rl::AssembleStacks(slot.sequence, frame_bytes_, lookup, absl::MakeSpan(stack_),
                                      absl::MakeSpan(next_stack_)));
  return batch->AddBytes(t.action, t.reward, t.discount, t.done, stack_, next_stack_);
}

}  // namespace dreplay::learner
