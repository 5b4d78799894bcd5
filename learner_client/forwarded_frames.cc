// Copyright dreplay authors.

#include "learner_client/forwarded_frames.h"

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

bool ForwardedFrameIndex::HoldsFrame(uint32_t lease, uint64_t sequence) const {
  const absl::Span<const uint8_t> bytes = lookup_(lease, sequence);
  if (bytes.empty()) return false;
  protocol::FrameRecordView view;
  return protocol::DecodeFrameRecord(bytes, frame_bytes_, &view).ok() && view.has_frame();
}

absl::Status ForwardedFrameIndex::Accept(uint64_t index, uint32_t lease, uint64_t lease_sequence,
                                         absl::Span<const uint8_t> record, bool* insert) {
  *insert = false;
  Slot& slot = slots_[index];
  slot.held = false;
  protocol::FrameRecordView view;
  RETURN_IF_ERROR(protocol::DecodeFrameRecord(record, frame_bytes_, &view));
  if (view.header.depth != depth_ || !view.has_transition()) {
    return absl::InvalidArgumentError(absl::StrCat("record ", lease_sequence, " of lease ", lease,
                                                   ": depth ", view.header.depth,
                                                   view.has_transition() ? "" : ", no transition"));
  }
  for (int k = 0; k < 2 * depth_; ++k) {
    const uint16_t d = k < depth_ ? view.observation_refs[k] : view.next_refs[k - depth_];
    const bool held =
        d == 0 ? view.has_frame() : d <= lease_sequence && HoldsFrame(lease, lease_sequence - d);
    if (!held) {
      ++missing_;
      return absl::OkStatus();
    }
  }
  slot = Slot{lease, lease_sequence, true};
  *insert = true;
  return absl::OkStatus();
}

absl::Status ForwardedFrameIndex::Assemble(uint64_t index, rl::TransitionBatch* batch) {
  const Slot& slot = slots_[index];
  if (!slot.held) return absl::NotFoundError(absl::StrCat("local slot ", index, " holds nothing"));
  auto lookup = [&](uint64_t sequence) { return lookup_(slot.lease, sequence); };
  absl::StatusOr<rl::StackedTransition> t = rl::AssembleStacks(
      slot.sequence, frame_bytes_, lookup, absl::MakeSpan(stack_), absl::MakeSpan(next_stack_));
  if (!t.ok()) {
    // A record was overwritten since it arrived (NOT_FOUND); one that no
    // longer decodes or has lost its frame is as gone.
    return absl::NotFoundError(absl::StrCat("transition ", slot.sequence, " of lease ", slot.lease,
                                            ": ", t.status().message()));
  }
  return batch->AddBytes(t->action, t->reward, t->discount, t->done, stack_, next_stack_);
}

}  // namespace dreplay::learner
