// Copyright dreplay authors.

#include "actor_client/actor_loop.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "protocol/frame_record.h"
#include "rl/dqn.h"
#include "rl/make_environment.h"
#include "rl/policy.h"

namespace dreplay::actor {
namespace {

// Streams derived from one seed: the environments' first resets and the
// exploration draws.
constexpr uint64_t kEnvStream = 1;
constexpr uint64_t kExplorationStream = 2;

// SplitMix64's finaliser: decorrelates seeds that differ in a few bits.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t DeriveSeed(uint64_t seed, uint64_t stream, uint64_t actor, uint64_t env) {
  return Mix(Mix(Mix(Mix(seed) ^ stream) ^ actor) ^ env);
}

}  // namespace

absl::Status ActorLoopOptions::Validate() const {
  if (num_envs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_envs=", num_envs, " must be >= 1"));
  }
  if (num_actors < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_actors=", num_actors, " must be >= 1"));
  }
  if (actor_index < 0 || actor_index >= num_actors) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor_index=", actor_index, " must be in [0, num_actors=", num_actors, ")"));
  }
  if (!(epsilon_base >= 0 && epsilon_base <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon_base=", epsilon_base, " must be in [0, 1]"));
  }
  if (!(epsilon_alpha >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon_alpha=", epsilon_alpha, " must be >= 0"));
  }
  RETURN_IF_ERROR(nstep.Validate());
  for (int size : hidden_sizes) {
    if (size < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hidden_sizes=", absl::StrJoin(hidden_sizes, ","), ": every size must be >= 1"));
    }
  }
  if (flush_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("flush_batch=", flush_batch, " must be >= 1"));
  }
  if (!(max_priority > 0) || !std::isfinite(max_priority)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_priority=", max_priority, " must be finite and > 0"));
  }
  if (payload_pad_bytes > kMaxPayloadPadBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload_pad_bytes=", payload_pad_bytes, " must be <= ", kMaxPayloadPadBytes));
  }
  if (frame_stack < 0 || frame_stack > protocol::kMaxFrameStackDepth) {
    return absl::InvalidArgumentError(absl::StrCat("frame_stack=", frame_stack, " must be in [0, ",
                                                   protocol::kMaxFrameStackDepth, "]"));
  }
  if (frame_stack > 0 && payload_pad_bytes > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload_pad_bytes=", payload_pad_bytes,
                     " cannot pad frame records (frame_stack=", frame_stack, ")"));
  }
  if (param_refresh_steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("param_refresh_steps=", param_refresh_steps, " must be >= 1"));
  }
  if (max_env_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_env_steps=", max_env_steps, " must be >= 0"));
  }
  if (duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration=", absl::FormatDuration(duration), " must be > 0"));
  }
  if (!(max_steps_per_s >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_steps_per_s=", max_steps_per_s, " must be >= 0"));
  }
  if (stats_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stats_interval=", absl::FormatDuration(stats_interval), " must be > 0"));
  }
  const absl::StatusOr<std::unique_ptr<rl::Environment>> made =
      rl::MakeEnvironment(env, observation);
  if (!made.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("env=", env, ": ", made.status().message()));
  }
  const rl::EnvironmentSpec& spec = (*made)->spec();
  if (frame_stack > 0 && (spec.observation_layout != rl::ObservationLayout::kPixels84 ||
                          spec.observation_channels != frame_stack)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame_stack=", frame_stack, " needs observations of ", frame_stack,
        " stacked frames; env=", env, " observing ", rl::ObservationModeName(observation), " has ",
        spec.observation_channels, " (frames: --observation=pixels84 --frame_stack=4)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ActorLoop>> ActorLoop::Create(const ActorLoopOptions& options,
                                                             const ActorIo& io) {
  RETURN_IF_ERROR(options.Validate());
  if (io.experience == nullptr) {
    return absl::InvalidArgumentError("ActorLoop needs an experience sink");
  }
  std::unique_ptr<ActorLoop> loop(new ActorLoop(options, io));
  RETURN_IF_ERROR(loop->Init());
  return loop;
}

ActorLoop::ActorLoop(const ActorLoopOptions& options, const ActorIo& io)
    : options_(options), io_(io) {}

ActorLoop::~ActorLoop() = default;

const rl::EnvironmentSpec& ActorLoop::env_spec() const { return envs_.front().env->spec(); }

absl::Status ActorLoop::Init() {
  const int ladder_size = options_.num_actors * options_.num_envs;
  envs_.resize(options_.num_envs);
  for (int e = 0; e < options_.num_envs; ++e) {
    EnvState& state = envs_[e];
    ASSIGN_OR_RETURN(state.env, rl::MakeEnvironment(options_.env, options_.observation));
    state.nstep = std::make_unique<rl::NStepAccumulator>(
        options_.nstep, static_cast<size_t>(state.env->spec().observation_size));
    state.random.Seed(DeriveSeed(options_.seed, kExplorationStream, options_.actor_index, e));
    state.observation =
        state.env->Reset(DeriveSeed(options_.seed, kEnvStream, options_.actor_index, e));
    RETURN_IF_ERROR(state.nstep->BeginEpisode(state.observation));
    const int rung = options_.actor_index * options_.num_envs + e;
    epsilons_.push_back(
        rl::ApeXEpsilon(rung, ladder_size, options_.epsilon_base, options_.epsilon_alpha));
  }
  const rl::EnvironmentSpec& spec = env_spec();
  observation_size_ = spec.observation_size;
  action_count_ = spec.action_count;
  observation_type_ = spec.observation_type;
  ASSIGN_OR_RETURN(network_,
                   rl::QNetwork::Create(rl::NetworkOptionsFor(spec, options_.hidden_sizes),
                                        options_.network_seed));
  observations_.resize(static_cast<size_t>(options_.num_envs) * observation_size_);
  q_values_.resize(static_cast<size_t>(options_.num_envs) * action_count_);
  batch_ = std::make_unique<rl::TransitionBatch>(observation_size_, observation_type_);
  // The encoding, then payload_pad_bytes zeros that stay zero.
  encoded_.assign(
      rl::EncodedTransitionSize(observation_size_, observation_type_) + options_.payload_pad_bytes,
      0);
  pending_.reserve(options_.flush_batch + options_.num_envs * options_.nstep.n);
  if (options_.frame_stack > 0) {
    rl::FrameRecorderOptions recorder;
    recorder.nstep = options_.nstep;
    recorder.depth = options_.frame_stack;
    recorder.frame_bytes = static_cast<size_t>(observation_size_ / options_.frame_stack);
    recorder.environments = options_.num_envs;
    recorder_ = std::make_unique<rl::FrameRecorder>(recorder);
    frame_.resize(recorder.frame_bytes);
    for (int e = 0; e < options_.num_envs; ++e) {
      RETURN_IF_ERROR(RecordEpisodeStart(e, envs_[e].observation));
    }
  }
  return absl::OkStatus();
}

absl::Status ActorLoop::RecordEpisodeStart(int e, absl::Span<const float> observation) {
  // The newest frame is the stack's last (frames oldest first); its values
  // are whole numbers in [0, 255] (the encoding's u8).
  std::copy(observation.end() - frame_.size(), observation.end(), frame_.begin());
  records_.clear();
  RETURN_IF_ERROR(recorder_->BeginEpisode(e, frame_, &records_));
  QueueRecords(records_);
  return absl::OkStatus();
}

absl::Status ActorLoop::RecordStep(int e, int action, const rl::StepResult& step) {
  const std::vector<float>& observation = step.observation;
  std::copy(observation.end() - frame_.size(), observation.end(), frame_.begin());
  records_.clear();
  RETURN_IF_ERROR(recorder_->AddStep(e, action, step.reward, frame_, step.terminated,
                                     step.truncated, &records_));
  QueueRecords(records_);
  return absl::OkStatus();
}

void ActorLoop::QueueRecords(const std::vector<rl::FrameRecorder::Record>& records) {
  // Called before completed_ joins pending_: its transitions, in order, are
  // the records' that carry one (the recorder and the accumulator follow
  // the same n-step rules, rl/frame_recorder.h).
  int64_t next = static_cast<int64_t>(pending_.size());
  for (const rl::FrameRecorder::Record& r : records) {
    protocol::FrameRecordView view;
    CHECK(protocol::DecodeFrameRecord(r.bytes, frame_.size(), &view).ok());
    pending_records_.push_back({r.bytes, view.has_transition() ? next++ : -1});
  }
  CHECK_EQ(next, static_cast<int64_t>(pending_.size() + completed_.size()))
      << "the recorder and the n-step accumulator disagree";
}

absl::Status ActorLoop::Step() {
  const int num_envs = options_.num_envs;
  for (int e = 0; e < num_envs; ++e) {
    std::copy(envs_[e].observation.begin(), envs_[e].observation.end(),
              observations_.begin() + static_cast<size_t>(e) * observation_size_);
  }
  RETURN_IF_ERROR(network_->QValues(observations_, absl::MakeSpan(q_values_)));
  for (int e = 0; e < num_envs; ++e) {
    EnvState& state = envs_[e];
    const absl::Span<const float> q = absl::MakeConstSpan(
        q_values_.data() + static_cast<size_t>(e) * action_count_, action_count_);
    const int action = rl::EpsilonGreedy(q, epsilons_[e], state.random);
    ASSIGN_OR_RETURN(rl::StepResult step, state.env->Step(action));
    state.episode_return += step.reward;
    completed_.clear();
    RETURN_IF_ERROR(state.nstep->AddStep(action, step.reward, step.observation, step.terminated,
                                         step.truncated, &completed_));
    if (recorder_ != nullptr) RETURN_IF_ERROR(RecordStep(e, action, step));
    for (rl::Transition& transition : completed_) pending_.push_back(std::move(transition));
    if (step.done()) {
      ++stats_.episodes;
      stats_.last_return = state.episode_return;
      if (io_.stats != nullptr) io_.stats->RecordEpisode(state.episode_return);
      state.episode_return = 0;
      state.observation = state.env->Reset();
      RETURN_IF_ERROR(state.nstep->BeginEpisode(state.observation));
      completed_.clear();
      if (recorder_ != nullptr) RETURN_IF_ERROR(RecordEpisodeStart(e, state.observation));
    } else {
      state.observation = std::move(step.observation);
    }
  }
  stats_.env_steps += num_envs;
  if (io_.stats != nullptr) io_.stats->RecordSteps(num_envs);
  if (pending_.size() >= static_cast<size_t>(options_.flush_batch)) {
    RETURN_IF_ERROR(FlushPending());
  }
  steps_since_refresh_ += num_envs;
  if (steps_since_refresh_ >= options_.param_refresh_steps) {
    steps_since_refresh_ = 0;
    RETURN_IF_ERROR(RefreshParams());
  }
  return absl::OkStatus();
}

absl::Status ActorLoop::FlushPending() {
  if (pending_.empty()) return absl::OkStatus();
  batch_->Clear();
  for (const rl::Transition& transition : pending_) RETURN_IF_ERROR(batch_->Add(transition));
  priorities_.resize(pending_.size());
  RETURN_IF_ERROR(rl::ComputeAbsTdErrors(*network_, *network_, *batch_, /*double_dqn=*/true,
                                         absl::MakeSpan(priorities_)));
  for (float& p : priorities_) p = std::isnan(p) ? 0.0f : std::min(p, options_.max_priority);
  if (recorder_ != nullptr) return FlushRecords();
  for (size_t i = 0; i < pending_.size(); ++i) {
    ASSIGN_OR_RETURN(const size_t bytes, rl::EncodeTransition(pending_[i], absl::MakeSpan(encoded_),
                                                              observation_type_));
    RETURN_IF_ERROR(io_.experience->Append(
        absl::MakeConstSpan(encoded_.data(), bytes + options_.payload_pad_bytes), priorities_[i]));
    stats_.priority_sum += priorities_[i];
  }
  stats_.transitions += pending_.size();
  pending_.clear();
  return io_.experience->Flush();
}

absl::Status ActorLoop::FlushRecords() {
  for (const PendingRecord& r : pending_records_) {
    const float priority = r.transition >= 0 ? priorities_[r.transition] : 0.0f;
    RETURN_IF_ERROR(io_.experience->Append(r.bytes, priority));
    if (r.transition >= 0) stats_.priority_sum += priority;
  }
  stats_.transitions += pending_.size();
  stats_.records += pending_records_.size();
  pending_records_.clear();
  pending_.clear();
  return io_.experience->Flush();
}

absl::Status ActorLoop::RefreshParams() {
  if (io_.params == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(const bool fresh, io_.params->Refresh(network_.get()));
  if (fresh) {
    if (stats_.param_refreshes == 0) {
      LOG(INFO) << "actor " << options_.actor_index << ": first parameters (version "
                << io_.params->version() << ") after " << stats_.env_steps << " steps";
    }
    ++stats_.param_refreshes;
  }
  return absl::OkStatus();
}

absl::Status ActorLoop::Finish() {
  RETURN_IF_ERROR(FlushPending());
  if (io_.stats != nullptr) RETURN_IF_ERROR(io_.stats->Publish(io_.experience->committed()));
  return absl::OkStatus();
}

absl::Status ActorLoop::Run(const std::atomic<bool>& stop) {
  const absl::Time start = absl::Now();
  const absl::Time end = options_.duration == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                       : start + options_.duration;
  // Pacing: step k (of all environments) is due at start + k * period; a
  // loop that fell behind by more than kMaxLag does not catch up in a burst.
  constexpr absl::Duration kMaxLag = absl::Seconds(1);
  const absl::Duration period = options_.max_steps_per_s > 0
                                    ? absl::Seconds(options_.num_envs / options_.max_steps_per_s)
                                    : absl::ZeroDuration();
  absl::Time next_step = start;
  absl::Time next_stats = start;
  while (!stop.load(std::memory_order_relaxed)) {
    if (options_.max_env_steps > 0 &&
        stats_.env_steps >= static_cast<uint64_t>(options_.max_env_steps)) {
      break;
    }
    absl::Time now = absl::Now();
    if (now >= end) break;
    if (period > absl::ZeroDuration()) {
      if (now < next_step) {
        absl::SleepFor(next_step - now);
        now = absl::Now();
      }
      next_step = std::max(next_step, now - kMaxLag) + period;
    }
    RETURN_IF_ERROR(Step());
    if (io_.stats != nullptr && now >= next_stats) {
      next_stats = now + options_.stats_interval;
      RETURN_IF_ERROR(io_.stats->Publish(io_.experience->committed()));
    }
  }
  return Finish();
}

}  // namespace dreplay::actor
