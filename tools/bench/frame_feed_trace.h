// Copyright dreplay authors.
//
// frame_feed_trace.h: a recorded MinAtar pixels84 trace and the actors of
// tools/bench/frame_feed_bench that replay it.
//
// RecordTrace plays a game with a uniformly random policy and keeps what an
// actor would see: each episode's first frame, then per step the action,
// reward, flags and the new frame (84x84 grays, the newest of the 4-frame
// stack). TraceFeeder replays it as `environments` environments that start
// at evenly spaced episode starts and wrap around, and turns each step
// into what an actor writes: frame records (rl::FrameRecorder, frames
// stored once) or encoded n-step transitions of stacked s and s' (u8),
// each with its initial priority.
//
//   ASSIGN_OR_RETURN(Trace trace, RecordTrace("MinAtar/Breakout", 4096, 1));
//   TraceFeeder feeder(&trace, TraceFeeder::kFrames, 4, nstep);
//   std::vector<FeedItem> items;
//   RETURN_IF_ERROR(feeder.Step(&items));  // one environment step

#ifndef DREPLAY_TOOLS_BENCH_FRAME_FEED_TRACE_H_
#define DREPLAY_TOOLS_BENCH_FRAME_FEED_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rl/frame_recorder.h"
#include "rl/nstep.h"

namespace dreplay::tools {

// One trace event: an episode's start (its first frame) or a step.
struct TraceEvent {
  bool reset = false;
  int action = 0;
  double reward = 0;
  bool terminated = false;
  bool truncated = false;
  uint32_t frame = 0;  // index into Trace::frames
};

struct Trace {
  std::string game;
  int action_count = 0;
  size_t frame_bytes = 0;
  std::vector<uint8_t> frames;  // frame_bytes each
  std::vector<TraceEvent> events;
  std::vector<size_t> episode_starts;  // indices of the reset events

  absl::Span<const uint8_t> frame(uint32_t i) const {
    return absl::MakeConstSpan(frames.data() + uint64_t{i} * frame_bytes, frame_bytes);
  }
};

// `steps` steps of `game` (a MinAtar game with a pixels84 rendering) under
// a uniformly random policy from `seed`. The last step is marked truncated
// (if it ends nothing), so that a replay can wrap around to the start.
absl::StatusOr<Trace> RecordTrace(const std::string& game, int steps, uint64_t seed);

// What an actor writes for one record or transition.
struct FeedItem {
  std::vector<uint8_t> bytes;
  float priority = 1.0f;
};

class TraceFeeder {
 public:
  enum Kind {
    kStacks,  // encoded n-step transitions of stacked s and s' (u8)
    kFrames,  // frame records (frames stored once)
  };

  // REQUIRES: trace has at least one episode; environments >= 1;
  // nstep.Validate().ok().
  TraceFeeder(const Trace* trace, Kind kind, int environments, const rl::NStepOptions& nstep);

  // Bytes of one item: the encoded transition, or the frame record.
  size_t item_bytes() const;
  // Advances the next environment (round robin) by one step, starting its
  // episode first where needed; appends what the actor writes.
  absl::Status Step(std::vector<FeedItem>* out);
  // Environment steps taken.
  uint64_t steps() const { return steps_; }

 private:
  struct Environment {
    size_t next = 0;             // the next event to replay
    std::deque<uint32_t> stack;  // frame indices, oldest first (kStacks)
    std::unique_ptr<rl::NStepAccumulator> nstep;
  };

  // The stacked observation of `env` as floats (kStacks).
  void Stacked(const Environment& env, std::vector<float>* out) const;
  absl::Status Begin(int e, const TraceEvent& event, std::vector<FeedItem>* out);
  absl::Status Advance(int e, const TraceEvent& event, std::vector<FeedItem>* out);
  absl::Status Emit(std::vector<FeedItem>* out);

  const Trace* const trace_;
  const Kind kind_;
  const rl::NStepOptions nstep_options_;
  const int depth_;
  std::vector<Environment> environments_;
  std::unique_ptr<rl::FrameRecorder> recorder_;  // kFrames
  std::vector<rl::FrameRecorder::Record> records_;
  std::vector<rl::Transition> completed_;
  std::vector<float> stacked_;
  int turn_ = 0;
  uint64_t steps_ = 0;
  uint64_t emitted_ = 0;
};

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_FRAME_FEED_TRACE_H_
