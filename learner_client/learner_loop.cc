// Copyright dreplay authors.

#include "learner_client/learner_loop.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "learner_client/replay_source.h"
#include "learner_client/update_governor.h"
#include "rl/environment.h"
#include "rl/make_environment.h"
#include "rl/params_format.h"
#include "rl/random.h"

namespace dreplay::learner {

replay::RateLimiterOptions LocalLimiterOptions(const LearnerLoopOptions& o) {
  replay::RateLimiterOptions r;
  r.samples_per_insert = o.samples_per_insert;
  r.min_size_to_sample = o.min_replay_size;
  r.error_buffer = o.spi_error_buffer;
  return r;
}

namespace {

// The Huber function DqnLearner's loss applies to a TD error.
double Huber(double x, double delta) {
  const double a = std::abs(x);
  return a <= delta ? 0.5 * x * x : delta * (a - 0.5 * delta);
}

}  // namespace

absl::Status LearnerLoopOptions::Validate() const {
  if (!(max_updates_per_s >= 0) || !std::isfinite(max_updates_per_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_updates_per_s=", max_updates_per_s, " must be finite and >= 0"));
  }
  if (!(max_priority > 0) || !std::isfinite(max_priority)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_priority=", max_priority, " must be finite and > 0"));
  }
  {
    const absl::Status s = rl::MakeEnvironment(env, observation).status();
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("env=", env, ": ", s.message()));
  }
  rl::DqnOptions d = dqn;
  // The shape comes from the environment; check the rest.
  if (d.network.observation_size == 0) d.network.observation_size = 1;
  if (d.network.action_count == 0) d.network.action_count = 1;
  RETURN_IF_ERROR(d.Validate());
  if (placement != ReplayPlacement::kBuffer) {  // a replay memory at the learner
    RETURN_IF_ERROR(memory.Validate());
    RETURN_IF_ERROR(beta.Validate());
    if (batch_size == 0) return absl::InvalidArgumentError("batch_size=0 must be >= 1");
    if (min_replay_size == 0) {
      return absl::InvalidArgumentError("min_replay_size=0 must be >= 1");
    }
    RETURN_IF_ERROR(LocalLimiterOptions(*this).Validate(batch_size));
  }
  if (probe_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("probe_size=", probe_size, " must be >= 0"));
  }
  if (probe_size > 0) RETURN_IF_ERROR(nstep.Validate());
  if (publish_every < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("publish_every=", publish_every, " must be >= 0"));
  }
  if (max_train_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_train_steps=", max_train_steps, " must be >= 0"));
  }
  if (duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration=", absl::FormatDuration(duration), " must be > 0"));
  }
  if (eval_episodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval_episodes=", eval_episodes, " must be >= 1"));
  }
  if (stop_when_solved && eval_interval == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "stop_when_solved needs evaluations in the loop (a finite eval_interval)");
  }
  for (const auto& [name, value] :
       {std::pair<const char*, absl::Duration>{"eval_interval", eval_interval},
        {"snapshot_interval", snapshot_interval},
        {"progress_interval", progress_interval},
        {"wait_timeout", wait_timeout}}) {
    if (value <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "=", absl::FormatDuration(value), " must be > 0"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LearnerLoop>> LearnerLoop::Create(const LearnerLoopOptions& options,
                                                                 const LearnerIo& io) {
  RETURN_IF_ERROR(options.Validate());
  if (options.snapshot_interval != absl::InfiniteDuration() && !io.on_snapshot) {
    return absl::InvalidArgumentError("snapshots need a sink (LearnerIo::on_snapshot)");
  }
  std::unique_ptr<LearnerLoop> loop(new LearnerLoop(options, io));
  RETURN_IF_ERROR(loop->Init());
  return loop;
}

LearnerLoop::LearnerLoop(const LearnerLoopOptions& options, const LearnerIo& io)
    : options_(options),
      io_(io),
      metrics_(ReplayPlacementName(options.placement), options.seed, options.solve_return) {}

LearnerLoop::~LearnerLoop() = default;

absl::Status LearnerLoop::Init() {
  ASSIGN_OR_RETURN(std::unique_ptr<rl::Environment> env,
                   rl::MakeEnvironment(options_.env, options_.observation));
  const rl::EnvironmentSpec& spec = env->spec();
  rl::DqnOptions dqn = options_.dqn;
  const rl::QNetworkOptions shaped = rl::NetworkOptionsFor(spec, dqn.network.hidden_sizes);
  dqn.network.torso = shaped.torso;
  dqn.network.input_channels = shaped.input_channels;
  for (const auto& [name, value, expected] :
       {std::tuple<const char*, int*, int>{"observation_size", &dqn.network.observation_size,
                                           spec.observation_size},
        {"action_count", &dqn.network.action_count, spec.action_count}}) {
    if (*value != 0 && *value != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("dqn.network.", name, "=", *value, " but ", spec.name, " has ", expected));
    }
    *value = expected;
  }
  ASSIGN_OR_RETURN(learner_, rl::DqnLearner::Create(dqn));
  batch_ = std::make_unique<rl::TransitionBatch>(spec.observation_size, spec.observation_type);
  params_buffer_.resize(learner_->online().SerializedSize());
  probe_ = std::make_unique<rl::TransitionBatch>(spec.observation_size, spec.observation_type);
  RETURN_IF_ERROR(CollectProbeSet(spec.observation_size));
  ReplaySourceContext context;
  context.metrics = &metrics_;
  context.observation_size = spec.observation_size;
  context.observation_type = spec.observation_type;
  context.action_count = spec.action_count;
  context.max_priority = options_.max_priority;
  context.frame_stack = options_.frame_stack;
  context.wall_clock_ns = [this] { return WallClockNs(); };
  ASSIGN_OR_RETURN(source_, MakeReplaySource(options_, io_, context));
  start_ = absl::Now();
  end_ = absl::InfiniteFuture();
  return absl::OkStatus();
}

absl::Status LearnerLoop::CollectProbeSet(int observation_size) {
  if (options_.probe_size == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::unique_ptr<rl::Environment> env,
                   rl::MakeEnvironment(options_.env, options_.observation));
  const int actions = env->spec().action_count;
  rl::Random random(options_.probe_seed);
  rl::NStepAccumulator nstep(options_.nstep, observation_size);
  RETURN_IF_ERROR(nstep.BeginEpisode(env->Reset(options_.probe_seed)));
  std::vector<rl::Transition> completed;
  while (probe_->size() < static_cast<size_t>(options_.probe_size)) {
    const int action = static_cast<int>(random.UniformInt(static_cast<uint64_t>(actions)));
    ASSIGN_OR_RETURN(rl::StepResult step, env->Step(action));
    completed.clear();
    RETURN_IF_ERROR(nstep.AddStep(action, step.reward, step.observation, step.terminated,
                                  step.truncated, &completed));
    for (const rl::Transition& t : completed) {
      if (probe_->size() < static_cast<size_t>(options_.probe_size)) {
        RETURN_IF_ERROR(probe_->Add(t));
      }
    }
    if (step.done()) RETURN_IF_ERROR(nstep.BeginEpisode(env->Reset()));
  }
  probe_errors_.resize(probe_->size());
  return absl::OkStatus();
}

absl::StatusOr<std::optional<double>> LearnerLoop::ProbeLoss() const {
  if (probe_->size() == 0) return std::optional<double>();
  RETURN_IF_ERROR(learner_->AbsTdErrors(*probe_, absl::MakeSpan(probe_errors_)));
  double sum = 0;
  for (float e : probe_errors_) sum += Huber(e, options_.dqn.huber_delta);
  return std::optional<double>(sum / static_cast<double>(probe_errors_.size()));
}

uint64_t LearnerLoop::WallClockNs() const {
  if (io_.wall_clock_ns) return io_.wall_clock_ns();
  return static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
}

double LearnerLoop::WallSeconds() const {
  return absl::ToDoubleSeconds(std::min(absl::Now(), end_) - start_);
}

absl::StatusOr<std::optional<size_t>> LearnerLoop::SerializeFinite(uint64_t version) {
  ASSIGN_OR_RETURN(const size_t bytes,
                   learner_->online().Serialize(version, absl::MakeSpan(params_buffer_)));
  const absl::Status finite =
      rl::CheckParamsFinite(absl::MakeConstSpan(params_buffer_.data(), bytes));
  if (finite.ok()) return std::optional<size_t>(bytes);
  ++params_withheld_;
  const absl::Time now = absl::Now();
  if (now - last_params_warning_ >= kDropWarningInterval) {
    last_params_warning_ = now;
    LOG(WARNING) << "parameters withheld (" << params_withheld_
                 << " in all), actors keep the last good ones: " << finite.message();
  }
  return std::optional<size_t>();
}

absl::Status LearnerLoop::Round(absl::Duration timeout, bool* trained) {
  *trained = false;
  const absl::Duration held = governor_->Delay(absl::Now());
  if (held > absl::ZeroDuration()) return source_->Idle(std::min(held, timeout));
  ASSIGN_OR_RETURN(const bool got, source_->Next(timeout, batch_.get(), &weights_));
  if (!got) return absl::OkStatus();
  governor_->Updated(absl::Now());
  ASSIGN_OR_RETURN(const rl::TrainStepResult result, learner_->TrainStep(*batch_, weights_));
  metrics_.RecordTrainStep(result.loss, result.abs_td_errors);
  RETURN_IF_ERROR(source_->Trained(result.abs_td_errors));
  *trained = true;
  return absl::OkStatus();
}

uint64_t LearnerLoop::local_replay_size() const { return source_->local_size(); }

const replay::RateLimiter* LearnerLoop::rate_limiter() const { return source_->rate_limiter(); }

absl::Status LearnerLoop::PublishParams() {
  if (io_.params == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::optional<size_t> bytes, SerializeFinite(publishes_ + 1));
  if (!bytes.has_value()) return absl::OkStatus();
  ++publishes_;
  return io_.params->Publish(absl::MakeConstSpan(params_buffer_.data(), *bytes));
}

absl::Status LearnerLoop::PublishDueParams() {
  if (!publish_due_ || io_.params == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::optional<size_t> bytes, SerializeFinite(publishes_ + 1));
  if (!bytes.has_value()) {
    publish_due_ = false;  // due again after the next publish_every steps
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const bool posted,
                   io_.params->PublishIfIdle(absl::MakeConstSpan(params_buffer_.data(), *bytes)));
  if (posted) {
    ++publishes_;
    publish_due_ = false;
  }
  return absl::OkStatus();
}

absl::Status LearnerLoop::Snapshot(bool last) {
  if (options_.snapshot_interval == absl::InfiniteDuration()) return absl::OkStatus();
  SnapshotRecord record;
  record.index = snapshots_++;
  record.wall_s = WallSeconds();
  record.train_steps = metrics_.train_steps();
  if (io_.actors != nullptr && !last) {  // the last: read once by Run()
    ASSIGN_OR_RETURN(const ActorTotals totals, io_.actors->ReadKnown());
    metrics_.SetActorTotals(totals);
  }
  record.env_steps = metrics_.actor_totals().env_steps;
  if (io_.link_stats) record.link_bytes_total = io_.link_stats().total_bytes();
  ASSIGN_OR_RETURN(const size_t bytes,
                   learner_->online().Serialize(record.index, absl::MakeSpan(params_buffer_)));
  return io_.on_snapshot(record, absl::MakeConstSpan(params_buffer_.data(), bytes));
}

absl::Status LearnerLoop::Evaluate(bool last) {
  ASSIGN_OR_RETURN(const rl::EvaluationResult result,
                   EvaluateGreedy(learner_->online(), options_.env, options_.eval_episodes,
                                  options_.eval_seed, options_.observation));
  // Solving is stamped with the actors' steps at that moment (the last
  // evaluation's: those Run() read at the end).
  if (io_.actors != nullptr && !last) {
    ASSIGN_OR_RETURN(const ActorTotals totals, io_.actors->Read());
    metrics_.SetActorTotals(totals);
  }
  if (metrics_.RecordEvaluation(WallSeconds(), result.mean_return)) {
    LOG(INFO) << "solved: greedy mean return " << result.mean_return << " over "
              << options_.eval_episodes << " episodes after " << metrics_.train_steps()
              << " train steps";
  }
  return absl::OkStatus();
}

absl::Status LearnerLoop::EmitProgress(bool last) {
  // Only the last record waits for the link: on a link that data saturates
  // a READ's answer queues behind it, and training would stop meanwhile.
  if (io_.actors != nullptr && !last) {  // the last: read once by Run()
    ASSIGN_OR_RETURN(const ActorTotals totals, io_.actors->ReadKnown());
    metrics_.SetActorTotals(totals);
  }
  if (io_.link_stats) {
    LinkStats link = io_.link_stats();
    // After the link counts: every transition they name is ingested by then.
    if (!last && io_.server_ingested_known) {
      ASSIGN_OR_RETURN(link.server_ingested, io_.server_ingested_known());
    } else if (io_.server_ingested) {
      ASSIGN_OR_RETURN(link.server_ingested, io_.server_ingested());
    }
    metrics_.SetLinkStats(link);
  }
  if (last && io_.crossing_percentile) {
    ASSIGN_OR_RETURN(const std::optional<double> crossing, io_.crossing_percentile());
    metrics_.SetCrossingPercentile(crossing);
  }
  metrics_.SetDropped(source_->transitions_dropped(), params_withheld_);
  ASSIGN_OR_RETURN(const std::optional<double> probe_loss, ProbeLoss());
  metrics_.SetProbeLoss(probe_loss);
  ASSIGN_OR_RETURN(const std::optional<double> spi, source_->SamplesPerInsert());
  metrics_.SetSamplesPerInsert(spi);
  const ProgressRecord record = metrics_.Progress(WallSeconds());
  if (io_.on_progress) io_.on_progress(record);
  return absl::OkStatus();
}

absl::Status LearnerLoop::Run(const std::atomic<bool>& stop) {
  start_ = absl::Now();
  end_ = absl::InfiniteFuture();
  const absl::Time deadline = options_.duration == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : start_ + options_.duration;
  absl::Time next_eval = start_ + options_.eval_interval;
  absl::Time next_progress = start_ + options_.progress_interval;
  absl::Time next_snapshot = start_ + options_.snapshot_interval;
  const bool evaluates = options_.eval_interval != absl::InfiniteDuration();
  RETURN_IF_ERROR(source_->Start());
  // A step held up (a slow batch, an oversleep) may be caught up within 50 ms,
  // or the achieved rate falls below the governed one by every delay.
  governor_ = std::make_unique<UpdateGovernor>(
      options_.max_updates_per_s, start_,
      std::max(1.0, options_.max_updates_per_s * kGovernorCatchUpS));
  RETURN_IF_ERROR(PublishParams());
  RETURN_IF_ERROR(Snapshot(/*last=*/false));
  bool solved_stop = false;
  while (!stop.load(std::memory_order_relaxed)) {
    if (options_.max_train_steps > 0 &&
        metrics_.train_steps() >= static_cast<uint64_t>(options_.max_train_steps)) {
      break;
    }
    absl::Time now = absl::Now();
    if (now >= deadline) break;
    const absl::Duration timeout = std::min({options_.wait_timeout, deadline - now, next_eval - now,
                                             next_progress - now, next_snapshot - now});
    bool trained = false;
    RETURN_IF_ERROR(Round(std::max(timeout, absl::ZeroDuration()), &trained));
    if (trained && options_.publish_every > 0 &&
        metrics_.train_steps() % static_cast<uint64_t>(options_.publish_every) == 0) {
      publish_due_ = true;
    }
    // Never waits for the link: a publication still in flight defers the
    // next one, which then carries the newest parameters.
    RETURN_IF_ERROR(PublishDueParams());
    now = absl::Now();
    if (now >= next_eval) {
      RETURN_IF_ERROR(Evaluate(/*last=*/false));
      now = absl::Now();
      next_eval = now + options_.eval_interval;
      if (metrics_.solved() && options_.stop_when_solved) {
        solved_stop = true;
        break;
      }
    }
    if (now >= next_snapshot) {
      RETURN_IF_ERROR(Snapshot(/*last=*/false));
      // On the grid from the start, so snapshots of every run line up.
      while (next_snapshot <= now) next_snapshot += options_.snapshot_interval;
    }
    if (now >= next_progress) {
      RETURN_IF_ERROR(EmitProgress(/*last=*/false));
      next_progress = now + options_.progress_interval;
    }
  }
  // The actors' totals at the end, read once (waiting for the link): the
  // last snapshot and the last record count the same steps.
  if (io_.actors != nullptr) {
    ASSIGN_OR_RETURN(const ActorTotals totals, io_.actors->Read());
    metrics_.SetActorTotals(totals);
  }
  RETURN_IF_ERROR(Snapshot(/*last=*/true));
  if (evaluates && !solved_stop && !(metrics_.solved() && options_.stop_when_solved)) {
    RETURN_IF_ERROR(Evaluate(/*last=*/true));
  }
  end_ = absl::Now();
  RETURN_IF_ERROR(EmitProgress(/*last=*/true));
  return absl::OkStatus();
}

SummaryRecord LearnerLoop::Summary() const { return metrics_.Summary(WallSeconds()); }

absl::StatusOr<rl::EvaluationResult> EvaluateGreedy(const rl::QNetwork& network,
                                                    const std::string& env, int episodes,
                                                    uint64_t seed,
                                                    rl::ObservationMode observation) {
  if (episodes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("episodes=", episodes, " must be >= 1"));
  }
  std::vector<std::unique_ptr<rl::Environment>> envs;
  std::vector<std::vector<float>> observations;
  for (int i = 0; i < episodes; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<rl::Environment> e, rl::MakeEnvironment(env, observation));
    observations.push_back(e->Reset(seed + static_cast<uint64_t>(i)));
    envs.push_back(std::move(e));
  }
  const rl::EnvironmentSpec& spec = envs.front()->spec();
  if (network.options().observation_size != spec.observation_size ||
      network.options().action_count != spec.action_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("a network for observations of ", network.options().observation_size, " and ",
                     network.options().action_count, " actions does not fit ", spec.name));
  }
  const int obs = spec.observation_size;
  const int actions = spec.action_count;
  rl::EvaluationResult result;
  result.returns.assign(episodes, 0.0);
  std::vector<int> active(episodes);
  for (int i = 0; i < episodes; ++i) active[i] = i;
  std::vector<float> batch;
  std::vector<float> q;
  while (!active.empty()) {
    batch.resize(active.size() * obs);
    q.resize(active.size() * actions);
    for (size_t k = 0; k < active.size(); ++k) {
      std::copy(observations[active[k]].begin(), observations[active[k]].end(),
                batch.begin() + k * obs);
    }
    RETURN_IF_ERROR(network.QValues(batch, absl::MakeSpan(q)));
    std::vector<int> still_active;
    still_active.reserve(active.size());
    for (size_t k = 0; k < active.size(); ++k) {
      const int i = active[k];
      const int action = rl::ArgMax(absl::MakeConstSpan(q.data() + k * actions, actions));
      ASSIGN_OR_RETURN(rl::StepResult step, envs[i]->Step(action));
      result.returns[i] += step.reward;
      if (step.done()) continue;
      observations[i] = std::move(step.observation);
      still_active.push_back(i);
    }
    active = std::move(still_active);
  }
  double sum = 0;
  for (double r : result.returns) sum += r;
  result.mean_return = sum / episodes;
  return result;
}

}  // namespace dreplay::learner
