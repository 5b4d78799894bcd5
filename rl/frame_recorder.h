// Copyright dreplay authors.
//
// frame_recorder.h: turns an actor's steps of frame-stacked environments
// into frame records (protocol/frame_record.h): each new frame stored once,
// each n-step transition as back references to the records holding the
// frames of its two stacks. Every record goes to the next sequence of one
// stream of records (an actor's lease), whichever environment it is of.
//
//   FrameRecorder recorder({nstep, /*depth=*/4, /*frame_bytes=*/84 * 84,
//                           /*environments=*/2});
//   std::vector<FrameRecorder::Record> out;
//   RETURN_IF_ERROR(recorder.BeginEpisode(env, first_frame, &out));
//   ... RETURN_IF_ERROR(recorder.AddStep(env, action, reward, new_frame,
//                                        terminated, truncated, &out));
//   // out: records in sequence order, each for the lease's next slot
//
// What it emits, for each environment (the n-step rules of rl/nstep.h, with
// the same floats):
//  - BeginEpisode: one record with the episode's first frame. Its stack is
//    that frame `depth` times (DQN's Atari stacking, as
//    rl/minatar/render.h's FrameStack does).
//  - AddStep: one record with the new frame. It also carries the transition
//    this step completes, if any (the step n steps back). At the episode's
//    end every pending step completes: the first rides with the frame, the
//    others follow in records without a frame.
// A transition's references never cross an episode's start, and reach
// back about environments x (depth + n) records when the environments are
// stepped in turn; an environment left idle while others run lengthens
// them. A reference longer than protocol::kMaxFrameReference is
// OUT_OF_RANGE, and nothing is emitted for that step.
//
// Thread safety: none; one recorder per actor thread.

#ifndef DREPLAY_RL_FRAME_RECORDER_H_
#define DREPLAY_RL_FRAME_RECORDER_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "rl/nstep.h"

namespace dreplay::rl {

struct FrameRecorderOptions {
  NStepOptions nstep;
  // Frames in a stack, 1..protocol::kMaxFrameStackDepth.
  int depth = 4;
  // Bytes of one frame, at least 1.
  size_t frame_bytes = 0;
  // Environments whose records share the stream, at least 1.
  int environments = 1;

  // INVALID_ARGUMENT naming the first bad value.
  absl::Status Validate() const;
};

class FrameRecorder {
 public:
  // One record and the sequence it takes in the stream (0, 1, 2, ...).
  struct Record {
    uint64_t sequence = 0;
    std::vector<uint8_t> bytes;
  };

  // REQUIRES: options.Validate().ok() (checked).
  explicit FrameRecorder(const FrameRecorderOptions& options);

  // Starts an episode of `environment` at `frame`, dropping the steps
  // still pending from one that did not end. INVALID_ARGUMENT for an
  // environment outside [0, environments) or a frame of another size.
  absl::Status BeginEpisode(int environment, absl::Span<const uint8_t> frame,
                            std::vector<Record>* out);

  // One step of `environment`: `action` gave `reward` and `frame`; the
  // environment's `terminated` and `truncated`. Appends its records to
  // `*out`. FAILED_PRECONDITION outside an episode; INVALID_ARGUMENT for a
  // bad environment, frame size or a negative action; OUT_OF_RANGE for a
  // reference too long (see above).
  absl::Status AddStep(int environment, int action, double reward, absl::Span<const uint8_t> frame,
                       bool terminated, bool truncated, std::vector<Record>* out);

  // The sequence the next record takes.
  uint64_t next_sequence() const { return next_sequence_; }
  // The longest reference emitted so far.
  uint32_t longest_reference() const { return longest_reference_; }

 private:
  struct PendingStep {
    std::vector<uint64_t> stack;  // the sequences of the step's stack, oldest first
    int action;
    double reward;
  };
  struct Environment {
    bool in_episode = false;
    std::vector<uint64_t> stack;  // the current stack's sequences, oldest first
    std::deque<PendingStep> pending;
  };

  absl::Status CheckEnvironment(int environment, absl::Span<const uint8_t> frame) const;
  // The record at `sequence` of the transition of pending[index], whose
  // next observation is `next_stack`, with `frame` (none if empty);
  // OUT_OF_RANGE when a reference is too long.
  absl::Status TransitionRecord(const std::deque<PendingStep>& pending, size_t index,
                                const std::vector<uint64_t>& next_stack, uint64_t sequence,
                                bool done, absl::Span<const uint8_t> frame, Record* out) const;
  // The record at `sequence` with `frame` and no transition.
  Record FrameOnlyRecord(uint64_t sequence, absl::Span<const uint8_t> frame,
                         bool episode_start) const;

  const FrameRecorderOptions options_;
  std::vector<Environment> environments_;
  uint64_t next_sequence_ = 0;
  uint32_t longest_reference_ = 0;
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_FRAME_RECORDER_H_
