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
#include "rl/minatar/render.h"
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

// The 84x84 rendering of an environment's grid, as floats.
std::vector<float> Rendered(const Environment& env, int channels) {
  std::vector<uint8_t> grid(env.state().begin(), env.state().end());
  std::vector<uint8_t> image(minatar::kPixels84Size);
  minatar::RenderPixels84(grid, channels, absl::MakeSpan(image));
  return AsFloats(image);
}

// Frame k (0 oldest) of a pixels84 observation.
std::vector<float> Frame(const std::vector<float>& observation, int k) {
  return std::vector<float>(observation.begin() + k * minatar::kPixels84Size,
                            observation.begin() + (k + 1) * minatar::kPixels84Size);
}

TEST(MinAtarGamesTest, Pixels84ObservesTheLastFourRenderedFramesOldestFirst) {
  absl::StatusOr<std::unique_ptr<Environment>> made =
      MakeEnvironment("MinAtar/Breakout", ObservationMode::kPixels84);
  ASSERT_TRUE(made.ok()) << made.status();
  Environment& env = **made;
  EXPECT_EQ(env.spec().observation_size, 4 * 84 * 84);
  EXPECT_EQ(env.spec().observation_layout, ObservationLayout::kPixels84);
  EXPECT_EQ(env.spec().observation_channels, 4);
  EXPECT_EQ(env.spec().observation_type, protocol::ObservationType::kUint8);
  const std::vector<float> first = env.Reset(3);
  ASSERT_EQ(first.size(), 4u * 84 * 84);
  const std::vector<float> start = Rendered(env, 4);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(Frame(first, k), start) << k;
  std::vector<std::vector<float>> frames = {start};
  for (int t = 0; t < 6; ++t) {
    absl::StatusOr<StepResult> step = env.Step(t % 2 == 0 ? minatar::kLeft : minatar::kRight);
    ASSERT_TRUE(step.ok()) << step.status();
    frames.push_back(Rendered(env, 4));
    EXPECT_EQ(Frame(step->observation, 3), frames.back()) << t;
    if (frames.size() >= 4) {
      EXPECT_EQ(Frame(step->observation, 0), frames[frames.size() - 4]);
    }
  }
  // The native environment of the same seed plays the same game.
  std::unique_ptr<Environment> native = Make("MinAtar/Breakout");
  EXPECT_EQ(native->spec().observation_layout, ObservationLayout::kGrid10x10);
  EXPECT_EQ(native->spec().observation_type, protocol::ObservationType::kUint8);
  native->Reset(3);
  EXPECT_EQ(Rendered(*native, 4), start);
}

TEST(MinAtarGamesTest, Pixels84IsRefusedForEnvironmentsWithoutARendering) {
  const absl::Status status = MakeEnvironment("CartPole-v1", ObservationMode::kPixels84).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("MinAtar"));
  EXPECT_EQ(Make("CartPole-v1")->spec().observation_layout, ObservationLayout::kVector);
}

TEST(MinAtarGamesTest, ObservationModesParseByNameAndRefuseOthersClearly) {
  EXPECT_EQ(*ParseObservationMode("native"), ObservationMode::kNative);
  EXPECT_EQ(*ParseObservationMode("pixels84"), ObservationMode::kPixels84);
  const absl::Status bad = ParseObservationMode("rgb").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), ::testing::HasSubstr("native, pixels84"));
  EXPECT_STREQ(ObservationModeName(ObservationMode::kPixels84), "pixels84");
}

}  // namespace
}  // namespace dreplay::rl
