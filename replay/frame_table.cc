// Copyright dreplay authors.

#include "replay/frame_table.h"

#include <algorithm>

#include "glog/logging.h"

namespace dreplay::replay {

FrameTable::FrameTable(uint64_t capacity, uint32_t max_needs)
    : held_(capacity, 0),
      head_(capacity, kNone),
      next_(capacity, kNone),
      dependent_sequence_(capacity, 0),
      max_needs_(max_needs),
      needs_(capacity * max_needs, 0),
      need_count_(capacity, 0) {
  CHECK_GE(capacity, 1u);
  CHECK_LE(max_needs, 255u);
}

void FrameTable::SetNeeds(uint64_t index, absl::Span<const uint16_t> distances) {
  DCHECK_LT(index, held_.size());
  CHECK_LE(distances.size(), max_needs_);
  std::copy(distances.begin(), distances.end(), needs_.begin() + index * max_needs_);
  need_count_[index] = static_cast<uint8_t>(distances.size());
}

void FrameTable::Hold(uint64_t index, uint64_t sequence, bool has_frame) {
  DCHECK_LT(index, held_.size());
  DCHECK_EQ(head_[index], kNone) << "slot " << index << " still has dependents";
  CHECK_LT(sequence + 1, kFrameBit);
  held_[index] = (sequence + 1) | (has_frame ? kFrameBit : 0);
}

bool FrameTable::HoldsFrame(uint64_t index, uint64_t sequence) const {
  return held_[index] == ((sequence + 1) | kFrameBit);
}

bool FrameTable::Holds(uint64_t index, uint64_t sequence) const {
  return (held_[index] & ~kFrameBit) == sequence + 1;
}

void FrameTable::AddDependent(uint64_t oldest_index, uint64_t transition_index,
                              uint64_t transition_sequence) {
  DCHECK_LT(oldest_index, held_.size());
  DCHECK_LT(transition_index, held_.size());
  next_[transition_index] = head_[oldest_index];
  dependent_sequence_[transition_index] = transition_sequence;
  head_[oldest_index] = transition_index;
}

uint64_t FrameTable::Release(
    uint64_t index,
    absl::FunctionRef<void(uint64_t transition_index, uint64_t transition_sequence)> release) {
  uint64_t released = 0;
  for (uint64_t j = head_[index]; j != kNone;) {
    const uint64_t next = next_[j];
    next_[j] = kNone;
    release(j, dependent_sequence_[j]);
    ++released;
    j = next;
  }
  head_[index] = kNone;
  held_[index] = 0;
  return released;
}

void FrameTable::Clear() {
  std::fill(held_.begin(), held_.end(), 0);
  std::fill(head_.begin(), head_.end(), kNone);
  std::fill(next_.begin(), next_.end(), kNone);
}

}  // namespace dreplay::replay
