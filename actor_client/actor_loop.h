// Copyright dreplay authors.
//
// actor_loop.h: what an actor process does, apart from its connection: step
// its environments with an epsilon-greedy policy on its own copy of the
// Q-network, turn the steps into n-step transitions, give each an initial
// priority, hand them to an experience sink in batches, refresh the network
// from the learner's published parameters now and then, and report episode
// statistics.
//
//   ActorLoopOptions options;  // env, num_envs, actor_index, num_actors, ...
//   ASSIGN_OR_RETURN(auto loop, ActorLoop::Create(options, io));
//   RETURN_IF_ERROR(loop->Run(stop));  // until stop, max_env_steps or duration
//
// ActorServiceIo (actor_client/service_io.h) plugs the replay service into
// ActorIo: an ExperienceWriter behind ExperienceSink, a ParamFetcher behind
// ParamsSource and an ActorStatsPublisher behind EpisodeStatsSink. Tests
// plug in fakes.
//
// One Step():
//   1. one batched forward pass of the network over the current observation
//      of every environment, then per environment an epsilon-greedy action
//      (rl::EpsilonGreedy) with that environment's epsilon;
//   2. each environment steps; its n-step accumulator (rl/nstep.h) emits the
//      transitions this completes; a finished episode records its return and
//      starts the next one (Reset() continues the environment's seeded
//      stream);
//   3. once flush_batch transitions are pending, their initial priorities
//      are computed in one pass: |TD error| under the actor's own network,
//      used as online and target network alike (rl::ComputeAbsTdErrors with
//      the same network twice, double DQN); each is encoded
//      (rl/transition.h) and appended to the sink, and the sink is flushed;
//   4. every param_refresh_steps environment steps (of all environments
//      together) the network is refreshed from the params source; until
//      the learner has published a first version the actor acts with its
//      initial network (seeded with network_seed: the learner's initial
//      network when both use the same seed and sizes);
//   5. every stats_interval the episode statistics are published.
//
// Exploration (Ape-X): the environments of all actors form one ladder.
// Environment e of actor i is ladder rung k = i * num_envs + e of
// K = num_actors * num_envs, with epsilon_k = base^(1 + alpha k / (K - 1))
// (rl::ApeXEpsilon; base 0.4 and alpha 7 as in the paper). With one
// environment per actor this is the paper's epsilon_i = 0.4^(1 + 7 i/(N-1)).
//
// Rate: max_steps_per_s > 0 caps the environment steps per second of the
// process (all environments together) by sleeping between steps, so that
// actors sharing a machine leave CPU to the learner.
//
// Seeds: environment e of actor i is reset first with a seed derived from
// (seed, i, e); its exploration draws come from its own generator, derived
// the same way. The same flags give the same actions as long as the
// parameters received are the same.
//
// Thread safety: not thread-safe; one thread runs the loop. `stop` in Run()
// may be set from any thread (or a signal handler: it is only loaded).

#ifndef DREPLAY_ACTOR_CLIENT_ACTOR_LOOP_H_
#define DREPLAY_ACTOR_CLIENT_ACTOR_LOOP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "rl/environment.h"
#include "rl/frame_recorder.h"
#include "rl/nstep.h"
#include "rl/qnet.h"
#include "rl/random.h"
#include "rl/transition.h"

namespace dreplay::actor {

// Where the actor's transitions go.
class ExperienceSink {
 public:
  virtual ~ExperienceSink() = default;
  // Adds one encoded transition with its initial priority (|TD error|).
  virtual absl::Status Append(absl::Span<const uint8_t> payload, float priority) = 0;
  // Inserts what was appended; blocks until it is committed.
  virtual absl::Status Flush() = 0;
  // Transitions committed so far.
  virtual uint64_t committed() const = 0;
};

// Where newer parameters come from.
class ParamsSource {
 public:
  virtual ~ParamsSource() = default;
  // Loads parameters newer than the ones `network` got from this source
  // into it. Returns true when it did, false when there is nothing newer.
  // Errors: FailedPrecondition for parameters of another architecture; the
  // source's own (connection) errors.
  virtual absl::StatusOr<bool> Refresh(rl::QNetwork* network) = 0;
  // The version last loaded; 0: none.
  virtual uint64_t version() const = 0;
};

// Where episode statistics go.
class EpisodeStatsSink {
 public:
  virtual ~EpisodeStatsSink() = default;
  virtual void RecordSteps(uint64_t steps) = 0;
  virtual void RecordEpisode(double episode_return) = 0;
  // Publishes the statistics; `transitions` is the count committed.
  virtual absl::Status Publish(uint64_t transitions) = 0;
};

// The loop's connections; not owned, must outlive the loop. `params` and
// `stats` may be null (no refresh, no statistics).
struct ActorIo {
  ExperienceSink* experience = nullptr;
  ParamsSource* params = nullptr;
  EpisodeStatsSink* stats = nullptr;
};

// The largest ActorLoopOptions::payload_pad_bytes (64 MiB).
inline constexpr size_t kMaxPayloadPadBytes = size_t{64} << 20;

struct ActorLoopOptions {
  // A name MakeEnvironment() knows, and what it observes (pixels84: MinAtar
  // only).
  std::string env = "CartPole-v1";
  rl::ObservationMode observation = rl::ObservationMode::kNative;
  // Environments stepped by this process, each with its own epsilon.
  int num_envs = 1;
  // This actor's place among all actors (the epsilon ladder).
  int actor_index = 0;
  int num_actors = 1;
  double epsilon_base = 0.4;
  double epsilon_alpha = 7.0;
  // n-step transitions (n and gamma must be the learner's).
  rl::NStepOptions nstep;
  // Hidden layer sizes of the Q-network's head (must be the learner's; the
  // torso is the one rl::NetworkOptionsFor() picks for the environment).
  std::vector<int> hidden_sizes = {64, 64};
  // Seed of the initial network (use the learner's seed to start from its
  // initial network).
  uint64_t network_seed = 0;
  // Seed of the environments and of the exploration draws.
  uint64_t seed = 0;
  // Transitions per flush to the sink (and per priority pass).
  int flush_batch = 32;
  // Bytes appended after each transition's encoding (zeros): stored in the
  // replay memory and moved across every link like the transition, never fed
  // to a network (the encoding states its own length, so readers strip
  // them). A model of rich observations, such as camera frames, that cost
  // bandwidth and memory without changing the learning problem. In [0,
  // kMaxPayloadPadBytes].
  size_t payload_pad_bytes = 0;
  // Frames stored once (the server's --frame_stack): 0 appends encoded
  // transitions; D > 0 appends frame records (rl/frame_recorder.h) of
  // stacks of D frames instead: each new frame once, each transition as
  // references, with the priority its transition gets (records without a
  // transition get none). Needs an observation of D stacked frames
  // (pixels84: 4) and no payload_pad_bytes. In [0, 16].
  int frame_stack = 0;
  // Initial priorities (|TD error| under the actor's network) above this
  // are sent as this; NaN as 0 ("no estimate": the server uses its current
  // maximum). Finite, > 0. The server bounds them again (its own
  // --max_priority).
  float max_priority = 1e6f;
  // Environment steps (all environments together) between refreshes.
  int64_t param_refresh_steps = 500;
  // Run() ends after this many environment steps (0: no limit) ...
  int64_t max_env_steps = 0;
  // ... or after this long (infinite: no limit).
  absl::Duration duration = absl::InfiniteDuration();
  // Environment steps per second of the process; 0: no cap.
  double max_steps_per_s = 0;
  // How often Run() publishes the statistics.
  absl::Duration stats_interval = absl::Seconds(1);

  // InvalidArgument naming the first bad value (an unknown env included).
  absl::Status Validate() const;
};

struct ActorLoopStats {
  uint64_t env_steps = 0;        // all environments together
  uint64_t episodes = 0;         // finished
  uint64_t transitions = 0;      // appended to the sink
  uint64_t records = 0;          // frame records appended (frame_stack > 0)
  uint64_t param_refreshes = 0;  // newer parameters loaded
  double last_return = 0;        // of the last finished episode
  double priority_sum = 0;       // of the initial priorities appended
};

class ActorLoop {
 public:
  // InvalidArgument for bad options or a null io.experience.
  static absl::StatusOr<std::unique_ptr<ActorLoop>> Create(const ActorLoopOptions& options,
                                                           const ActorIo& io);
  ~ActorLoop();
  ActorLoop(const ActorLoop&) = delete;
  ActorLoop& operator=(const ActorLoop&) = delete;

  // One step of every environment (see the file comment); flushes,
  // refreshes the parameters when due. Returns the first error of the sink,
  // the params source or the network.
  absl::Status Step();

  // Appends and flushes the transitions still pending (not the n-step
  // remainders of unfinished episodes) and publishes the statistics.
  absl::Status Finish();

  // Steps until `stop` is set, max_env_steps are done or the duration is
  // over, at most max_steps_per_s, publishing statistics every
  // stats_interval; then Finish(). Blocks.
  absl::Status Run(const std::atomic<bool>& stop);

  // The epsilon of each environment, in order.
  const std::vector<double>& epsilons() const { return epsilons_; }
  const ActorLoopStats& stats() const { return stats_; }
  const rl::QNetwork& network() const { return *network_; }
  const rl::EnvironmentSpec& env_spec() const;

 private:
  struct EnvState {
    std::unique_ptr<rl::Environment> env;
    std::unique_ptr<rl::NStepAccumulator> nstep;
    rl::Random random{0};
    std::vector<float> observation;
    double episode_return = 0;
  };

  ActorLoop(const ActorLoopOptions& options, const ActorIo& io);
  absl::Status Init();
  // Computes priorities of the pending transitions, appends them and
  // flushes the sink.
  absl::Status FlushPending();
  // Frames stored once: FlushPending's appends, of the queued records.
  absl::Status FlushRecords();
  absl::Status RefreshParams();
  // Frames stored once: the records of environment e's episode start
  // (observation) or step, queued behind the pending transitions; the
  // records that carry a transition take the next of completed_'s, in
  // order.
  absl::Status RecordEpisodeStart(int e, absl::Span<const float> observation);
  absl::Status RecordStep(int e, int action, const rl::StepResult& step);
  // The records queued; each carries pending_[transition] or none (-1).
  void QueueRecords(const std::vector<rl::FrameRecorder::Record>& records);

  const ActorLoopOptions options_;
  const ActorIo io_;
  std::unique_ptr<rl::QNetwork> network_;
  std::vector<EnvState> envs_;
  std::vector<double> epsilons_;
  int observation_size_ = 0;
  rl::ObservationType observation_type_ = rl::ObservationType::kFloat32;
  int action_count_ = 0;

  // Scratch, reused every step.
  std::vector<float> observations_;  // num_envs x observation_size
  std::vector<float> q_values_;      // num_envs x action_count
  std::vector<rl::Transition> completed_;
  std::vector<rl::Transition> pending_;  // waiting for their priorities
  // Frames stored once: the recorder, the records waiting for their
  // transitions' priorities, and scratch.
  std::unique_ptr<rl::FrameRecorder> recorder_;
  struct PendingRecord {
    std::vector<uint8_t> bytes;
    int64_t transition;  // into pending_, or -1
  };
  std::vector<PendingRecord> pending_records_;
  std::vector<rl::FrameRecorder::Record> records_;
  std::vector<uint8_t> frame_;
  std::unique_ptr<rl::TransitionBatch> batch_;
  std::vector<float> priorities_;
  std::vector<uint8_t> encoded_;

  int64_t steps_since_refresh_ = 0;
  ActorLoopStats stats_;
};

}  // namespace dreplay::actor

#endif  // DREPLAY_ACTOR_CLIENT_ACTOR_LOOP_H_
