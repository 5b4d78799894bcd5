// Copyright dreplay authors.
//
// End to end within rl/: the environment, the n-step accumulator, the batch
// encoding and the DQN learner together learn CartPole-v1 well above a
// random policy, in a bounded number of steps with fixed seeds. Replay here is
// a plain uniform ring; the prioritized memory lives in replay_server/.

#include <chrono>
#include <cstdio>
#include <vector>

#include "gtest/gtest.h"
#include "rl/cartpole.h"
#include "rl/dqn.h"
#include "rl/nstep.h"
#include "rl/policy.h"
#include "rl/random.h"
#include "rl/transition.h"

namespace dreplay::rl {
namespace {

constexpr int kEnvSteps = 8000;
constexpr int kTrainEvery = 2;  // env steps per gradient step
constexpr int kLearningStarts = 500;
constexpr int kExplorationSteps = 3000;  // epsilon 1 -> kFinalEpsilon
constexpr double kFinalEpsilon = 0.05;
constexpr int kBatchSize = 64;
constexpr int kReplayCapacity = 20000;
constexpr int kEvalEpisodes = 10;
// A uniformly random policy averages about 22 on CartPole-v1.
constexpr double kRandomMeanReturn = 22.0;

double TrainAndEvaluate(uint64_t seed) {
  CartPole env;
  DqnOptions options;
  options.network.observation_size = 4;
  options.network.action_count = 2;
  options.network.hidden_sizes = {64, 64};
  options.learning_rate = 1e-3;
  options.target_update_period = 100;
  options.seed = seed;
  std::unique_ptr<DqnLearner> learner = *DqnLearner::Create(options);
  NStepOptions nstep_options;
  nstep_options.n = 3;
  nstep_options.discount = 0.99;
  NStepAccumulator nstep(nstep_options, 4);

  // Replay holds encoded transitions, as the replay server's slots do.
  const size_t slot_size = EncodedTransitionSize(4);
  std::vector<uint8_t> replay(kReplayCapacity * slot_size);
  size_t stored = 0;
  size_t next_slot = 0;

  Random random(seed + 1000);
  std::vector<float> observation = env.Reset(seed);
  EXPECT_TRUE(nstep.BeginEpisode(observation).ok());
  std::vector<Transition> finished;
  TransitionBatch batch(4);
  const std::vector<float> weights(kBatchSize, 1.0f);
  std::vector<float> q(2);
  uint64_t episode = 0;
  for (int t = 0; t < kEnvSteps; ++t) {
    const double epsilon = t >= kExplorationSteps
                               ? kFinalEpsilon
                               : 1.0 - (1.0 - kFinalEpsilon) * t / kExplorationSteps;
    EXPECT_TRUE(learner->online().QValues(observation, absl::MakeSpan(q)).ok());
    const int action = EpsilonGreedy(q, epsilon, random);
    absl::StatusOr<StepResult> step = env.Step(action);
    EXPECT_TRUE(step.ok());
    finished.clear();
    EXPECT_TRUE(nstep
                    .AddStep(action, step->reward, step->observation, step->terminated,
                             step->truncated, &finished)
                    .ok());
    for (const Transition& transition : finished) {
      EXPECT_TRUE(
          EncodeTransition(transition, absl::MakeSpan(&replay[next_slot * slot_size], slot_size))
              .ok());
      next_slot = (next_slot + 1) % kReplayCapacity;
      if (stored < kReplayCapacity) ++stored;
    }
    if (step->done()) {
      observation = env.Reset(seed + 1 + ++episode);
      EXPECT_TRUE(nstep.BeginEpisode(observation).ok());
    } else {
      observation = std::move(step->observation);
    }
    if (t >= kLearningStarts && t % kTrainEvery == 0) {
      batch.Clear();
      for (int i = 0; i < kBatchSize; ++i) {
        const size_t slot = random.UniformInt(stored);
        EXPECT_TRUE(
            batch.AddEncoded(absl::MakeConstSpan(&replay[slot * slot_size], slot_size)).ok());
      }
      EXPECT_TRUE(learner->TrainStep(batch, weights).ok());
    }
  }
  CartPole eval_env;
  const QNetwork& online = learner->online();
  absl::StatusOr<EvaluationResult> result = EvaluatePolicy(
      eval_env, [&online](absl::Span<const float> obs) { return online.GreedyAction(obs); },
      kEvalEpisodes, seed + 1000000);
  EXPECT_TRUE(result.ok());
  return result.ok() ? result->mean_return : 0.0;
}

// With seeds 1 to 13 the greedy mean return after 8000 steps was between 89
// and 300 (a random policy: about 22); the test runs one of them.
constexpr uint64_t kSeed = 1;

TEST(DqnCartPoleTest, LearnsToBalanceWellAboveRandom) {
  const auto start = std::chrono::steady_clock::now();
  const double mean_return = TrainAndEvaluate(kSeed);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("greedy mean return %.1f after %d steps (%.1f s)\n", mean_return, kEnvSteps, seconds);
  EXPECT_GT(mean_return, 3 * kRandomMeanReturn);
}

}  // namespace
}  // namespace dreplay::rl
