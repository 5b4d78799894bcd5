// Copyright dreplay authors.
//
// Expected values are NumPy 1.24's legacy RandomState, printed by hand.

#include "rl/minatar/numpy_random.h"

#include "gtest/gtest.h"

namespace dreplay::rl::minatar {
namespace {

TEST(LegacyRandomStateTest, SeedsAsNumPyDoes) {
  LegacyRandomState random(0);
  EXPECT_EQ(random.NextUint32(), 2357136044u);
  EXPECT_EQ(random.NextUint32(), 2546248239u);
  LegacyRandomState top(4294967295u);
  EXPECT_EQ(top.NextUint32(), 419326371u);
  EXPECT_EQ(top.Rand(), 0.11160667175339789);
}

TEST(LegacyRandomStateTest, MixedCallsMatchNumPyDrawForDraw) {
  // rand(), randint(2), randint(1, 9), randint(1, 6, 8), randint(1), rand()
  LegacyRandomState random(0);
  EXPECT_EQ(random.Rand(), 0.5488135039273248);
  EXPECT_EQ(random.RandInt(0, 2), 1);
  EXPECT_EQ(random.RandInt(1, 9), 1);
  const int expected[8] = {4, 4, 4, 2, 4, 3, 5, 1};
  for (int e : expected) EXPECT_EQ(random.RandInt(1, 6), e);
  EXPECT_EQ(random.RandInt(0, 1), 0);  // one value: no draw
  EXPECT_EQ(random.Rand(), 0.9636627605010293);
}

TEST(LegacyRandomStateTest, RejectsDrawsAboveTheRange) {
  // randint(1, 6) masks with 7 and rejects 5..7.
  LegacyRandomState random(7);
  const int expected[10] = {5, 2, 4, 4, 5, 2, 1, 2, 3, 3};
  for (int e : expected) EXPECT_EQ(random.RandInt(1, 6), e);
}

TEST(LegacyRandomStateTest, WideRangesTakeSixtyFourBitDraws) {
  LegacyRandomState random(5);
  EXPECT_EQ(random.RandInt(0, int64_t{1} << 40), 425438759118);
  EXPECT_EQ(random.RandInt(-3, int64_t{1} << 33), 4206684230);
  EXPECT_EQ(random.Rand(), 0.48841118879482914);
}

TEST(LegacyRandomStateTest, SeedRestartsTheStream) {
  LegacyRandomState random(3);
  const double first = random.Rand();
  random.Rand();
  random.Seed(3);
  EXPECT_EQ(random.Rand(), first);
}

}  // namespace
}  // namespace dreplay::rl::minatar
