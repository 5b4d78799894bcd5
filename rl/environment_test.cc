// Copyright dreplay authors.
//
// The episode bookkeeping every environment shares (Environment), and the
// factory by name.

#include "rl/environment.h"

#include <cmath>
#include <limits>

#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rl/make_environment.h"

namespace dreplay::rl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The environments whose whole state is in state(), so SetState() works.
const std::vector<std::string> kClassicControl = {"Acrobot-v1", "CartPole-v1", "MountainCar-v0"};

TEST(MakeEnvironmentTest, KnowsTheClassicControlTasksAndMinAtarsGames) {
  EXPECT_THAT(EnvironmentNames(),
              ElementsAre("Acrobot-v1", "CartPole-v1", "MinAtar/Asterix", "MinAtar/Breakout",
                          "MinAtar/Freeway", "MinAtar/Seaquest", "MinAtar/SpaceInvaders",
                          "MountainCar-v0"));
  for (const std::string& name : EnvironmentNames()) {
    absl::StatusOr<std::unique_ptr<Environment>> env = MakeEnvironment(name);
    ASSERT_TRUE(env.ok()) << env.status();
    EXPECT_EQ((*env)->spec().name, name);
  }
}

TEST(MakeEnvironmentTest, RejectsAnUnknownNameAndListsTheKnownOnes) {
  absl::StatusOr<std::unique_ptr<Environment>> env = MakeEnvironment("CartPole-v0");
  ASSERT_EQ(env.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(env.status().message()), HasSubstr("\"CartPole-v0\""));
  EXPECT_THAT(std::string(env.status().message()), HasSubstr("CartPole-v1"));
  EXPECT_THAT(std::string(env.status().message()), HasSubstr("Acrobot-v1"));
}

class EveryEnvironmentTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Environment> Make() {
    absl::StatusOr<std::unique_ptr<Environment>> env = MakeEnvironment(GetParam());
    CHECK(env.ok()) << env.status();
    return *std::move(env);
  }
};

TEST_P(EveryEnvironmentTest, RefusesToStepBeforeAnyReset) {
  std::unique_ptr<Environment> env = Make();
  EXPECT_TRUE(env->state().empty());
  EXPECT_EQ(env->Step(0).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(EveryEnvironmentTest, RejectsActionsOutsideTheActionSpace) {
  std::unique_ptr<Environment> env = Make();
  env->Reset(1);
  EXPECT_EQ(env->Step(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env->Step(env->spec().action_count).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A rejected action does not count as a step.
  EXPECT_EQ(env->elapsed_steps(), 0);
  EXPECT_TRUE(env->Step(0).ok());
  EXPECT_EQ(env->elapsed_steps(), 1);
}

// The tests of SetState(), for the environments that support it.
class SettableEnvironmentTest : public EveryEnvironmentTest {};

TEST_P(SettableEnvironmentTest, RejectsAStateOfTheWrongSizeOrNotFinite) {
  std::unique_ptr<Environment> env = Make();
  std::vector<double> state(env->spec().state_size + 1, 0.0);
  EXPECT_EQ(env->SetState(state).code(), absl::StatusCode::kInvalidArgument);
  state.resize(env->spec().state_size);
  state[0] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(env->SetState(state).code(), absl::StatusCode::kInvalidArgument);
  state[0] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(env->SetState(state).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(env->state().empty());
}

TEST_P(SettableEnvironmentTest, SetStateRestartsTheEpisodeClock) {
  std::unique_ptr<Environment> env = Make();
  env->Reset(3);
  ASSERT_TRUE(env->Step(1).ok());
  const std::vector<double> state(env->state().begin(), env->state().end());
  ASSERT_TRUE(env->SetState(state).ok());
  EXPECT_EQ(env->elapsed_steps(), 0);
  EXPECT_TRUE(env->episode_active());
  EXPECT_EQ(env->Observation().size(), env->spec().observation_size);
}

TEST_P(EveryEnvironmentTest, SameSeedAndActionsGiveTheSameTrajectory) {
  std::unique_ptr<Environment> a = Make();
  std::unique_ptr<Environment> b = Make();
  EXPECT_EQ(a->Reset(11), b->Reset(11));
  Random actions(5);
  for (int t = 0; t < 50 && a->episode_active(); ++t) {
    const int action = actions.UniformInt(a->spec().action_count);
    absl::StatusOr<StepResult> sa = a->Step(action);
    absl::StatusOr<StepResult> sb = b->Step(action);
    ASSERT_TRUE(sa.ok() && sb.ok());
    EXPECT_EQ(sa->observation, sb->observation);
    EXPECT_EQ(sa->reward, sb->reward);
    EXPECT_EQ(sa->terminated, sb->terminated);
    EXPECT_EQ(sa->truncated, sb->truncated);
  }
}

TEST_P(EveryEnvironmentTest, EpisodesEndWithinTheTimeLimit) {
  std::unique_ptr<Environment> env = Make();
  Random actions(17);
  for (int episode = 0; episode < 3; ++episode) {
    env->Reset();
    int steps = 0;
    bool done = false;
    while (!done) {
      absl::StatusOr<StepResult> step = env->Step(actions.UniformInt(env->spec().action_count));
      ASSERT_TRUE(step.ok()) << step.status();
      ++steps;
      done = step->done();
      ASSERT_LE(steps, env->spec().max_episode_steps);
    }
    EXPECT_EQ(env->elapsed_steps(), steps);
  }
}

INSTANTIATE_TEST_SUITE_P(AllNames, EveryEnvironmentTest, ::testing::ValuesIn(EnvironmentNames()));
INSTANTIATE_TEST_SUITE_P(ClassicControl, SettableEnvironmentTest,
                         ::testing::ValuesIn(kClassicControl));

}  // namespace
}  // namespace dreplay::rl
