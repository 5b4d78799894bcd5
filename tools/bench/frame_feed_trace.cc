// Copyright dreplay authors.

#include "tools/bench/frame_feed_trace.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "protocol/frame_record.h"
#include "rl/make_environment.h"
#include "rl/minatar/render.h"
#include "rl/transition.h"

namespace dreplay::tools {
namespace {

constexpr size_t kFrameBytes = rl::minatar::kPixels84Size;
constexpr int kDepth = rl::minatar::kFrameStackDepth;

// The newest frame of a pixels84 stack (floats 0..255) appended as bytes.
uint32_t KeepNewest(const std::vector<float>& observation, Trace* trace) {
  const auto index = static_cast<uint32_t>(trace->frames.size() / kFrameBytes);
  for (size_t i = observation.size() - kFrameBytes; i < observation.size(); ++i) {
    trace->frames.push_back(static_cast<uint8_t>(observation[i]));
  }
  return index;
}

// Deterministic, varied initial priorities (what actors send is the
// server's business only through the sampling it drives).
float PriorityOf(uint64_t n) { return 0.5f + 0.1f * static_cast<float>(n % 7); }

}  // namespace

absl::StatusOr<Trace> RecordTrace(const std::string& game, int steps, uint64_t seed) {
  if (steps < 2) return absl::InvalidArgumentError(absl::StrCat("a trace of ", steps, " steps"));
  ASSIGN_OR_RETURN(std::unique_ptr<rl::Environment> env,
                   rl::MakeEnvironment(game, rl::ObservationMode::kPixels84));
  Trace trace;
  trace.game = game;
  trace.action_count = env->spec().action_count;
  trace.frame_bytes = kFrameBytes;
  trace.frames.reserve(static_cast<size_t>(steps + 64) * kFrameBytes);
  std::mt19937_64 policy(seed);
  std::vector<float> observation = env->Reset(seed);
  bool start = true;
  for (int t = 0; t < steps;) {
    if (start) {
      trace.episode_starts.push_back(trace.events.size());
      TraceEvent reset;
      reset.reset = true;
      reset.frame = KeepNewest(observation, &trace);
      trace.events.push_back(reset);
      start = false;
    }
    TraceEvent e;
    e.action = static_cast<int>(policy() % static_cast<uint64_t>(trace.action_count));
    ASSIGN_OR_RETURN(rl::StepResult step, env->Step(e.action));
    ++t;
    e.reward = step.reward;
    e.terminated = step.terminated;
    e.truncated = step.truncated || (t == steps && !step.done());
    e.frame = KeepNewest(step.observation, &trace);
    trace.events.push_back(e);
    if (e.terminated || e.truncated) {
      start = true;
      if (t < steps) observation = env->Reset();
    }
  }
  return trace;
}

TraceFeeder::TraceFeeder(const Trace* trace, Kind kind, int environments,
                         const rl::NStepOptions& nstep)
    : trace_(trace), kind_(kind), nstep_options_(nstep), depth_(kDepth) {
  CHECK(!trace->episode_starts.empty());
  CHECK_GE(environments, 1);
  CHECK(nstep.Validate().ok());
  environments_.resize(environments);
  const size_t episodes = trace->episode_starts.size();
  for (int e = 0; e < environments; ++e) {
    environments_[e].next = trace->episode_starts[episodes * e / environments];
  }
  if (kind == kFrames) {
    rl::FrameRecorderOptions o;
    o.nstep = nstep;
    o.depth = depth_;
    o.frame_bytes = trace->frame_bytes;
    o.environments = environments;
    recorder_ = std::make_unique<rl::FrameRecorder>(o);
  }
}

size_t TraceFeeder::item_bytes() const {
  const size_t stack = static_cast<size_t>(depth_) * trace_->frame_bytes;
  return kind_ == kFrames ? protocol::FrameRecordBytes(depth_, trace_->frame_bytes)
                          : rl::EncodedTransitionSize(stack, rl::ObservationType::kUint8);
}

void TraceFeeder::Stacked(const Environment& env, std::vector<float>* out) const {
  out->clear();
  for (const uint32_t f : env.stack) {
    const absl::Span<const uint8_t> frame = trace_->frame(f);
    out->insert(out->end(), frame.begin(), frame.end());
  }
}

absl::Status TraceFeeder::Begin(int e, const TraceEvent& event, std::vector<FeedItem>* out) {
  Environment& env = environments_[e];
  if (kind_ == kFrames) {
    RETURN_IF_ERROR(recorder_->BeginEpisode(e, trace_->frame(event.frame), &records_));
  } else {
    env.stack.assign(depth_, event.frame);
    env.nstep = std::make_unique<rl::NStepAccumulator>(
        nstep_options_, static_cast<size_t>(depth_) * trace_->frame_bytes);
    Stacked(env, &stacked_);
    RETURN_IF_ERROR(env.nstep->BeginEpisode(stacked_));
  }
  return Emit(out);
}

absl::Status TraceFeeder::Advance(int e, const TraceEvent& event, std::vector<FeedItem>* out) {
  Environment& env = environments_[e];
  if (kind_ == kFrames) {
    RETURN_IF_ERROR(recorder_->AddStep(e, event.action, event.reward, trace_->frame(event.frame),
                                       event.terminated, event.truncated, &records_));
  } else {
    env.stack.pop_front();
    env.stack.push_back(event.frame);
    Stacked(env, &stacked_);
    RETURN_IF_ERROR(env.nstep->AddStep(event.action, event.reward, stacked_, event.terminated,
                                       event.truncated, &completed_));
  }
  ++steps_;
  return Emit(out);
}

absl::Status TraceFeeder::Emit(std::vector<FeedItem>* out) {
  for (rl::FrameRecorder::Record& r : records_) {
    out->push_back(FeedItem{std::move(r.bytes), PriorityOf(emitted_++)});
  }
  records_.clear();
  for (const rl::Transition& t : completed_) {
    FeedItem item;
    item.bytes.resize(item_bytes());
    ASSIGN_OR_RETURN(const size_t n, rl::EncodeTransition(t, absl::MakeSpan(item.bytes),
                                                          rl::ObservationType::kUint8));
    item.bytes.resize(n);
    item.priority = PriorityOf(emitted_++);
    out->push_back(std::move(item));
  }
  completed_.clear();
  return absl::OkStatus();
}

absl::Status TraceFeeder::Step(std::vector<FeedItem>* out) {
  const int e = turn_;
  turn_ = (turn_ + 1) % static_cast<int>(environments_.size());
  Environment& env = environments_[e];
  // Each environment starts at an episode start; after the trace's last
  // (truncated) step it wraps around to the first.
  for (;;) {
    if (env.next >= trace_->events.size()) env.next = 0;
    const TraceEvent& event = trace_->events[env.next++];
    if (event.reset) {
      RETURN_IF_ERROR(Begin(e, event, out));
      continue;  // the step after it
    }
    return Advance(e, event, out);
  }
}

}  // namespace dreplay::tools
