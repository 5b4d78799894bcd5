// Copyright dreplay authors.

#include "replay_server/checkpoint_pauses.h"

namespace dreplay::server {

CheckpointPauses::CheckpointPauses() : steps_(BucketHistogram::DelayBoundsSeconds()) {}

void CheckpointPauses::RecordStep(absl::Duration step) {
  steps_.Record(absl::ToDoubleSeconds(step));
  MutexLock lock(&mu_);
  step_time_.Record(step);
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
  s.written = written_;
  s.last_duration = last_duration_;
  s.last_bytes = last_bytes_;
  return s;
}

}  // namespace dreplay::server
