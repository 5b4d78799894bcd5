// Copyright dreplay authors.
//
// learner_loop.h: the DQN learner's training loop, for both placements of
// the prioritized replay memory:
//
//   buffer   the replay memory is in the buffer node; the
//            learner takes the batches the server pre-sampled (with their
//            importance-sampling weights) from a BatchSource, trains on each,
//            and writes the batch's new priorities (|TD error| before the
//            update) back through it.
//   learner  the replay memory is at the learner; the buffer node only
//            forwards: every ingested transition arrives, in order, from a
//            TransitionStream; the learner inserts it (with the actor's
//            initial priority) into its own replay::ReplayMemory, the same
//            code as the server's, samples batches from it with the same
//            alpha and beta schedule, trains, and updates the priorities
//            locally.
//
//   LearnerLoopOptions options;  // placement, env, dqn, ...
//   ASSIGN_OR_RETURN(auto loop, LearnerLoop::Create(options, io));
//   RETURN_IF_ERROR(loop->Run(stop));
//   SummaryRecord summary = loop->Summary();
//
// Where batches come from is one ReplaySource per placement
// (replay_source.h: buffer_replay_source.h, local_replay_source.h); the
// loop itself does not branch on the placement.
//
// Every placement is measured identically (learner_client/metrics.h): the
// |TD error| of a transition that crossed the link is taken at its first
// training use, from the abs_td_errors of that TrainStep() (in "buffer" the
// step that consumes the batch it arrived in; in "learner" and "hybrid" its
// first sampling from the local memory), so no arm pays for an extra
// forward pass.
//
// The learner placement's local memory obeys a replay::RateLimiter
// (samples_per_insert, spi_error_buffer, min_replay_size): inserted =
// transitions generated (TransitionStream::generated(): those the
// forwarding lost included), sampled = transitions trained on. In the buffer placement the server
// enforces it with the same counts; the loop only reports the achieved
// ratio. Payloads may carry padding after their encoding (actor
// --payload_pad_bytes); only the encoding is stored (rl::EncodedTransitionPrefix).
//
// Bad data never ends the run: a batch entry or forwarded transition that
// does not decode, or that rl::CheckTrainable refuses (non-finite reward or
// observation, action outside the network's outputs), is left out and
// counted (ProgressRecord::transitions_dropped, with a warning at most every
// kDropWarningInterval). In the buffer placement the batch trains on the
// rest (not at all when nothing is left) and the dropped entries' priority
// written back is 0 (the lowest the server stores: rarely sampled again).
// Parameters with a value that is not finite are not published
// (ProgressRecord::params_withheld, with a warning): actors keep the last
// good ones.
//
// Run() also publishes the online network (rl/params_format.h buffer)
// through a ParamsSink at the start and every publish_every train steps,
// runs a greedy evaluation every eval_interval (EvaluateGreedy below), and
// reports a ProgressRecord every progress_interval (and one at the end). It
// ends when `stop` is set, after max_train_steps, after `duration`, or,
// with stop_when_solved, at the first evaluation whose mean return reaches
// solve_return; a run that did not end solved gets a final evaluation.
//
// Thread safety: not thread-safe; one thread runs the loop. `stop` may be
// set from any thread or a signal handler.

#ifndef DREPLAY_LEARNER_CLIENT_LEARNER_LOOP_H_
#define DREPLAY_LEARNER_CLIENT_LEARNER_LOOP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "learner_client/learner_io.h"
#include "learner_client/metrics.h"
#include "replay/rate_limiter.h"
#include "replay/replay_memory.h"
#include "rl/dqn.h"
#include "rl/nstep.h"
#include "rl/policy.h"
#include "rl/qnet.h"
#include "rl/transition.h"

namespace dreplay::learner {

// The most often the loop warns about dropped transitions or withheld
// parameters (each counted every time).
inline constexpr absl::Duration kDropWarningInterval = absl::Seconds(10);
// How far behind its governed schedule (max_updates_per_s) the loop may
// catch up at once, in seconds of steps.
inline constexpr double kGovernorCatchUpS = 0.05;

struct LearnerLoopOptions {
  ReplayPlacement placement = ReplayPlacement::kBuffer;
  // Frames stored once (the server's LayoutConfig::frame_stack; set by
  // ApplyServerConfig): in the learner placement the forwarded payloads are
  // frame records, kept in a LocalFrameStore (local_frames.h). 0: encoded
  // transitions.
  int frame_stack = 0;
  // The environment (a MakeEnvironment() name) and what it observes
  // (pixels84: MinAtar only): the network's shape and the greedy
  // evaluation.
  std::string env = "CartPole-v1";
  rl::ObservationMode observation = rl::ObservationMode::kNative;
  // DQN hyper-parameters. network.observation_size and action_count are
  // taken from the environment (leave them 0 or set them to its values), and
  // so are the network's torso and input channels (rl::NetworkOptionsFor).
  rl::DqnOptions dqn;

  // Learner placement only: the local replay memory (capacity a power of
  // two; alpha, epsilon and seed as the server's), the importance-sampling
  // exponent's schedule (per sampled batch, as the server's), the batch
  // size, and the transitions needed before training starts.
  replay::ReplayMemoryOptions memory;
  replay::BetaSchedule beta;
  uint32_t batch_size = 64;
  uint64_t min_replay_size = 1000;
  // Learner placement: the local memory's rate limiter
  // (replay::RateLimiterOptions with min_size_to_sample = min_replay_size):
  // target transitions trained on per transition generated (0: no limit) and
  // the slack around it, in transitions (with a limit, >= batch_size).
  double samples_per_insert = 0;
  double spi_error_buffer = 0;

  // The probe set (metrics.h, probe_loss): probe_size n-step transitions
  // (`nstep`: the actors' n and gamma) of uniformly random actions drawn
  // with probe_seed. 0: no probe loss.
  int probe_size = 1024;
  uint64_t probe_seed = 12345;
  rl::NStepOptions nstep;

  // New priorities (|TD error|) above this are written as this (+inf
  // included); NaN is written as is (the server drops it, counted
  // invalid). Finite, > 0. The server bounds them again (its own
  // --max_priority).
  float max_priority = 1e6f;
  // At most this many train steps per second (learner_client/
  // update_governor.h), so that placements can be compared at equal
  // updates; 0: as fast as data allows. >= 0, finite. Steps held up are
  // caught up within kGovernorCatchUpS, so no window longer than that
  // trains faster than this.
  double max_updates_per_s = 0;
  // Publish parameters every this many train steps (and at the start).
  // 0: never.
  int64_t publish_every = 100;
  // Ends after this many train steps (0: no limit) or this long.
  int64_t max_train_steps = 0;
  absl::Duration duration = absl::InfiniteDuration();
  bool stop_when_solved = false;
  double solve_return = 475.0;
  int eval_episodes = 100;
  // InfiniteDuration: no evaluation in the loop at all (not even at the end),
  // as when snapshots are evaluated offline; then stop_when_solved is refused.
  absl::Duration eval_interval = absl::Seconds(5);
  // A parameter snapshot through LearnerIo::on_snapshot at the start, every
  // this long, and at the end; InfiniteDuration: none. Evaluating snapshots
  // offline keeps the evaluation's cost off the learner's CPU, the same in
  // every run whatever the policy's episode lengths.
  absl::Duration snapshot_interval = absl::InfiniteDuration();
  uint64_t eval_seed = 1000003;
  absl::Duration progress_interval = absl::Seconds(5);
  // Longest wait for data before the loop checks its clocks again.
  absl::Duration wait_timeout = absl::Milliseconds(50);
  // Written into the metrics.
  uint64_t seed = 0;

  // InvalidArgument naming the first bad value.
  absl::Status Validate() const;
};

// The learner placement's rate limiter options: samples_per_insert,
// spi_error_buffer, and min_replay_size as min_size_to_sample.
replay::RateLimiterOptions LocalLimiterOptions(const LearnerLoopOptions& options);

class ReplaySource;
class UpdateGovernor;

class LearnerLoop {
 public:
  // InvalidArgument for bad options or a missing source for the placement.
  static absl::StatusOr<std::unique_ptr<LearnerLoop>> Create(const LearnerLoopOptions& options,
                                                             const LearnerIo& io);
  ~LearnerLoop();
  LearnerLoop(const LearnerLoop&) = delete;
  LearnerLoop& operator=(const LearnerLoop&) = delete;

  // Trains until an end condition (see the file comment). Blocks. Errors:
  // the sources' and sinks' (connection lost for good, bad data), the
  // learner's.
  absl::Status Run(const std::atomic<bool>& stop);

  // The summary of the run so far (wall time up to the end of Run()).
  SummaryRecord Summary() const;
  const MetricsRecorder& metrics() const { return metrics_; }
  const rl::DqnLearner& learner() const { return *learner_; }
  // Learner placement: transitions in the local replay memory.
  uint64_t local_replay_size() const;
  // Learner placement: the local memory's rate limiter (null otherwise).
  const replay::RateLimiter* rate_limiter() const;
  // The probe set (empty with probe_size 0).
  const rl::TransitionBatch& probe_set() const { return *probe_; }
  // The probe loss under the current networks (metrics.h); nullopt with an
  // empty probe set.
  absl::StatusOr<std::optional<double>> ProbeLoss() const;

 private:
  LearnerLoop(const LearnerLoopOptions& options, const LearnerIo& io);
  absl::Status Init();
  absl::Status CollectProbeSet(int observation_size);
  double WallSeconds() const;
  uint64_t WallClockNs() const;
  // Serializes the online network as `version` into params_buffer_; false
  // (counted, warned) when a value is not finite: nothing to publish.
  absl::StatusOr<std::optional<size_t>> SerializeFinite(uint64_t version);
  // Trains on the source's next batch, if one is ready within `timeout`;
  // *trained: a train step was made.
  absl::Status Round(absl::Duration timeout, bool* trained);
  // Publishes and waits (the first parameters, before training).
  absl::Status PublishParams();
  // Publishes the current parameters if a publication is due and the link
  // is free of the previous one (ParamsSink::PublishIfIdle).
  absl::Status PublishDueParams();
  // `last`: the run's last snapshot, with the actors' counts Run() read at
  // the end (the last progress record's too); otherwise with what is known.
  absl::Status Snapshot(bool last);
  // `last`: the evaluation after the last snapshot, stamped with the
  // actors' counts Run() read at the end.
  absl::Status Evaluate(bool last);
  // `last`: the run's last record, from counters read now (the actors':
  // those Run() read at the end); otherwise from what is known without
  // waiting for the link.
  absl::Status EmitProgress(bool last);

  const LearnerLoopOptions options_;
  const LearnerIo io_;
  MetricsRecorder metrics_;
  std::unique_ptr<rl::DqnLearner> learner_;
  std::unique_ptr<ReplaySource> source_;
  std::unique_ptr<UpdateGovernor> governor_;  // made by Run()

  std::unique_ptr<rl::TransitionBatch> probe_;
  mutable std::vector<float> probe_errors_;

  // Scratch for training.
  std::unique_ptr<rl::TransitionBatch> batch_;
  std::vector<float> weights_;
  std::vector<uint8_t> params_buffer_;
  uint64_t params_withheld_ = 0;
  absl::Time last_params_warning_ = absl::InfinitePast();

  absl::Time start_;
  absl::Time end_;  // when Run() returned (InfiniteFuture while it runs)
  uint64_t publishes_ = 0;
  uint64_t snapshots_ = 0;
  bool publish_due_ = false;
};

// A batched greedy evaluation: `episodes` episodes of `env` observed as
// `observation`, episode i
// starting from Reset(seed + i) as rl::EvaluatePolicy() does, all stepped
// together with one forward pass of `network` per step (actions: ArgMax of
// the Q values, the lowest index among equals). InvalidArgument for
// episodes < 1 or a network that does not fit the environment; NotFound for
// an unknown environment.
absl::StatusOr<rl::EvaluationResult> EvaluateGreedy(
    const rl::QNetwork& network, const std::string& env, int episodes, uint64_t seed,
    rl::ObservationMode observation = rl::ObservationMode::kNative);

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_LEARNER_LOOP_H_
