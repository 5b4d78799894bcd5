// Copyright dreplay authors.
//
// MinAtar's games behind the Environment interface: the mapping documented
// in minatar_games.h. The games themselves are checked against the reference
// in rl/minatar/.

#include "rl/minatar_games.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rl/make_environment.h"
#include "rl/minatar/environment.h"
#include "rl/random.h"

namespace dreplay::rl {
namespace {

using ::testing::ElementsAre;

std::unique_ptr<Environment> Make(const std::string& name) {
  absl::StatusOr<std::unique_ptr<Environment>> env = MakeEnvironment(name);
  EXPECT_TRUE(env.ok()) << env.status();
  return *std::move(env);
}

std::vector<float> AsFloats(const std::vector<uint8_t>& state) {
  return std::vector<float>(state.begin(), state.end());
}

TEST(MinAtarGamesTest, ObservationsAreTheBooleanStateAsFloats) {
  const int channels[] = {4, 4, 7, 10, 6};
  for (int i = 0; i < 5; ++i) {
    const std::string name = MinAtar::Names()[i];
    std::unique_ptr<Environment> env = Make(name);
    EXPECT_EQ(env->spec().name, name);
    EXPECT_EQ(env->spec().observation_size, 100 * channels[i]) << name;
    EXPECT_EQ(env->spec().action_count, 6);
    EXPECT_EQ(env->Reset(1).size(), static_cast<size_t>(100 * channels[i]));
  }
}

TEST(MinAtarGamesTest, StepsAreTheGamesActsSeededAsTheReferencesResetWithASeed) {
  for (const std::string& name : MinAtar::Names()) {
    SCOPED_TRACE(name);
    std::unique_ptr<Environment> env = Make(name);
    std::unique_ptr<minatar::Environment> game = *minatar::Environment::Create(name, {});
    game->Seed(5);
    game->Reset();
    ASSERT_EQ(env->Reset(5), AsFloats(game->State()));
    Random actions(9);
    for (int t = 0; t < 3000; ++t) {
      const int action = static_cast<int>(actions.UniformInt(6));
      const absl::StatusOr<StepResult> step = env->Step(action);
      const absl::StatusOr<minatar::Outcome> outcome = game->Act(action);
      ASSERT_TRUE(step.ok() && outcome.ok());
      ASSERT_EQ(step->observation, AsFloats(game->State())) << "step " << t;
      ASSERT_EQ(step->reward, outcome->reward);
      ASSERT_EQ(step->terminated, outcome->terminal);
      ASSERT_FALSE(step->truncated);
      if (step->terminated) {
        game->Reset();
        ASSERT_EQ(env->Reset(), AsFloats(game->State()));
      }
    }
  }
}

TEST(MinAtarGamesTest, SeedsAboveNumPysRangeUseTheirLow32Bits) {
  std::unique_ptr<Environment> a = Make("MinAtar/Seaquest");
  std::unique_ptr<Environment> b = Make("MinAtar/Seaquest");
  a->Reset((uint64_t{1} << 32) + 5);
  b->Reset(5);
  for (int t = 0; t < 100; ++t) {
    absl::StatusOr<StepResult> sa = a->Step(minatar::kFire);
    absl::StatusOr<StepResult> sb = b->Step(minatar::kFire);
    ASSERT_TRUE(sa.ok() && sb.ok());
    ASSERT_EQ(sa->observation, sb->observation);
    if (sa->done()) break;
  }
}

TEST(MinAtarGamesTest, FreewayEndsAsTerminatedOnItsFrame2501) {
  std::unique_ptr<Environment> env = Make("MinAtar/Freeway");
  EXPECT_EQ(env->spec().max_episode_steps, MinAtar::kMaxEpisodeSteps);
  env->Reset(2);
  for (int t = 1; t <= 2501; ++t) {
    absl::StatusOr<StepResult> step = env->Step(/*up=*/2);
    ASSERT_TRUE(step.ok());
    EXPECT_FALSE(step->truncated);
    ASSERT_EQ(step->terminated, t == 2501) << t;
  }
}

TEST(MinAtarGamesTest, SetStateIsUnimplemented) {
  std::unique_ptr<Environment> env = Make("MinAtar/Breakout");
  env->Reset(1);
  const std::vector<double> state(env->state().begin(), env->state().end());
  EXPECT_EQ(env->SetState(state).code(), absl::StatusCode::kUnimplemented);
}

TEST(MinAtarGamesTest, ExposesTheMinimalActionSet) {
  absl::StatusOr<std::unique_ptr<MinAtar>> env = MinAtar::Create("MinAtar/SpaceInvaders");
  ASSERT_TRUE(env.ok());
  EXPECT_THAT((*env)->minimal_action_set(), ElementsAre(0, 1, 3, 5));
  EXPECT_EQ((*env)->channels(), 6);
}

}  // namespace
}  // namespace dreplay::rl
