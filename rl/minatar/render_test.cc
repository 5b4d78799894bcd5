// Copyright dreplay authors.

#include "rl/minatar/render.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rl/minatar/environment.h"

namespace dreplay::rl::minatar {
namespace {

using ::testing::Each;
using ::testing::Eq;

std::vector<uint8_t> Render(const std::vector<uint8_t>& state, int channels) {
  std::vector<uint8_t> image(kPixels84Size, 77);
  RenderPixels84(state, channels, absl::MakeSpan(image));
  return image;
}

TEST(RenderTest, GraysAreEvenlySpacedWithTheLastChannelWhite) {
  EXPECT_EQ(ChannelIntensity(0, 4), 63);
  EXPECT_EQ(ChannelIntensity(1, 4), 127);
  EXPECT_EQ(ChannelIntensity(2, 4), 191);
  EXPECT_EQ(ChannelIntensity(3, 4), 255);
  EXPECT_EQ(ChannelIntensity(9, 10), 255);
  EXPECT_EQ(ChannelIntensity(0, 10), 25);
}

TEST(RenderTest, AnEmptyStateIsBlack) {
  EXPECT_THAT(Render(std::vector<uint8_t>(400, 0), 4), Each(Eq(0)));
}

TEST(RenderTest, ACellIsABlockOfEightOrNinePixels) {
  // Cell (2, 7), channel 1 of 4: pixels whose y*10/84 == 2 and x*10/84 == 7.
  std::vector<uint8_t> state(400, 0);
  state[(2 * 10 + 7) * 4 + 1] = 1;
  const std::vector<uint8_t> image = Render(state, 4);
  int lit = 0;
  for (int y = 0; y < 84; ++y) {
    for (int x = 0; x < 84; ++x) {
      const bool inside = y * 10 / 84 == 2 && x * 10 / 84 == 7;
      EXPECT_EQ(image[y * 84 + x], inside ? 127 : 0) << y << "," << x;
      lit += inside;
    }
  }
  EXPECT_EQ(lit, 9 * 9);  // rows 17..25, columns 59..67
}

TEST(RenderTest, TheHighestActiveChannelWins) {
  std::vector<uint8_t> state(400, 0);
  state[0 * 4 + 0] = 1;
  state[0 * 4 + 2] = 1;
  EXPECT_EQ(Render(state, 4)[0], 191);
}

TEST(RenderTest, RendersEveryGamesState) {
  for (const std::string& name : Environment::Names()) {
    std::unique_ptr<Environment> env = *Environment::Create(name, {});
    env->Seed(1);
    env->Reset();
    const std::vector<uint8_t> image = Render(env->State(), env->channels());
    EXPECT_GT(std::count_if(image.begin(), image.end(), [](uint8_t p) { return p != 0; }), 0)
        << name;
  }
}

TEST(FrameStackTest, ResetFillsTheStackAndPushDropsTheOldest) {
  FrameStack stack(/*depth=*/3, /*frame_size=*/2);
  stack.Reset(std::vector<uint8_t>{1, 2});
  EXPECT_THAT(stack.frames(), testing::ElementsAre(1, 2, 1, 2, 1, 2));
  stack.Push(std::vector<uint8_t>{3, 4});
  stack.Push(std::vector<uint8_t>{5, 6});
  EXPECT_THAT(stack.frames(), testing::ElementsAre(1, 2, 3, 4, 5, 6));
  stack.Push(std::vector<uint8_t>{7, 8});
  EXPECT_THAT(stack.frames(), testing::ElementsAre(3, 4, 5, 6, 7, 8));
}

TEST(FrameStackTest, DefaultsToFourFramesOf84By84) {
  FrameStack stack;
  EXPECT_EQ(stack.frames().size(), 4u * 84 * 84);
  EXPECT_EQ(2 * stack.frames().size(), 56448u);  // a transition's s and s'
}

}  // namespace
}  // namespace dreplay::rl::minatar
