// Copyright dreplay authors.

#include "replay_server/crossing_percentiles.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(CrossingPercentilesTest, RanksAmongTheMemoryWithMidRankTies) {
  CrossingPercentiles p(absl::ZeroDuration(), 4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> memory = {3, nan, 1, 4, 2};  // NaN: not ranked
  p.Add(4);
  p.Add(1);
  p.Finish(memory, false, kT0);
  EXPECT_EQ(p.count(), 2u);
  EXPECT_DOUBLE_EQ(p.sum(), 87.5 + 12.5);  // (3 + 0.5) / 4 and (0 + 0.5) / 4
  const std::vector<float> ties = {2, 2, 5, 2};
  p.Add(2);
  p.Add(nan);  // an entry without a key: not counted
  p.Finish(ties, false, kT0);
  EXPECT_EQ(p.count(), 3u);
  EXPECT_DOUBLE_EQ(p.sum(), 100 + 37.5);  // (0 + 1.5) / 4
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> with_unestimated = {1, inf, inf};
  p.Add(inf);
  p.Finish(with_unestimated, false, kT0);
  EXPECT_DOUBLE_EQ(p.sum(), 137.5 + 200.0 / 3);  // (1 + 1) / 3
}

TEST(CrossingPercentilesTest, KeysThatLeftTheMemoryAreRankedInWithIt) {
  CrossingPercentiles p(absl::ZeroDuration(), 2);
  const std::vector<float> remaining = {1, 2, 3};
  p.Add(4);
  p.Add(0.5f);
  p.Finish(remaining, true, kT0);  // forwarded: {0.5, 1, 2, 3, 4} before the batch
  EXPECT_EQ(p.count(), 2u);
  EXPECT_DOUBLE_EQ(p.sum(), 90.0 + 10.0);
}

TEST(CrossingPercentilesTest, MeasuresOneBatchPerPeriod) {
  CrossingPercentiles p(absl::Milliseconds(50), 1);
  EXPECT_TRUE(p.Due(kT0));
  p.Finish({}, false, kT0);  // nothing added: nothing counted
  EXPECT_EQ(p.count(), 0u);
  EXPECT_FALSE(p.Due(kT0 + absl::Milliseconds(49)));
  EXPECT_TRUE(p.Due(kT0 + absl::Milliseconds(50)));
}

// A large memory is read every step-th key: the percentiles are estimates
// within about a point.
TEST(CrossingPercentilesTest, ALargeMemoryIsSampledAndStaysClose) {
  std::vector<float> memory(100 * CrossingPercentiles::kMaxRanked);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (float& key : memory) key = unit(rng);
  for (const bool left : {false, true}) {
    CrossingPercentiles p(absl::ZeroDuration(), 3);
    p.Add(0.1f);
    p.Add(0.5f);
    p.Add(0.9f);
    p.Finish(memory, left, kT0);
    EXPECT_EQ(p.count(), 3u);
    EXPECT_NEAR(p.sum(), 150.0, 3.0) << left;  // 10 + 50 + 90
    CrossingPercentiles top(absl::ZeroDuration(), 1);
    top.Add(0.99f);
    top.Finish(memory, left, kT0);
    EXPECT_NEAR(top.sum(), 99.0, 1.0) << left;
  }
}

// Uniform draws sit at the 50th percentile on average; draws in proportion
// to the key sit above it (for keys uniform on (0, 1): E = 66.7).
TEST(CrossingPercentilesTest, UniformDrawsAverageFiftyProportionalOnesMore) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> memory(4096);
  for (float& key : memory) key = unit(rng);
  std::uniform_int_distribution<size_t> any(0, memory.size() - 1);
  std::discrete_distribution<size_t> proportional(memory.begin(), memory.end());
  CrossingPercentiles uniform(absl::ZeroDuration(), 64), prioritized(absl::ZeroDuration(), 64);
  for (int batch = 0; batch < 100; ++batch) {
    for (int k = 0; k < 64; ++k) {
      uniform.Add(memory[any(rng)]);
      prioritized.Add(memory[proportional(rng)]);
    }
    uniform.Finish(memory, false, kT0);
    prioritized.Finish(memory, false, kT0);
  }
  ASSERT_EQ(uniform.count(), 6400u);
  // Standard error of each mean: 100 / sqrt(12 x 6400), about 0.36.
  EXPECT_NEAR(uniform.sum() / uniform.count(), 50.0, 1.5);
  EXPECT_NEAR(prioritized.sum() / prioritized.count(), 200.0 / 3, 1.5);
}

}  // namespace
}  // namespace dreplay::server
