// Copyright dreplay authors.

#include "rl/frame_recorder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "protocol/frame_record.h"

namespace dreplay::rl {

using protocol::FrameRecordView;

absl::Status FrameRecorderOptions::Validate() const {
  if (absl::Status s = nstep.Validate(); !s.ok()) return s;
  if (depth < 1 || depth > protocol::kMaxFrameStackDepth) {
    return absl::InvalidArgumentError(absl::StrCat("frame stack depth ", depth, " is outside [1, ",
                                                   protocol::kMaxFrameStackDepth, "]"));
  }
  if (frame_bytes < 1) return absl::InvalidArgumentError("frame_bytes must be at least 1");
  if (environments < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("environments=", environments, " must be at least 1"));
  }
  return absl::OkStatus();
}

FrameRecorder::FrameRecorder(const FrameRecorderOptions& options)
    : options_(options), environments_(options.environments) {
  const absl::Status valid = options_.Validate();
  CHECK(valid.ok()) << valid;
}

absl::Status FrameRecorder::CheckEnvironment(int environment,
                                             absl::Span<const uint8_t> frame) const {
  if (environment < 0 || environment >= options_.environments) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment ", environment, " is outside [0, ", options_.environments, ")"));
  }
  if (frame.size() != options_.frame_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a frame of ", frame.size(), " bytes, expected ", options_.frame_bytes));
  }
  return absl::OkStatus();
}

FrameRecorder::Record FrameRecorder::FrameOnlyRecord(uint64_t sequence,
                                                     absl::Span<const uint8_t> frame,
                                                     bool episode_start) const {
  FrameRecordView view{};
  view.header.flags = protocol::kFrameHasFrame | (episode_start ? protocol::kFrameEpisodeStart : 0);
  view.header.depth = static_cast<uint8_t>(options_.depth);
  view.frame = frame;
  Record record{sequence,
                std::vector<uint8_t>(protocol::FrameRecordBytes(options_.depth, frame.size()))};
  const absl::StatusOr<size_t> n = protocol::EncodeFrameRecord(view, absl::MakeSpan(record.bytes));
  CHECK(n.ok()) << n.status();  // a record with a frame and nothing else always encodes
  return record;
}

absl::Status FrameRecorder::TransitionRecord(const std::deque<PendingStep>& pending, size_t index,
                                             const std::vector<uint64_t>& next_stack,
                                             uint64_t sequence, bool done,
                                             absl::Span<const uint8_t> frame, Record* out) const {
  FrameRecordView view{};
  view.header.flags =
      protocol::kFrameHasTransition | (frame.empty() ? 0 : protocol::kFrameHasFrame);
  view.header.depth = static_cast<uint8_t>(options_.depth);
  NStepReturn sum;
  for (size_t i = index; i < pending.size(); ++i) {
    sum.Add(pending[i].reward, options_.nstep.discount);
  }
  view.header.action = pending[index].action;
  view.header.reward = static_cast<float>(sum.reward);
  view.header.discount = static_cast<float>(sum.discount);
  view.header.done = done ? 1 : 0;
  view.header.steps = static_cast<uint8_t>(pending.size() - index);
  for (int i = 0; i < options_.depth; ++i) {
    const uint64_t back = sequence - pending[index].stack[i];
    const uint64_t next_back = sequence - next_stack[i];
    if (back > protocol::kMaxFrameReference) {
      return absl::OutOfRangeError(absl::StrCat(
          "a transition's frame is ", back, " records back, beyond the longest reference ",
          protocol::kMaxFrameReference, " (an environment idle while others ran?)"));
    }
    view.observation_refs[i] = static_cast<uint16_t>(back);
    view.next_refs[i] = static_cast<uint16_t>(next_back);
  }
  view.frame = frame;
  out->sequence = sequence;
  out->bytes.resize(frame.empty() ? protocol::FrameRecordRefsEnd(options_.depth)
                                  : protocol::FrameRecordBytes(options_.depth, frame.size()));
  const absl::StatusOr<size_t> n = protocol::EncodeFrameRecord(view, absl::MakeSpan(out->bytes));
  if (!n.ok()) return n.status();
  return absl::OkStatus();
}

absl::Status FrameRecorder::BeginEpisode(int environment, absl::Span<const uint8_t> frame,
                                         std::vector<Record>* out) {
  if (absl::Status s = CheckEnvironment(environment, frame); !s.ok()) return s;
  Environment& env = environments_[environment];
  const uint64_t sequence = next_sequence_++;
  env.pending.clear();
  env.stack.assign(options_.depth, sequence);
  env.in_episode = true;
  out->push_back(FrameOnlyRecord(sequence, frame, /*episode_start=*/true));
  return absl::OkStatus();
}

absl::Status FrameRecorder::AddStep(int environment, int action, double reward,
                                    absl::Span<const uint8_t> frame, bool terminated,
                                    bool truncated, std::vector<Record>* out) {
  if (absl::Status s = CheckEnvironment(environment, frame); !s.ok()) return s;
  Environment& env = environments_[environment];
  if (!env.in_episode) {
    return absl::FailedPreconditionError(absl::StrCat(
        "AddStep() outside an episode of environment ", environment, "; call BeginEpisode()"));
  }
  if (action < 0) return absl::InvalidArgumentError(absl::StrCat("negative action ", action));
  // Everything is built first and committed only when every record is.
  const uint64_t sequence = next_sequence_;
  std::deque<PendingStep> pending = env.pending;
  pending.push_back(PendingStep{env.stack, action, reward});
  std::vector<uint64_t> stack(env.stack.begin() + 1, env.stack.end());
  stack.push_back(sequence);
  const bool ends = terminated || truncated;
  const size_t completes =
      ends ? pending.size() : (static_cast<int>(pending.size()) == options_.nstep.n ? 1 : 0);
  std::vector<Record> records(std::max<size_t>(completes, 1));
  if (completes == 0) records[0] = FrameOnlyRecord(sequence, frame, /*episode_start=*/false);
  for (size_t i = 0; i < completes; ++i) {
    // A terminal state has no value to bootstrap from; a truncated episode
    // stopped in a state that still has one.
    absl::Status s = TransitionRecord(pending, i, stack, sequence + i, terminated,
                                      i == 0 ? frame : absl::Span<const uint8_t>(), &records[i]);
    if (!s.ok()) return s;
  }
  for (size_t i = 0; i < completes; ++i) {  // the oldest frame of each observation
    longest_reference_ = std::max<uint32_t>(
        longest_reference_, static_cast<uint32_t>(sequence + i - pending[i].stack[0]));
  }
  pending.erase(pending.begin(), pending.begin() + completes);
  env.pending = std::move(pending);
  env.stack = std::move(stack);
  env.in_episode = !ends;
  next_sequence_ += records.size();
  for (Record& r : records) out->push_back(std::move(r));
  return absl::OkStatus();
}

}  // namespace dreplay::rl
