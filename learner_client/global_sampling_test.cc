// Copyright dreplay authors.

#include "learner_client/global_sampling.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <iostream>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "replay/replay_memory.h"

namespace dreplay::learner {
namespace {

// A node of the test: its transitions' p^alpha, sampled as a node samples
// its own batches (proportionally, with replacement), draws staged ahead.
struct TestNode {
  std::vector<double> priority_alpha;
  std::deque<size_t> staged;

  double Sum() const {
    double sum = 0;
    for (double p : priority_alpha) sum += p;
    return sum;
  }
  size_t Take(std::mt19937_64* rng) {
    if (staged.empty()) {
      std::discrete_distribution<size_t> local(priority_alpha.begin(), priority_alpha.end());
      for (int i = 0; i < 256; ++i) staged.push_back(local(*rng));  // one staged batch
    }
    const size_t i = staged.front();
    staged.pop_front();
    return i;
  }
};

std::vector<double> Ramp(int n, double from, double step) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(from + step * i);
  return v;
}

// Wilson and Hilferty's approximation of the chi-squared quantile.
double ChiSquaredQuantile(double df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Nodes of very unequal mass and size: a few heavy transitions, many light
// ones, a middle one, and an empty node.
std::vector<TestNode> UnequalNodes() {
  std::vector<TestNode> nodes(4);
  nodes[0].priority_alpha = Ramp(4, 20.0, 5.0);   // mass 110 in 4
  nodes[1].priority_alpha = Ramp(60, 0.5, 0.02);  // mass 65.4 in 60
  nodes[2].priority_alpha = Ramp(12, 1.0, 0.5);   // mass 45 in 12
  return nodes;                                   // node 3: empty
}

TEST(GlobalSamplingTest, DrawsFollowTheGlobalPriorityDistribution) {
  std::vector<TestNode> nodes = UnequalNodes();
  std::vector<double> sums;
  for (const TestNode& n : nodes) sums.push_back(n.Sum());
  double total = 0;
  for (double s : sums) total += s;

  GlobalSampler sampler(/*seed=*/7);
  std::mt19937_64 node_rng(11);
  std::vector<std::vector<uint64_t>> seen(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) seen[k].assign(nodes[k].priority_alpha.size(), 0);
  constexpr int kBatches = 4000;
  constexpr int kBatch = 64;
  std::vector<int> counts;
  for (int b = 0; b < kBatches; ++b) {
    ASSERT_TRUE(sampler.SplitBatch(sums, kBatch, &counts).ok());
    int sum = 0;
    for (size_t k = 0; k < nodes.size(); ++k) {
      sum += counts[k];
      for (int d = 0; d < counts[k]; ++d) ++seen[k][nodes[k].Take(&node_rng)];
    }
    ASSERT_EQ(sum, kBatch);
    ASSERT_EQ(counts[3], 0) << "a node without mass is never drawn from";
  }
  // Pearson's chi-squared over every transition of every node.
  const double draws = double{kBatches} * kBatch;
  double chi2 = 0;
  int cells = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (size_t i = 0; i < nodes[k].priority_alpha.size(); ++i) {
      const double expected = draws * nodes[k].priority_alpha[i] / total;
      ASSERT_GE(expected, 20) << "the test needs enough draws per cell";
      chi2 += (seen[k][i] - expected) * (seen[k][i] - expected) / expected;
      ++cells;
    }
  }
  const double critical = ChiSquaredQuantile(cells - 1, /*z(0.999)=*/3.0902);
  std::cout << "chi-squared " << chi2 << " over " << cells << " cells (0.999 quantile " << critical
            << ")\n";
  EXPECT_LT(chi2, critical) << cells << " cells, " << draws << " draws";
}

TEST(GlobalSamplingTest, ChoosingNodesUniformlyFailsTheSameTest) {
  // The check has power: a learner that asks each node for the same share
  // (round robin) samples by local priority only, and the test sees it.
  std::vector<TestNode> nodes = UnequalNodes();
  nodes.pop_back();  // the empty node
  double total = 0;
  for (const TestNode& n : nodes) total += n.Sum();
  std::mt19937_64 node_rng(11);
  std::vector<std::vector<uint64_t>> seen(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) seen[k].assign(nodes[k].priority_alpha.size(), 0);
  constexpr int kDraws = 4000 * 64;
  for (int d = 0; d < kDraws; ++d) {
    const size_t k = d % nodes.size();
    ++seen[k][nodes[k].Take(&node_rng)];
  }
  double chi2 = 0;
  int cells = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (size_t i = 0; i < nodes[k].priority_alpha.size(); ++i) {
      const double expected = kDraws * nodes[k].priority_alpha[i] / total;
      chi2 += (seen[k][i] - expected) * (seen[k][i] - expected) / expected;
      ++cells;
    }
  }
  std::cout << "round robin: chi-squared " << chi2 << " over " << cells << " cells\n";
  EXPECT_GT(chi2, ChiSquaredQuantile(cells - 1, 3.0902));
}

TEST(GlobalSamplingTest, WeightsAreTheDefinitionWithGlobalProbabilities) {
  // A batch with draws from every node: (N P(i))^-beta over the batch's
  // largest, with P and N over all nodes.
  std::vector<TestNode> nodes = UnequalNodes();
  double total = 0;
  uint64_t n = 0;
  for (const TestNode& node : nodes) {
    total += node.Sum();
    n += node.priority_alpha.size();
  }
  const std::vector<double> batch = {nodes[0].priority_alpha[3], nodes[1].priority_alpha[0],
                                     nodes[1].priority_alpha[59], nodes[2].priority_alpha[5],
                                     nodes[1].priority_alpha[0]};
  for (double beta : {0.0, 0.4, 1.0}) {
    double max_w = 0;
    for (double p : batch) max_w = std::max(max_w, std::pow(n * p / total, -beta));
    std::vector<float> w(batch.size());
    ASSERT_TRUE(BatchWeights(batch, beta, absl::MakeSpan(w)).ok());
    for (size_t i = 0; i < batch.size(); ++i) {
      const double expected = std::pow(n * batch[i] / total, -beta) / max_w;
      EXPECT_NEAR(w[i], expected, 1e-3 * expected) << "draw " << i << " beta " << beta;
    }
    EXPECT_FLOAT_EQ(*std::max_element(w.begin(), w.end()), 1.0f);
  }
}

TEST(GlobalSamplingTest, WithOneNodeTheWeightsAreThatNodes) {
  // The server's own weights (replay/replay_memory.h) from local
  // probabilities p / S, against BatchWeights from p alone.
  replay::ReplayMemoryOptions options;
  options.capacity = 8;
  auto memory = replay::ReplayMemory::Create(options);
  ASSERT_TRUE(memory.ok()) << memory.status();
  const std::vector<double> batch = {0.5, 3.0, 0.02, 7.5, 0.5};
  constexpr double kSum = 42.0;  // the node's S: any value cancels
  std::vector<replay::SampledItem> items(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) items[i].probability = batch[i] / kSum;
  (*memory)->ComputeWeights(0.6, absl::MakeSpan(items));
  std::vector<float> w(batch.size());
  ASSERT_TRUE(BatchWeights(batch, 0.6, absl::MakeSpan(w)).ok());
  for (size_t i = 0; i < batch.size(); ++i) EXPECT_NEAR(w[i], items[i].weight, 1e-6);
}

TEST(GlobalSamplingTest, RefusesWhatCannotBeSampled) {
  GlobalSampler sampler(1);
  std::vector<int> counts;
  EXPECT_EQ(sampler.SplitBatch({}, 8, &counts).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler.SplitBatch({10.0}, 0, &counts).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler.SplitBatch({0.0, 0.0}, 8, &counts).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler.SplitBatch({10.0, -1.0}, 8, &counts).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler.SplitBatch({10.0, NAN}, 8, &counts).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(sampler.SplitBatch({10.0, 0.0}, 8, &counts).ok());
  EXPECT_EQ(counts, (std::vector<int>{8, 0}));
  std::vector<float> w(2);
  EXPECT_EQ(BatchWeights({1.0, 0.0}, 0.4, absl::MakeSpan(w)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BatchWeights({1.0, 2.0}, -1, absl::MakeSpan(w)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BatchWeights({1.0}, 0.4, absl::MakeSpan(w)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BatchWeights({}, 0.4, absl::Span<float>()).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dreplay::learner
