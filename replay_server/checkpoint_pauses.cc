// Copyright dreplay authors.

#include "replay_server/checkpoint_pauses.h"

#include <time.h>

#include "absl/time/clock.h"

namespace dreplay::server {
absl::Duration ThreadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

CheckpointStepTimer::CheckpointStepTimer() : start_(absl::Now()), cpu_start_(ThreadCpuTime()) {}

absl::Duration CheckpointStepTimer::Record(CheckpointPauses* pauses, CheckpointStep kind) const {
  const absl::Duration wall = absl::Now() - start_;
  pauses->RecordStep(kind, wall, ThreadCpuTime() - cpu_start_);
  return wall;
}

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

void CheckpointPauses::RecordStep(CheckpointStep kind, absl::Duration step, absl::Duration cpu) {
  steps_.Record(absl::ToDoubleSeconds(step));
  MutexLock lock(&mu_);
  step_time_.Record(step);
  absl::Duration& max = max_by_step_[static_cast<int>(kind)];
  if (step > max) max = step;
  absl::Duration& max_cpu = max_cpu_by_step_[static_cast<int>(kind)];
  if (cpu > max_cpu) max_cpu = cpu;
}

void CheckpointPauses::RecordLoopGap(absl::Duration gap, absl::Duration cpu) {
  MutexLock lock(&mu_);
  if (gap > loop_gaps_.max()) longest_gap_cpu_ = cpu;
  if (cpu > max_gap_cpu_) max_gap_cpu_ = cpu;
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
  s.longest_gap_cpu = longest_gap_cpu_;
  s.max_gap_cpu = max_gap_cpu_;
  for (int k = 0; k < kNumCheckpointSteps; ++k) {
    s.max_by_step[k] = max_by_step_[k];
    s.max_cpu_by_step[k] = max_cpu_by_step_[k];
  }
  s.written = written_;
  s.last_duration = last_duration_;
  s.last_bytes = last_bytes_;
  return s;
}

}  // namespace dreplay::server
