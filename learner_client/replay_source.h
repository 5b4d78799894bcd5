// Copyright dreplay authors.
//
// replay_source.h: where the learner loop's batches come from. One
// implementation per placement of the replay memory, so that the loop
// (learner_loop.h) trains the same way whatever the placement, and a new
// placement is a new ReplaySource and a line in MakeReplaySource, not an
// edit to the loop:
//
//   buffer   BufferReplaySource (buffer_replay_source.h): the batches the
//            server pre-sampled, priorities written back through the link.
//   learner  LocalReplaySource (local_replay_source.h): every transition
//            the server forwards, kept in a local prioritized memory that
//            is sampled and updated at the learner.
//   hybrid   LocalReplaySource too, over the transitions the server
//            forwards once each (chosen by priority, uniformly or oldest
//            first: replay_server --forward), in staged batches.
//
// One round of the loop:
//
//   ASSIGN_OR_RETURN(bool got, source->Next(timeout, &batch, &weights));
//   if (got) {
//     ASSIGN_OR_RETURN(auto step, learner->TrainStep(batch, weights));
//     RETURN_IF_ERROR(source->Trained(step.abs_td_errors));
//   }
//
// A source records, through its ReplaySourceContext, the metrics that
// depend on where data comes from: the age of each transition it gives to
// train on, when it gives it, the transitions that crossed the link, and
// the |TD error| of each at its first training use (learner_client/metrics.h). It drops and counts
// what cannot be trained on (DropCounter): bad data never ends a run.
//
// Thread safety: as the loop's; one thread uses a source.

#ifndef DREPLAY_LEARNER_CLIENT_REPLAY_SOURCE_H_
#define DREPLAY_LEARNER_CLIENT_REPLAY_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "learner_client/learner_loop.h"
#include "learner_client/metrics.h"
#include "replay/rate_limiter.h"
#include "rl/dqn.h"
#include "rl/transition.h"

namespace dreplay::learner {

// What a source may use of the loop. Pointers are not owned and outlive the
// source.
struct ReplaySourceContext {
  MetricsRecorder* metrics = nullptr;
  // The environment's shape: what a transition must decode to.
  int observation_size = 0;
  rl::ObservationType observation_type = rl::ObservationType::kFloat32;
  int action_count = 0;
  // New priorities above this are written as this (NaN kept: the server
  // counts it invalid).
  float max_priority = 1e6f;
  // Frames stored once: stacks of this many frames, whose records the
  // learner placement receives (0: encoded transitions).
  int frame_stack = 0;
  // Wall clock (ns since the Unix epoch) for data ages; required.
  std::function<uint64_t()> wall_clock_ns;
};

// Counts transitions left out and warns about them at most every
// kDropWarningInterval.
class DropCounter {
 public:
  // Counts `count` more, and warns (rate-limited) with `why`.
  void Count(uint64_t count, absl::string_view why);
  uint64_t count() const { return count_; }

 private:
  uint64_t count_ = 0;
  absl::Time last_warning_ = absl::InfinitePast();
};

// Records the age of a transition sealed at `insert_time_ns` (0: unknown,
// not recorded) taken for a train step at `now_ns`. Clocks of two hosts
// may disagree: a transition from the future counts as age 0.
void RecordDataAge(MetricsRecorder* metrics, uint64_t insert_time_ns, uint64_t now_ns);

// `priority` bounded by `max_priority` (NaN kept).
inline float BoundPriority(float priority, float max_priority) {
  return priority > max_priority ? max_priority : priority;
}

class ReplaySource {
 public:
  virtual ~ReplaySource() = default;

  // Run() starts: marks where the source's counts begin.
  virtual absl::Status Start() { return absl::OkStatus(); }
  // Waits up to `timeout` for a batch to train on. true: `batch` (cleared
  // first) holds its transitions and `weights` their importance-sampling
  // weights; false: none is ready yet. Errors: the connection's, when it
  // cannot be re-established.
  virtual absl::StatusOr<bool> Next(absl::Duration timeout, rl::TransitionBatch* batch,
                                    std::vector<float>* weights) = 0;
  // The loop may not train now (LearnerLoopOptions::max_updates_per_s): take
  // in data for up to `timeout` without making a batch. The default sleeps.
  virtual absl::Status Idle(absl::Duration timeout);
  // The batch Next() returned last was trained on; `abs_td_errors` holds one
  // |TD error| per row, under the networks before the update: the rows' new
  // priorities (bounded by max_priority).
  virtual absl::Status Trained(absl::Span<const float> abs_td_errors) = 0;
  // Transitions trained on per transition inserted into the replay memory,
  // since Start(); nullopt while unknown.
  virtual absl::StatusOr<std::optional<double>> SamplesPerInsert() = 0;
  // Transitions left out since the source was made (they did not decode or
  // cannot be trained on).
  virtual uint64_t transitions_dropped() const = 0;
  // A memory kept at the learner: its size and rate limiter (0 and null
  // when the memory is elsewhere).
  virtual uint64_t local_size() const { return 0; }
  virtual const replay::RateLimiter* rate_limiter() const { return nullptr; }
};

// The source for options.placement, reading from `io`. InvalidArgument when
// `io` lacks what the placement needs.
absl::StatusOr<std::unique_ptr<ReplaySource>> MakeReplaySource(const LearnerLoopOptions& options,
                                                               const LearnerIo& io,
                                                               const ReplaySourceContext& context);

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_REPLAY_SOURCE_H_
