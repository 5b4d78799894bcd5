// Copyright dreplay authors.

#include "replay_server/checkpoint/checkpoint_pauses.h"

#include "absl/time/clock.h"
#include "common/thread_cpu.h"

namespace dreplay::server {
absl::Duration ThreadCpuTime() { return absl::Nanoseconds(ThreadCpuNanos()); }

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
  local_.step_time.Record(step);
  absl::Duration& max = local_.max_by_step[static_cast<int>(kind)];
  if (step > max) max = step;
  absl::Duration& max_cpu = local_.max_cpu_by_step[static_cast<int>(kind)];
  if (cpu > max_cpu) max_cpu = cpu;
}

void CheckpointPauses::RecordLoopGap(absl::Duration gap, absl::Duration cpu) {
  if (gap > local_.loop_gaps.max()) local_.longest_gap_cpu = cpu;
  if (cpu > local_.max_gap_cpu) local_.max_gap_cpu = cpu;
  local_.loop_gaps.Record(gap);
}

void CheckpointPauses::RecordWritten(absl::Duration duration, uint64_t bytes) {
  ++local_.written;
  local_.last_duration = duration;
  local_.last_bytes = bytes;
}

void CheckpointPauses::Publish() {
  MutexLock lock(&mu_);
  published_ = local_;
}

CheckpointPauses::Snapshot CheckpointPauses::Take() const {
  Snapshot s;
  {
    MutexLock lock(&mu_);
    s = published_;
  }
  s.steps = steps_.Snapshot();
  return s;
}

}  // namespace dreplay::server
