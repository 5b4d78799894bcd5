// Copyright dreplay authors.

#include "learner_client/forwarded_frames.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "protocol/frame_record.h"
#include "rl/frame_stacks.h"

namespace dreplay::learner {

ForwardedFrameIndex::ForwardedFrameIndex(uint64_t capacity, int depth, size_t frame_bytes,
                                         Lookup lookup)
    : depth_(depth),
      frame_bytes_(frame_bytes),
      lookup_(std::move(lookup)),
      slots_(capacity),
      stack_(static_cast<size_t>(depth) * frame_bytes),
      next_stack_(static_cast<size_t>(depth) * frame_bytes) {
  CHECK_GE(capacity, 1u);
  CHECK_GE(depth, 1);
  CHECK_GE(frame_bytes, 1u);
  CHECK(lookup_ != nullptr);
}

void ForwardedFrameIndex::Release(uint64_t index) {
  Slot& slot = slots_[index];
  for (const uint64_t q : slot.needs) {
    const auto it = records_.find(Key{slot.generation, slot.lease, q});
    CHECK(it != records_.end()) << "a record kept for local slot " << index << " is gone";
    if (--it->second.users == 0) records_.erase(it);
  }
  slot.needs.clear();
  slot.held = false;
}

absl::Span<const uint8_t> ForwardedFrameIndex::Find(uint64_t generation, uint32_t lease,
                                                    uint64_t sequence) const {
  if (const auto it = records_.find(Key{generation, lease, sequence}); it != records_.end()) {
    return it->second.bytes;
  }
  const absl::Span<const uint8_t> bytes = lookup_(lease, sequence);
  protocol::FrameRecordView view;
  if (bytes.empty() || !protocol::DecodeFrameRecord(bytes, frame_bytes_, &view).ok() ||
      !view.has_frame()) {
    return {};
  }
  return bytes;
}

absl::Status ForwardedFrameIndex::Accept(uint64_t index, uint64_t generation, uint32_t lease,
                                         uint64_t lease_sequence, absl::Span<const uint8_t> record,
                                         bool* insert) {
  *insert = false;
  Release(index);
  protocol::FrameRecordView view;
  RETURN_IF_ERROR(protocol::DecodeFrameRecord(record, frame_bytes_, &view));
  if (view.header.depth != depth_ || !view.has_transition()) {
    return absl::InvalidArgumentError(absl::StrCat("record ", lease_sequence, " of lease ", lease,
                                                   ": depth ", view.header.depth,
                                                   view.has_transition() ? "" : ", no transition"));
  }
  // The records its assembly reads: its own (for its fields), then those
  // whose frames its stacks take.
  uint16_t distances[2 * protocol::kMaxFrameStackDepth + 1] = {0};
  size_t count = 1;
  for (int k = 0; k < 2 * depth_; ++k) {
    const uint16_t d = k < depth_ ? view.observation_refs[k] : view.next_refs[k - depth_];
    const bool held =
        d == 0 ? view.has_frame()
               : d <= lease_sequence && !Find(generation, lease, lease_sequence - d).empty();
    if (!held) {
      ++missing_;
      return absl::OkStatus();
    }
    if (std::find(distances, distances + count, d) == distances + count) distances[count++] = d;
  }
  Slot& slot = slots_[index];
  slot.generation = generation;
  slot.lease = lease;
  slot.sequence = lease_sequence;
  for (size_t k = 0; k < count; ++k) {
    const uint64_t q = lease_sequence - distances[k];
    Record& kept = records_[Key{generation, lease, q}];
    if (kept.users == 0) {
      const absl::Span<const uint8_t> bytes =
          distances[k] == 0 ? record : lookup_(lease, q);  // held: checked above
      kept.bytes.assign(bytes.begin(), bytes.end());
      ++records_copied_;
    }
    ++kept.users;
    slot.needs.push_back(q);
  }
  slot.held = true;
  *insert = true;
  return absl::OkStatus();
}

absl::Status ForwardedFrameIndex::Assemble(uint64_t index, rl::TransitionBatch* batch) {
  const Slot& slot = slots_[index];
  if (!slot.held) return absl::NotFoundError(absl::StrCat("local slot ", index, " holds nothing"));
  auto lookup = [&](uint64_t sequence) -> absl::Span<const uint8_t> {
    const auto it = records_.find(Key{slot.generation, slot.lease, sequence});
    if (it == records_.end()) return {};
    return it->second.bytes;
  };
  ASSIGN_OR_RETURN(const rl::StackedTransition t,
                   rl::AssembleStacks(slot.sequence, frame_bytes_, lookup, absl::MakeSpan(stack_),
                                      absl::MakeSpan(next_stack_)));
  return batch->AddBytes(t.action, t.reward, t.discount, t.done, stack_, next_stack_);
}

}  // namespace dreplay::learner
