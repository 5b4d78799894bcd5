// Copyright dreplay authors.

#include "rl/frame_stacks.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace dreplay::rl {

using protocol::FrameRecordView;

absl::StatusOr<StackedTransition> AssembleStacks(uint64_t sequence, size_t frame_bytes,
                                                 RecordLookup lookup,
                                                 absl::Span<uint8_t> observation,
                                                 absl::Span<uint8_t> next_observation) {
  const absl::Span<const uint8_t> bytes = lookup(sequence);
  if (bytes.empty()) return absl::NotFoundError(absl::StrCat("record ", sequence, " is not held"));
  FrameRecordView record;
  if (absl::Status s = protocol::DecodeFrameRecord(bytes, frame_bytes, &record); !s.ok()) {
    return s;
  }
  if (!record.has_transition()) {
    return absl::FailedPreconditionError(absl::StrCat("record ", sequence, " has no transition"));
  }
  const int depth = record.header.depth;
  const size_t stack_bytes = static_cast<size_t>(depth) * frame_bytes;
  if (observation.size() != stack_bytes || next_observation.size() != stack_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("stacks of ", observation.size(), " and ",
                                                   next_observation.size(), " bytes, expected ",
                                                   stack_bytes));
  }
  for (int i = 0; i < 2 * depth; ++i) {
    const uint16_t back = i < depth ? record.observation_refs[i] : record.next_refs[i - depth];
    if (back > sequence) {
      return absl::NotFoundError(absl::StrCat("record ", sequence, " refers ", back,
                                              " records back, before the stream's start"));
    }
    FrameRecordView source = record;
    if (back != 0) {
      const absl::Span<const uint8_t> source_bytes = lookup(sequence - back);
      if (source_bytes.empty()) {
        return absl::NotFoundError(absl::StrCat("record ", sequence - back, ", which record ",
                                                sequence, " refers to, is not held"));
      }
      if (absl::Status s = protocol::DecodeFrameRecord(source_bytes, frame_bytes, &source);
          !s.ok()) {
        return s;
      }
    }
    if (!source.has_frame()) {
      return absl::InvalidArgumentError(
          absl::StrCat("record ", sequence - back, " has no frame for record ", sequence));
    }
    uint8_t* to = (i < depth ? observation.data() : next_observation.data()) +
                  static_cast<size_t>(i % depth) * frame_bytes;
    std::memcpy(to, source.frame.data(), frame_bytes);
  }
  StackedTransition t;
  t.action = record.header.action;
  t.reward = record.header.reward;
  t.discount = record.header.discount;
  t.done = record.header.done != 0;
  t.steps = record.header.steps;
  t.depth = depth;
  return t;
}

}  // namespace dreplay::rl
