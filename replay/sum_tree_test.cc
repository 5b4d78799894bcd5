// Copyright dreplay authors.

#include "replay/sum_tree.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay::replay {
namespace {

TEST(SumTreeTest, StartsEmptyAndTracksSumAndMax) {
  SumTree tree(8);
  EXPECT_EQ(tree.capacity(), 8u);
  EXPECT_EQ(tree.Total(), 0.0);
  EXPECT_EQ(tree.Max(), 0.0);
  tree.Set(3, 2.5);
  tree.Set(6, 1.0);
  EXPECT_EQ(tree.Total(), 3.5);
  EXPECT_EQ(tree.Max(), 2.5);
  EXPECT_EQ(tree.Get(3), 2.5);
  tree.Set(3, 0.25);
  EXPECT_EQ(tree.Total(), 1.25);
  EXPECT_EQ(tree.Max(), 1.0);
  tree.Clear();
  EXPECT_EQ(tree.Total(), 0.0);
  EXPECT_EQ(tree.Get(6), 0.0);
}

TEST(SumTreeTest, FindMapsPrefixesToCumulativeRanges) {
  SumTree tree(8);
  const double values[8] = {1, 2, 0, 4, 0, 0, 3, 0};
  for (int i = 0; i < 8; ++i) tree.Set(i, values[i]);
  // Cumulative ranges: 0:[0,1) 1:[1,3) 3:[3,7) 6:[7,10).
  EXPECT_EQ(tree.Find(0.0), 0u);
  EXPECT_EQ(tree.Find(0.999), 0u);
  EXPECT_EQ(tree.Find(1.0), 1u);
  EXPECT_EQ(tree.Find(2.999), 1u);
  EXPECT_EQ(tree.Find(3.0), 3u);
  EXPECT_EQ(tree.Find(6.999), 3u);
  EXPECT_EQ(tree.Find(7.0), 6u);
  EXPECT_EQ(tree.Find(9.999), 6u);
}

TEST(SumTreeTest, FindNeverReturnsAZeroLeafEvenAtTheEdges) {
  SumTree tree(16);
  tree.Set(5, 1.0);
  tree.Set(9, 2.0);
  for (double prefix : {-1.0, 0.0, 1e-300, 2.9999999, 3.0, 3.5, 1e300}) {
    const uint64_t leaf = tree.Find(prefix);
    EXPECT_GT(tree.Get(leaf), 0.0) << "prefix " << prefix;
  }
  EXPECT_EQ(tree.Find(-1.0), 5u);
  EXPECT_EQ(tree.Find(1e300), 9u);
  // A single positive leaf at the far end.
  SumTree last(4);
  last.Set(3, 1e-200);
  EXPECT_EQ(last.Find(0.0), 3u);
  EXPECT_EQ(last.Find(1.0), 3u);
}

TEST(SumTreeTest, FindBatchGivesExactlyWhatFindGives) {
  constexpr uint64_t kCapacity = 1 << 10;
  SumTree tree(kCapacity);
  std::mt19937_64 rng(3);
  for (uint64_t i = 0; i < kCapacity; ++i) {
    tree.Set(i, (rng() % 3 == 0) ? 0.0 : static_cast<double>(rng() % 1000) / 7.0);
  }
  std::vector<double> prefixes(200);  // more than one internal chunk
  for (double& p : prefixes) p = static_cast<double>(rng() >> 11) * 0x1.0p-53 * tree.Total();
  prefixes[0] = 0;
  prefixes[1] = tree.Total();
  prefixes[2] = -5;
  std::vector<uint64_t> out(prefixes.size());
  tree.FindBatch(prefixes, absl::MakeSpan(out));
  for (size_t k = 0; k < prefixes.size(); ++k) {
    EXPECT_EQ(out[k], tree.Find(prefixes[k])) << "prefix " << prefixes[k];
  }
}

TEST(SumTreeTest, SumsDoNotDriftOverMillionsOfRandomUpdates) {
  constexpr uint64_t kCapacity = 1 << 12;
  constexpr int kUpdates = 4'000'000;
  SumTree tree(kCapacity);
  std::vector<double> leaves(kCapacity, 0.0);
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<uint64_t> index(0, kCapacity - 1);
  std::uniform_real_distribution<double> exponent(-8.0, 4.0);
  for (int k = 0; k < kUpdates; ++k) {
    const uint64_t i = index(rng);
    // A mix of magnitudes and zeros: the hardest case for delta updates.
    const double v = (rng() % 8 == 0) ? 0.0 : std::pow(10.0, exponent(rng));
    tree.Set(i, v);
    leaves[i] = v;
  }
  // Bit-identical to a tree rebuilt from the same leaves.
  SumTree rebuilt(kCapacity);
  for (uint64_t i = 0; i < kCapacity; ++i) rebuilt.SetLeafNoUpdate(i, leaves[i]);
  rebuilt.Rebuild();
  EXPECT_EQ(tree.Total(), rebuilt.Total());
  EXPECT_EQ(tree.Max(), rebuilt.Max());
  // And within a few ulps of the exact sum (long double accumulation of
  // positive terms, error far below this bound).
  long double exact = 0;
  double max = 0;
  for (double v : leaves) {
    exact += v;
    max = std::max(max, v);
  }
  EXPECT_NEAR(tree.Total(), static_cast<double>(exact), 1e-13 * static_cast<double>(exact));
  EXPECT_EQ(tree.Max(), max);
}

TEST(SumTreeTest, SetRangeLeavesTheTreeExactlyAsSetDoes) {
  constexpr uint64_t kCapacity = 1 << 10;
  SumTree by_set(kCapacity);
  SumTree by_range(kCapacity);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> value(0.0, 3.0);
  // Ranges of every shape: one leaf, the last leaf, odd starts and ends,
  // the whole tree, and zeros among them.
  std::vector<std::pair<uint64_t, uint64_t>> ranges = {{0, 1},   {kCapacity - 1, 1}, {3, 6},
                                                       {511, 2}, {0, kCapacity},     {100, 0}};
  std::uniform_int_distribution<uint64_t> start(0, kCapacity - 1);
  for (int k = 0; k < 500; ++k) {
    const uint64_t first = start(rng);
    ranges.push_back({first, 1 + rng() % (kCapacity - first)});
  }
  for (const auto& [first, count] : ranges) {
    std::vector<double> values(count);
    for (double& v : values) v = (rng() % 5 == 0) ? 0.0 : value(rng);
    for (uint64_t k = 0; k < count; ++k) by_set.Set(first + k, values[k]);
    by_range.SetRange(first, values);
    ASSERT_EQ(by_range.Total(), by_set.Total()) << first << "+" << count;
    ASSERT_EQ(by_range.Max(), by_set.Max()) << first << "+" << count;
  }
  for (uint64_t i = 0; i < kCapacity; ++i) ASSERT_EQ(by_range.Get(i), by_set.Get(i)) << i;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int k = 0; k < 10'000; ++k) {
    const double prefix = unit(rng) * by_set.Total();
    ASSERT_EQ(by_range.Find(prefix), by_set.Find(prefix)) << prefix;
  }
}

TEST(SumTreeTest, FindDrawsLeavesInProportionToTheirValues) {
  // Chi-square goodness of fit with a fixed seed. Positive leaves: 1..6.
  SumTree tree(8);
  const double values[8] = {1, 2, 3, 0, 4, 5, 6, 0};
  double total = 0;
  for (int i = 0; i < 8; ++i) {
    tree.Set(i, values[i]);
    total += values[i];
  }
  constexpr int kDraws = 1'000'000;
  std::mt19937_64 rng(7);
  std::vector<int> counts(8, 0);
  for (int k = 0; k < kDraws; ++k) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    ++counts[tree.Find(u * tree.Total())];
  }
  double chi_square = 0;
  for (int i = 0; i < 8; ++i) {
    if (values[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "leaf " << i;
      continue;
    }
    const double expected = kDraws * values[i] / total;
    chi_square += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  // 5 degrees of freedom: P(chi^2 > 40) < 1e-7 for a correct sampler.
  EXPECT_LT(chi_square, 40.0);
}

}  // namespace
}  // namespace dreplay::replay
