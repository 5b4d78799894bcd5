// Copyright dreplay authors.

#include "replay_server/checkpoint_pauses.h"

namespace dreplay::server {

const char* CheckpointStepName(CheckpointStep step) {
  switch (step) {
    case CheckpointStep::kBegin:
      return "begin";
    case CheckpointStep::kChunk:
      return "chunk";
    case CheckpointStep::kHandOver:
      return "hand_over";
    case CheckpointStep::kResult:
      return "result";
  }
  return "unknown";
}

CheckpointPauses::CheckpointPauses() : steps_(BucketHistogram::DelayBoundsSeconds()) {}

void CheckpointPauses::RecordStep(CheckpointStep kind, absl::Duration step) {
  steps_.Record(absl::ToDoubleSeconds(step));
  MutexLock lock(&mu_);
  step_time_.Record(step);
  absl::Duration& max = max_by_step_[static_cast<int>(kind)];
  if (step > max) max = step;
}

void CheckpointPauses::RecordLoopGap(absl::Duration gap) {
  MutexLock lock(&mu_);
  loop_gaps_.Record(gap);
}

void CheckpointPauses::RecordWritten(absl::Duration duration, uint64_t bytes) {
  MutexLock lock(&mu_);
  ++written_;
  last_duration_ = duration;
  last_bytes_ = bytes;
}

CheckpointPauses::Snapshot CheckpointPauses::Take() const {
  Snapshot s;
  s.steps = steps_.Snapshot();
  MutexLock lock(&mu_);
  s.step_time = step_time_;
  s.loop_gaps = loop_gaps_;
  for (int k = 0; k < kNumCheckpointSteps; ++k) s.max_by_step[k] = max_by_step_[k];
  s.written = written_;
  s.last_duration = last_duration_;
  s.last_bytes = last_bytes_;
  return s;
}

}  // namespace dreplay::server
