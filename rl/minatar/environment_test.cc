// Copyright dreplay authors.

#include "rl/minatar/environment.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dreplay::rl::minatar {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Environment> Make(const std::string& name, Options options = {}) {
  absl::StatusOr<std::unique_ptr<Environment>> env = Environment::Create(name, options);
  EXPECT_TRUE(env.ok()) << env.status();
  return std::move(env).value();
}

TEST(MinAtarEnvironmentTest, KnowsTheFiveGamesWithTheirChannels) {
  EXPECT_THAT(Environment::Names(),
              ElementsAre("MinAtar/Asterix", "MinAtar/Breakout", "MinAtar/Freeway",
                          "MinAtar/Seaquest", "MinAtar/SpaceInvaders"));
  const int channels[] = {4, 4, 7, 10, 6};
  for (int i = 0; i < 5; ++i) {
    std::unique_ptr<Environment> env = Make(Environment::Names()[i]);
    EXPECT_EQ(env->channels(), channels[i]) << env->name();
    EXPECT_EQ(env->state_size(), 100 * channels[i]);
    EXPECT_EQ(env->State().size(), static_cast<size_t>(env->state_size()));
    EXPECT_EQ(env->num_actions(), 6);
  }
}

TEST(MinAtarEnvironmentTest, ExposesEachGamesMinimalActionSet) {
  EXPECT_THAT(Make("MinAtar/Asterix")->minimal_action_set(), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(Make("MinAtar/Breakout")->minimal_action_set(), ElementsAre(0, 1, 3));
  EXPECT_THAT(Make("MinAtar/Freeway")->minimal_action_set(), ElementsAre(0, 2, 4));
  EXPECT_THAT(Make("MinAtar/Seaquest")->minimal_action_set(), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(Make("MinAtar/SpaceInvaders")->minimal_action_set(), ElementsAre(0, 1, 3, 5));
}

TEST(MinAtarEnvironmentTest, RejectsAnUnknownNameListingTheKnownOnes) {
  absl::StatusOr<std::unique_ptr<Environment>> env = Environment::Create("MinAtar/Pong", {});
  EXPECT_EQ(env.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(env.status().message(), HasSubstr("MinAtar/SpaceInvaders"));
}

TEST(MinAtarEnvironmentTest, RejectsAStickyProbabilityOutsideTheUnitInterval) {
  for (double p : {-0.1, 1.5}) {
    Options options;
    options.sticky_action_prob = p;
    EXPECT_EQ(Environment::Create("MinAtar/Breakout", options).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(MinAtarEnvironmentTest, RejectsAnActionOutsideTheSix) {
  std::unique_ptr<Environment> env = Make("MinAtar/Breakout");
  EXPECT_EQ(env->Act(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env->Act(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MinAtarEnvironmentTest, AlwaysStickyRepeatsTheFirstActionAcrossResets) {
  // With p = 1 every action is the initial no-op: the paddle never moves.
  Options options;
  options.sticky_action_prob = 1.0;
  std::unique_ptr<Environment> env = Make("MinAtar/Breakout", options);
  env->Seed(1);
  env->Reset();
  const std::vector<uint8_t> start = env->State();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(env->Act(kLeft).ok());
  const std::vector<uint8_t> state = env->State();
  for (int column = 0; column < kGridSize; ++column) {
    const int paddle = (9 * kGridSize + column) * 4;
    EXPECT_EQ(state[paddle], start[paddle]) << column;
  }
}

TEST(MinAtarEnvironmentTest, ActAfterTheEndChangesNothing) {
  std::unique_ptr<Environment> env = Make("MinAtar/Breakout", Options{0.0, true});
  env->Seed(0);
  env->Reset();
  absl::StatusOr<Outcome> outcome;
  do {
    outcome = env->Act(kNoop);
    ASSERT_TRUE(outcome.ok());
  } while (!outcome->terminal);
  const std::vector<uint8_t> end = env->State();
  outcome = env->Act(kLeft);
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->terminal);
  EXPECT_EQ(outcome->reward, 0);
  EXPECT_EQ(env->State(), end);
}

}  // namespace
}  // namespace dreplay::rl::minatar
