// Copyright dreplay authors.

#include "protocol/frame_record.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::protocol {
namespace {

absl::Status Bad(const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("frame record: ", what));
}

absl::Status CheckTransitionFields(const FrameRecordView& r) {
  const FrameRecordHeader& h = r.header;
  if (!r.has_transition()) {
    if (h.action != 0 || h.reward != 0.0f || h.discount != 0.0f || h.done != 0 || h.steps != 0) {
      return Bad("transition fields set in a record without a transition");
    }
    for (int i = 0; i < h.depth; ++i) {
      if (r.observation_refs[i] != 0 || r.next_refs[i] != 0) {
        return Bad("references in a record without a transition");
      }
    }
    return absl::OkStatus();
  }
  if (h.done > 1) return Bad("done is not 0 or 1");
  if (h.steps == 0) return Bad("steps is 0");
  if (h.action < 0) return Bad("negative action");
  if (!(h.discount >= 0.0f && h.discount <= 1.0f)) return Bad("discount outside [0, 1]");
  if (r.episode_start()) return Bad("an episode's first frame completes a transition");
  for (int i = 0; i + 1 < h.depth; ++i) {
    if (r.observation_refs[i] < r.observation_refs[i + 1] || r.next_refs[i] < r.next_refs[i + 1]) {
      return Bad("references are not oldest first");
    }
  }
  if (r.next_refs[h.depth - 1] >= r.observation_refs[h.depth - 1]) {
    return Bad("the next observation is not newer than the observation");
  }
  if (!r.has_frame() && r.next_refs[h.depth - 1] == 0) {
    return Bad("a zero reference in a record without a frame");
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<uint64_t> FrameRecordSequences(const FrameRecordView& record, uint64_t sequence) {
  std::vector<uint64_t> out;
  out.reserve(2 * record.header.depth);
  for (int i = 0; i < record.header.depth; ++i)
    out.push_back(sequence - record.observation_refs[i]);
  for (int i = 0; i < record.header.depth; ++i) out.push_back(sequence - record.next_refs[i]);
  return out;
}

TransitionFault CheckFrameRecord(const TransitionSpec& spec, int depth,
                                 absl::Span<const uint8_t> payload, FrameRecordView* out) {
  if (spec.observation_type != ObservationType::kUint8) return TransitionFault::kObservationType;
  if (payload.size() < kFrameRecordHeaderBytes) return TransitionFault::kTooShort;
  FrameRecordHeader h;
  std::memcpy(&h, payload.data(), kFrameRecordHeaderBytes);
  if (depth < 1 || h.depth != depth || spec.observation_size % depth != 0) {
    return TransitionFault::kObservationSize;
  }
  const uint32_t frame_bytes = static_cast<uint32_t>(spec.observation_size / depth);
  if (h.frame_bytes != 0 && h.frame_bytes != frame_bytes) return TransitionFault::kObservationSize;
  const size_t size =
      h.frame_bytes != 0 ? FrameRecordBytes(depth, frame_bytes) : FrameRecordRefsEnd(depth);
  if (payload.size() < size) return TransitionFault::kTooShort;
  if ((h.flags & kFrameHasTransition) != 0) {
    if (h.action < 0 || h.action >= spec.action_count) return TransitionFault::kAction;
    if (!std::isfinite(h.reward)) return TransitionFault::kReward;
    if (!(h.discount >= 0.0f && h.discount <= 1.0f)) return TransitionFault::kDiscount;
    if (h.steps > spec.n_step) return TransitionFault::kFields;
  }
  if (!DecodeFrameRecord(payload, frame_bytes, out).ok()) return TransitionFault::kFields;
  return TransitionFault::kNone;
}

bool IsFrameRecord(absl::Span<const uint8_t> payload) {
  return payload.size() > offsetof(FrameRecordHeader, kind) &&
         payload[offsetof(FrameRecordHeader, kind)] == kFrameRecordKind;
}

absl::Status DecodeFrameRecord(absl::Span<const uint8_t> bytes, size_t frame_bytes,
                               FrameRecordView* out) {
  if (bytes.size() < kFrameRecordHeaderBytes) return Bad("shorter than its header");
  FrameRecordView& r = *out;
  std::memcpy(&r.header, bytes.data(), kFrameRecordHeaderBytes);
  const FrameRecordHeader& h = r.header;
  if (h.kind != kFrameRecordKind) return Bad("another kind");
  if ((h.flags & ~kFrameKnownFlags) != 0) return Bad("unknown flags");
  if (h.depth < 1 || h.depth > kMaxFrameStackDepth) return Bad("depth outside 1..16");
  if (h.reserved[0] != 0 || h.reserved[1] != 0 || h.reserved[2] != 0) {
    return Bad("reserved bytes are not zero");
  }
  if (r.has_frame() ? h.frame_bytes != frame_bytes || frame_bytes == 0 : h.frame_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("frame record: frame_bytes %d with the frame flag %s (frames of %d bytes)",
                        h.frame_bytes, r.has_frame() ? "set" : "clear", frame_bytes));
  }
  if (r.episode_start() && !r.has_frame()) return Bad("an episode start without a frame");
  const size_t size =
      r.has_frame() ? FrameRecordBytes(h.depth, frame_bytes) : FrameRecordRefsEnd(h.depth);
  if (bytes.size() < size) return Bad("shorter than its header states");
  std::memcpy(r.observation_refs, bytes.data() + kFrameRecordHeaderBytes, 2 * h.depth);
  std::memcpy(r.next_refs, bytes.data() + kFrameRecordHeaderBytes + 2 * h.depth, 2 * h.depth);
  r.frame = r.has_frame() ? bytes.subspan(FrameRecordFrameOffset(h.depth), frame_bytes)
                          : absl::Span<const uint8_t>();
  return CheckTransitionFields(r);
}

absl::StatusOr<size_t> EncodeFrameRecord(const FrameRecordView& record, absl::Span<uint8_t> out) {
  FrameRecordHeader h = record.header;
  const int depth = h.depth;
  if (depth < 1 || depth > kMaxFrameStackDepth) return Bad("depth outside 1..16");
  h.frame_bytes = record.has_frame() ? static_cast<uint32_t>(record.frame.size()) : 0;
  h.kind = kFrameRecordKind;
  std::memset(h.reserved, 0, sizeof(h.reserved));
  const size_t size =
      record.has_frame() ? FrameRecordBytes(depth, record.frame.size()) : FrameRecordRefsEnd(depth);
  if (out.size() < size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("frame record: %d bytes, %d available", size, out.size()));
  }
  std::memset(out.data(), 0, size);
  std::memcpy(out.data(), &h, kFrameRecordHeaderBytes);
  std::memcpy(out.data() + kFrameRecordHeaderBytes, record.observation_refs, 2 * depth);
  std::memcpy(out.data() + kFrameRecordHeaderBytes + 2 * depth, record.next_refs, 2 * depth);
  if (record.has_frame()) {
    std::memcpy(out.data() + FrameRecordFrameOffset(depth), record.frame.data(),
                record.frame.size());
  }
  FrameRecordView check;
  absl::Status valid = DecodeFrameRecord(out.first(size), h.frame_bytes, &check);
  if (!valid.ok()) return valid;
  return size;
}

}  // namespace dreplay::protocol
