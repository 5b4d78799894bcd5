// Copyright dreplay authors.
//
// checkpoint_pauses.h: how long checkpoints held the replay core's thread,
// measured by that thread, for the log, the metrics and the benchmark.
//
// While a checkpoint is in progress (from the first step of its cut until
// the core has taken the writer's result), the core thread records
//   * every checkpoint step it ran, each timed alone (RecordStep): the
//     cut's begin (the O(leases) part), each chunk of the cut
//     (incremental_cut.h), the hand-over to the writer, taking the result;
//   * the gap between the starts of two successive core loop iterations
//     (RecordLoopGap): the longest time ingest and sampling waited, whatever
//     held them (a checkpoint step, the core's own work, a slow scheduler).
// Once a checkpoint is written it records its duration (the cut's begin to
// the file in place) and its bytes (RecordWritten).
//
//   pauses->RecordStep(absl::Now() - step_start);   // core thread
//   pauses->Publish();                              // core thread, now and then
//   CheckpointPauses::Snapshot s = pauses.Take();   // any thread
//
// Thread safety: Record*() and Publish() from one thread (the core's);
// Take() from any thread at any time. The core records into figures of its
// own, without a lock; Publish() copies them, under a mutex, to what Take()
// reads (the server publishes when a checkpoint's result is taken, so the
// core takes that mutex once per checkpoint, never per loop iteration). The
// steps' histogram for export is lock-free and always current
// (common/bucket_histogram.h).

#ifndef DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_PAUSES_H_
#define DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_PAUSES_H_

#include <cstdint>

#include "absl/time/time.h"
#include "common/bucket_histogram.h"
#include "common/latency_histogram.h"
#include "common/mutex.h"

namespace dreplay::server {

// The kinds of checkpoint step on the core thread.
enum class CheckpointStep : int {
  kBegin = 0,  // the cut's O(leases) part
  kChunk,      // one chunk of the cut's entries
  kHandOver,   // the finished cut handed to the writer
  kResult,     // the writer's result taken, counted and logged
};
inline constexpr int kNumCheckpointSteps = 4;
// "begin", "chunk", "hand_over", "result".
const char* CheckpointStepName(CheckpointStep step);

class CheckpointPauses {
 public:
  struct Snapshot {
    HistogramSnapshot steps;  // seconds per checkpoint step (for export; current)
    // The rest as of the last Publish():
    LatencyHistogram step_time;                       // checkpoint steps, for max and percentiles
    absl::Duration max_by_step[kNumCheckpointSteps];  // the longest of each kind
    // The most CPU time the core thread used in one step of each kind: a
    // step much longer by the wall clock was descheduled (a busy machine).
    absl::Duration max_cpu_by_step[kNumCheckpointSteps];
    LatencyHistogram loop_gaps;  // core loop gaps during checkpoints
    // The core thread's CPU time in the longest gap, and the most CPU time
    // in any gap: a gap far longer than its CPU time was the scheduler's.
    absl::Duration longest_gap_cpu;
    absl::Duration max_gap_cpu;
    uint64_t written = 0;  // checkpoints recorded by RecordWritten
    absl::Duration last_duration;
    uint64_t last_bytes = 0;
  };

  CheckpointPauses();
  CheckpointPauses(const CheckpointPauses&) = delete;
  CheckpointPauses& operator=(const CheckpointPauses&) = delete;

  // `step`: wall time; `cpu`: the thread's CPU time in it.
  void RecordStep(CheckpointStep kind, absl::Duration step, absl::Duration cpu);
  // `gap`: wall time; `cpu`: the thread's CPU time in it.
  void RecordLoopGap(absl::Duration gap, absl::Duration cpu);
  void RecordWritten(absl::Duration duration, uint64_t bytes);
  // Makes what was recorded so far visible to Take().
  void Publish();

  Snapshot Take() const;

 private:
  BucketHistogram steps_;
  Snapshot local_;  // the core thread's; `steps` unused
  mutable Mutex mu_;
  Snapshot published_ ABSL_GUARDED_BY(mu_);  // `steps` unused
};

// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
absl::Duration ThreadCpuTime();

// Times one checkpoint step from its construction, by the wall clock and
// by the calling thread's CPU time.
class CheckpointStepTimer {
 public:
  CheckpointStepTimer();
  // Records the step so far into `pauses`; returns its wall time.
  absl::Duration Record(CheckpointPauses* pauses, CheckpointStep kind) const;

 private:
  const absl::Time start_;
  const absl::Duration cpu_start_;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_PAUSES_H_
