// Copyright dreplay authors.

#include "learner_client/multi_node_source.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace dreplay::learner {
namespace {

constexpr size_t kObservation = 4;
constexpr float kBeta = 0.4f;

// A node of the test: transitions with fixed p^alpha, each batch drawn as a
// node draws (proportionally, with replacement) and weighted as a node
// weights its own (replay::ReplayMemory::ComputeWeights). A row's
// observation names (node, index); its answer is checked against it.
class FakeNode : public NodeBatchSource {
 public:
  FakeNode(int id, std::vector<double> priority_alpha, uint32_t batch, uint64_t seed)
      : id_(id), alpha_(std::move(priority_alpha)), batch_(batch), rng_(seed) {}

  absl::StatusOr<bool> Next(absl::Duration timeout, NodeBatch* out) override {
    ++asked_;
    if (lost_) return absl::UnavailableError("test: lost");
    if (stalled_) {
      absl::SleepFor(std::min(timeout, absl::Milliseconds(5)));
      return false;
    }
    if (alpha_.empty()) return false;
    out->rows.Clear();
    out->weights.clear();
    out->priority_alpha.clear();
    out->origins.clear();
    double sum = 0;
    for (double a : alpha_) sum += a;
    std::discrete_distribution<size_t> draw(alpha_.begin(), alpha_.end());
    std::vector<size_t> rows;
    double min_alpha = 1e300;
    for (uint32_t d = 0; d < batch_; ++d) {
      rows.push_back(draw(rng_));
      min_alpha = std::min(min_alpha, alpha_[rows.back()]);
    }
    std::vector<float> answer_key;
    for (size_t i : rows) {
      rl::Transition t;
      t.observation = {static_cast<float>(id_), static_cast<float>(i), 0.0f, 0.0f};
      t.next_observation = t.observation;
      t.action = 0;
      t.reward = 0;
      t.discount = 1;
      t.done = false;
      t.steps = 1;
      EXPECT_TRUE(out->rows.Add(t).ok());
      out->priority_alpha.push_back(static_cast<float>(alpha_[i]));
      out->weights.push_back(static_cast<float>(std::pow(min_alpha / alpha_[i], kBeta)));
      out->origins.push_back(EntryOrigin{/*insert_time_ns=*/1000 + i, /*arrived=*/true});
      out->origins.back().policy_lag = policy_lag_ < 0 ? -1 : policy_lag_ + static_cast<int>(i % 2);
      answer_key.push_back(Key(id_, i));
    }
    out->beta = kBeta;
    out->ticket = next_ticket_++;
    out->resumed = resume_next_;
    if (resume_next_) {
      expected_.clear();
      resume_next_ = false;
    }
    expected_[out->ticket] = std::move(answer_key);
    return true;
  }

  absl::Status Answer(uint64_t ticket, absl::Span<const float> priorities) override {
    auto it = expected_.find(ticket);
    if (it == expected_.end()) {
      ++void_answers_;
      return absl::OkStatus();
    }
    EXPECT_EQ(it, expected_.begin()) << "node " << id_ << ": batches answered out of order";
    EXPECT_EQ(std::vector<float>(priorities.begin(), priorities.end()), it->second)
        << "node " << id_ << " batch " << ticket << " answered with other rows' priorities";
    expected_.erase(it);
    ++answered_;
    return absl::OkStatus();
  }

  absl::StatusOr<double> PrioritySum() override {
    if (lost_) return absl::UnavailableError("test: lost");
    double sum = 0;
    for (double a : alpha_) sum += a;
    return sum;
  }
  absl::StatusOr<uint64_t> Inserted() override {
    if (lost_) return absl::UnavailableError("test: lost");
    return inserted_;
  }
  uint64_t transitions_dropped() const override { return 0; }
  void set_inserted(uint64_t n) { inserted_ = n; }
  uint64_t inserted() const { return inserted_; }

  // The priority the test answers for a row: its (node, index).
  static float Key(int node, size_t index) { return static_cast<float>(node * 1000 + index); }

  const std::vector<double>& alpha() const { return alpha_; }
  int id() const { return id_; }
  void set_stalled(bool stalled) { stalled_ = stalled; }
  // Its rows' policy lags: `lag` for even indices, lag + 1 for odd ones
  // (-1: unknown).
  void set_policy_lag(int lag) { policy_lag_ = lag; }
  void set_lost(bool lost) { lost_ = lost; }
  void ResumeNext() { resume_next_ = true; }
  uint64_t answered() const { return answered_; }
  uint64_t unanswered() const { return expected_.size(); }
  uint64_t void_answers() const { return void_answers_; }
  uint64_t asked() const { return asked_; }

 private:
  const int id_;
  const std::vector<double> alpha_;
  const uint32_t batch_;
  std::mt19937_64 rng_;
  bool stalled_ = false;
  int policy_lag_ = -1;
  bool lost_ = false;
  uint64_t inserted_ = 0;
  bool resume_next_ = false;
  uint64_t next_ticket_ = 1;
  std::map<uint64_t, std::vector<float>> expected_;
  uint64_t answered_ = 0;
  uint64_t void_answers_ = 0;
  uint64_t asked_ = 0;
};

std::vector<double> Ramp(int n, double from, double step) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(from + step * i);
  return v;
}

double ChiSquaredQuantile(double df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

struct Batch {
  Batch() : rows(kObservation) {}
  rl::TransitionBatch rows;
  std::vector<float> weights;
  std::vector<EntryOrigin> origins;
};

// Trains nothing: answers each row with its key, so that the fake nodes
// check every answer reaches the row's node, batch and place.
absl::Status AnswerWithKeys(MultiNodeBatchSource* source, const Batch& b) {
  std::vector<float> priorities;
  for (size_t r = 0; r < b.rows.size(); ++r) {
    priorities.push_back(
        FakeNode::Key(static_cast<int>(b.rows.observations()[r * kObservation]),
                      static_cast<size_t>(b.rows.observations()[r * kObservation + 1])));
  }
  return source->WritePriorities(priorities);
}

// Pearson's chi-squared of how often each transition of `nodes` was drawn
// (seen[node][index]) against p^alpha / sum of all.
double ChiSquared(const std::vector<FakeNode*>& nodes,
                  const std::vector<std::vector<uint64_t>>& seen, double draws, int* cells) {
  double total = 0;
  for (FakeNode* n : nodes) {
    for (double a : n->alpha()) total += a;
  }
  double chi2 = 0;
  *cells = 0;
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (size_t i = 0; i < nodes[k]->alpha().size(); ++i) {
      const double expected = draws * nodes[k]->alpha()[i] / total;
      chi2 += (seen[k][i] - expected) * (seen[k][i] - expected) / expected;
      ++*cells;
    }
  }
  return chi2;
}

// Draws `batches` batches through a source over unequal nodes and returns
// chi-squared against the global distribution (and, in *tv, the source's
// measure of its distance from it).
double RunUnequalNodes(ShardPolicy policy, int batches, int* cells, double* tv = nullptr) {
  FakeNode heavy(0, Ramp(4, 20.0, 5.0), 64, 101);   // mass 110 in 4
  FakeNode light(1, Ramp(60, 0.5, 0.02), 64, 102);  // mass 65.4 in 60
  FakeNode medium(2, Ramp(12, 1.0, 0.5), 64, 103);  // mass 45 in 12
  FakeNode empty(3, {}, 64, 104);
  std::vector<FakeNode*> nodes = {&heavy, &light, &medium};
  MultiNodeOptions options;
  options.node_timeout = absl::Milliseconds(50);  // the empty node's
  options.start_timeout = absl::Milliseconds(50);
  options.policy = policy;
  options.batch_size = 64;
  options.seed = 7;
  auto source =
      MultiNodeBatchSource::Create(options, {&heavy, &light, &medium, &empty}, kObservation);
  EXPECT_TRUE(source.ok()) << source.status();
  std::vector<std::vector<uint64_t>> seen(3);
  for (size_t k = 0; k < 3; ++k) seen[k].assign(nodes[k]->alpha().size(), 0);
  Batch b;
  uint64_t draws = 0;
  for (int n = 0; n < batches; ++n) {
    absl::StatusOr<bool> got = (*source)->Next(absl::Seconds(5), &b.rows, &b.weights, &b.origins);
    EXPECT_TRUE(got.ok() && *got) << got.status();
    if (!got.ok() || !*got) break;
    EXPECT_EQ(b.weights.size(), b.rows.size());
    EXPECT_EQ(b.origins.size(), b.rows.size());
    for (size_t r = 0; r < b.rows.size(); ++r) {
      const auto node = static_cast<size_t>(b.rows.observations()[r * kObservation]);
      const auto index = static_cast<size_t>(b.rows.observations()[r * kObservation + 1]);
      EXPECT_LT(node, 3u) << "a node without mass gave a row";
      if (node < 3) ++seen[node][index];
      EXPECT_EQ(b.origins[r].insert_time_ns, 1000 + index);
      ++draws;
    }
    EXPECT_TRUE(AnswerWithKeys(source->get(), b).ok());
  }
  // Every node batch that was fully used was answered; at most one per
  // node waits with rows not yet given.
  for (FakeNode* n : nodes) EXPECT_LE(n->unanswered(), 1u) << "node " << n->id();
  if (tv != nullptr) *tv = SamplingTvDistance((*source)->shares());
  return ChiSquared(nodes, seen, static_cast<double>(draws), cells);
}

TEST(MultiNodeSourceTest, ExactPolicyDrawsByGlobalPriorityAcrossUnequalNodes) {
  int cells = 0;
  const double chi2 = RunUnequalNodes(ShardPolicy::kExact, 3000, &cells);
  const double critical = ChiSquaredQuantile(cells - 1, /*z(0.999)=*/3.0902);
  std::cout << "exact: chi-squared " << chi2 << " over " << cells << " cells (0.999 quantile "
            << critical << ")\n";
  EXPECT_LT(chi2, critical);
}

TEST(MultiNodeSourceTest, RoundRobinAndFirstReadyDoNotAndTheTestSeesIt) {
  for (ShardPolicy policy : {ShardPolicy::kRoundRobin, ShardPolicy::kFirstReady}) {
    int cells = 0;
    const double chi2 = RunUnequalNodes(policy, 3000, &cells);
    const double critical = ChiSquaredQuantile(cells - 1, 3.0902);
    std::cout << ShardPolicyName(policy) << ": chi-squared " << chi2 << " over " << cells
              << " cells\n";
    EXPECT_GT(chi2, 10 * critical) << ShardPolicyName(policy);
  }
}

TEST(MultiNodeSourceTest, MeasuresEachPolicysDistanceFromExactSampling) {
  // Masses 110, 65.4 and 45 (and an empty node): exact's distance is its
  // multinomial noise; round robin's is 1/2 sum |1/3 - S_k / S|.
  const double total = 110 + 65.4 + 45;
  const double round_robin = (std::abs(1.0 / 3 - 110 / total) + std::abs(1.0 / 3 - 65.4 / total) +
                              std::abs(1.0 / 3 - 45 / total)) /
                             2;
  int cells = 0;
  double tv = 0;
  RunUnequalNodes(ShardPolicy::kExact, 1000, &cells, &tv);
  EXPECT_LT(tv, 0.01);
  RunUnequalNodes(ShardPolicy::kRoundRobin, 999, &cells, &tv);
  EXPECT_NEAR(tv, round_robin, 1e-3) << "round robin, against " << round_robin;
}

TEST(MultiNodeSourceTest, ALostNodeIsAskedAgainOnlyEveryRejoinInterval) {
  FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);
  FakeNode b(1, Ramp(8, 1.0, 1.0), 16, 2);
  MultiNodeOptions options;
  options.batch_size = 16;
  options.rejoin_interval = absl::Hours(1);
  auto source = MultiNodeBatchSource::Create(options, {&a, &b}, kObservation);
  ASSERT_TRUE(source.ok());
  Batch batch;
  b.set_lost(true);
  for (int n = 0; n < 30; ++n) {
    ASSERT_TRUE(*(*source)->Next(absl::Seconds(5), &batch.rows, &batch.weights, &batch.origins));
    ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
  }
  EXPECT_TRUE((*source)->shares()[1].away);
  EXPECT_EQ(b.asked(), 0u) << "its sum failed first; no batch was asked of it within the hour";
  EXPECT_EQ((*source)->shares()[0].rows, 30u * 16);
}

TEST(MultiNodeSourceTest, ExactWeightsUseGlobalProbabilitiesOverTheBatch) {
  FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);
  FakeNode b(1, Ramp(8, 0.1, 0.05), 16, 2);
  MultiNodeOptions options;
  options.batch_size = 32;
  auto source = MultiNodeBatchSource::Create(options, {&a, &b}, kObservation);
  ASSERT_TRUE(source.ok());
  Batch batch;
  for (int n = 0; n < 50; ++n) {
    ASSERT_TRUE(*(*source)->Next(absl::Seconds(5), &batch.rows, &batch.weights, &batch.origins));
    ASSERT_EQ(batch.rows.size(), 32u);
    std::vector<double> alpha;
    for (size_t r = 0; r < batch.rows.size(); ++r) {
      const FakeNode& node = batch.rows.observations()[r * kObservation] == 0 ? a : b;
      alpha.push_back(
          node.alpha()[static_cast<size_t>(batch.rows.observations()[r * kObservation + 1])]);
    }
    const double min_alpha = *std::min_element(alpha.begin(), alpha.end());
    float largest = 0;
    for (size_t r = 0; r < alpha.size(); ++r) {
      // (N P(i))^-beta / max_j (N P(j))^-beta with P(i) = p_i^alpha / sum S.
      EXPECT_NEAR(batch.weights[r], std::pow(min_alpha / alpha[r], kBeta), 1e-3);
      largest = std::max(largest, batch.weights[r]);
    }
    EXPECT_FLOAT_EQ(largest, 1.0f);
    ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
  }
}

TEST(MultiNodeSourceTest, WholeBatchPoliciesKeepTheNodesOwnWeights) {
  FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);
  FakeNode b(1, Ramp(8, 0.1, 0.05), 16, 2);
  MultiNodeOptions options;
  options.policy = ShardPolicy::kRoundRobin;
  auto source = MultiNodeBatchSource::Create(options, {&a, &b}, kObservation);
  ASSERT_TRUE(source.ok());
  Batch batch;
  for (int n = 0; n < 6; ++n) {
    ASSERT_TRUE(*(*source)->Next(absl::Seconds(5), &batch.rows, &batch.weights, &batch.origins));
    ASSERT_EQ(batch.rows.size(), 16u);
    const float node = batch.rows.observations()[0];
    EXPECT_EQ(node, static_cast<float>(n % 2)) << "round robin takes the nodes in turn";
    const FakeNode& from = node == 0 ? a : b;
    double min_alpha = 1e300;
    for (size_t r = 0; r < 16; ++r) {
      EXPECT_EQ(batch.rows.observations()[r * kObservation], node) << "one node per batch";
      min_alpha = std::min(
          min_alpha,
          from.alpha()[static_cast<size_t>(batch.rows.observations()[r * kObservation + 1])]);
    }
    for (size_t r = 0; r < 16; ++r) {
      const double alpha =
          from.alpha()[static_cast<size_t>(batch.rows.observations()[r * kObservation + 1])];
      EXPECT_NEAR(batch.weights[r], std::pow(min_alpha / alpha, kBeta), 1e-6);
    }
    ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
  }
  EXPECT_EQ(a.answered(), 3u);
  EXPECT_EQ(b.answered(), 3u);
}

TEST(MultiNodeSourceTest, ANodeThatStopsStagingIsPassedOverWithinTheNodeTimeout) {
  for (ShardPolicy policy :
       {ShardPolicy::kExact, ShardPolicy::kRoundRobin, ShardPolicy::kFirstReady}) {
    SCOPED_TRACE(ShardPolicyName(policy));
    FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);
    FakeNode b(1, Ramp(8, 1.0, 1.0), 16, 2);
    MultiNodeOptions options;
    options.policy = policy;
    options.batch_size = 16;
    options.node_timeout = absl::Milliseconds(100);
    auto source = MultiNodeBatchSource::Create(options, {&a, &b}, kObservation);
    ASSERT_TRUE(source.ok());
    Batch batch;
    for (int n = 0; n < 4; ++n) {  // both stage
      ASSERT_TRUE(*(*source)->Next(absl::Seconds(30), &batch.rows, &batch.weights, &batch.origins));
      ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
    }
    b.set_stalled(true);
    // Every batch comes, none later than the node timeout plus slack, from
    // the node that stages (and what the other had staged before).
    uint64_t from_b = 0;
    for (int n = 0; n < 10; ++n) {
      const absl::Time start = absl::Now();
      ASSERT_TRUE(*(*source)->Next(absl::Seconds(30), &batch.rows, &batch.weights, &batch.origins));
      EXPECT_LT(absl::Now() - start, absl::Seconds(1));
      for (size_t r = 0; r < batch.rows.size(); ++r) {
        from_b += batch.rows.observations()[r * kObservation] == 1.0f;
      }
      ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
    }
    EXPECT_LE(from_b, 16u) << "only rows of the batch it staged before it stopped";
    if (policy != ShardPolicy::kFirstReady) {
      // first_ready never needs it: it takes whichever node is ready.
      EXPECT_TRUE((*source)->shares()[1].away);
      EXPECT_EQ((*source)->shares()[1].passed_over, 1u);
    }
    // It stages again: it is back, and gives rows.
    b.set_stalled(false);
    from_b = 0;
    for (int n = 0; n < 20; ++n) {
      ASSERT_TRUE(*(*source)->Next(absl::Seconds(30), &batch.rows, &batch.weights, &batch.origins));
      for (size_t r = 0; r < batch.rows.size(); ++r) {
        from_b += batch.rows.observations()[r * kObservation] == 1.0f;
      }
      ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
    }
    EXPECT_FALSE((*source)->shares()[1].away);
    EXPECT_GT(from_b, 0u);
  }
}

TEST(MultiNodeSourceTest, ANodeNotStartedYetIsWaitedForUpToTheStartTimeout) {
  FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);
  FakeNode b(1, Ramp(8, 1.0, 1.0), 16, 2);
  MultiNodeOptions options;
  options.policy = ShardPolicy::kRoundRobin;
  options.batch_size = 16;
  options.node_timeout = absl::Milliseconds(20);
  options.start_timeout = absl::Milliseconds(400);
  auto source = MultiNodeBatchSource::Create(options, {&b, &a}, kObservation);
  ASSERT_TRUE(source.ok());
  b.set_stalled(true);  // node 0 of the source: not started
  Batch batch;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(*(*source)->Next(absl::Seconds(30), &batch.rows, &batch.weights, &batch.origins));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400)) << "waited for the start timeout";
  EXPECT_TRUE((*source)->shares()[0].away);
  EXPECT_EQ(batch.rows.observations()[0], 0.0f) << "then took the other";
  options.start_timeout = absl::Milliseconds(10);
  EXPECT_TRUE(absl::IsInvalidArgument(MultiNodeBatchSource::Create(options, {&a}, 4).status()))
      << "a start timeout below the node timeout";
}

TEST(MultiNodeSourceTest, ANodeAddedWhileTrainingStallsNothingAndTakesItsShare) {
  for (ShardPolicy policy :
       {ShardPolicy::kExact, ShardPolicy::kRoundRobin, ShardPolicy::kFirstReady}) {
    SCOPED_TRACE(ShardPolicyName(policy));
    FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);  // mass 36
    FakeNode b(1, Ramp(8, 2.0, 2.0), 16, 2);  // mass 72
    MultiNodeOptions options;
    options.policy = policy;
    options.batch_size = 16;
    options.node_timeout = absl::Seconds(5);  // a wait for b would show
    options.start_timeout = absl::Seconds(5);
    options.seed = 3;
    auto source = MultiNodeBatchSource::Create(options, {&a}, kObservation);
    ASSERT_TRUE(source.ok());
    Batch batch;
    for (int n = 0; n < 3; ++n) {
      ASSERT_TRUE(*(*source)->Next(absl::Seconds(30), &batch.rows, &batch.weights, &batch.origins));
      ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
    }
    EXPECT_TRUE(absl::IsInvalidArgument((*source)->AddNode(nullptr)));
    b.set_stalled(true);  // joins while still filling up
    ASSERT_TRUE((*source)->AddNode(&b).ok());
    ASSERT_EQ((*source)->shares().size(), 2u);
    for (int n = 0; n < 5; ++n) {
      const absl::Time start = absl::Now();
      ASSERT_TRUE(*(*source)->Next(absl::Seconds(30), &batch.rows, &batch.weights, &batch.origins));
      EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << "waited for the node still filling";
      for (size_t r = 0; r < batch.rows.size(); ++r) {
        EXPECT_EQ(batch.rows.observations()[r * kObservation], 0.0f);
      }
      ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
    }
    EXPECT_EQ((*source)->shares()[1].passed_over, 0u) << "joining is not being passed over";
    b.set_stalled(false);
    uint64_t rows = 0;
    uint64_t from_b = 0;
    for (int n = 0; n < 200; ++n) {
      ASSERT_TRUE(*(*source)->Next(absl::Seconds(30), &batch.rows, &batch.weights, &batch.origins));
      for (size_t r = 0; r < batch.rows.size(); ++r) {
        from_b += batch.rows.observations()[r * kObservation] == 1.0f;
      }
      rows += batch.rows.size();
      ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
    }
    EXPECT_FALSE((*source)->shares()[1].away);
    const double share = static_cast<double>(from_b) / static_cast<double>(rows);
    if (policy == ShardPolicy::kExact) {
      // b holds 2/3 of the mass: 3,200 rows, binomial sd 0.008.
      EXPECT_NEAR(share, 2.0 / 3.0, 0.04);
    } else if (policy == ShardPolicy::kRoundRobin) {
      EXPECT_NEAR(share, 0.5, 0.01);
    } else {
      EXPECT_GT(share, 0.1);  // whichever is ready: both always are
    }
  }
}

TEST(MultiNodeSourceTest, EachNodesPolicyLagIsTheMeanOverItsRowsTaken) {
  FakeNode a(0, std::vector<double>(8, 1.0), 16, 1);  // lags 3 and 4, equally often
  FakeNode b(1, Ramp(8, 1.0, 1.0), 16, 2);            // actors acting with no version known
  a.set_policy_lag(3);
  MultiNodeOptions options;
  options.batch_size = 16;
  auto source = MultiNodeBatchSource::Create(options, {&a, &b}, kObservation);
  ASSERT_TRUE(source.ok());
  Batch batch;
  double lag_sum = 0;
  uint64_t lag_rows = 0;
  for (int n = 0; n < 50; ++n) {
    ASSERT_TRUE(*(*source)->Next(absl::Seconds(30), &batch.rows, &batch.weights, &batch.origins));
    for (size_t r = 0; r < batch.rows.size(); ++r) {
      if (batch.origins[r].policy_lag >= 0) {
        EXPECT_EQ(batch.rows.observations()[r * kObservation], 0.0f) << "only a's rows have one";
        lag_sum += static_cast<double>(batch.origins[r].policy_lag);
        ++lag_rows;
      }
    }
    ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
  }
  ASSERT_GT(lag_rows, 0u);
  ASSERT_TRUE((*source)->shares()[0].policy_lag_mean.has_value());
  EXPECT_DOUBLE_EQ(*(*source)->shares()[0].policy_lag_mean, lag_sum / lag_rows);
  EXPECT_NEAR(*(*source)->shares()[0].policy_lag_mean, 3.5, 0.1);
  EXPECT_FALSE((*source)->shares()[1].policy_lag_mean.has_value());
}

TEST(MultiNodeSourceTest, NoNodeReadyIsNoBatchYetNotAnError) {
  FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);
  a.set_stalled(true);
  for (ShardPolicy policy :
       {ShardPolicy::kExact, ShardPolicy::kRoundRobin, ShardPolicy::kFirstReady}) {
    MultiNodeOptions options;
    options.policy = policy;
    options.node_timeout = absl::Seconds(10);
    auto source = MultiNodeBatchSource::Create(options, {&a}, kObservation);
    ASSERT_TRUE(source.ok());
    Batch batch;
    absl::StatusOr<bool> got =
        (*source)->Next(absl::Milliseconds(20), &batch.rows, &batch.weights, &batch.origins);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_FALSE(*got) << ShardPolicyName(policy);
    EXPECT_FALSE((*source)->shares()[0].away) << "20 ms is not the node timeout";
  }
}

TEST(MultiNodeSourceTest, AResumedNodeDropsTheRowsItWillNotTakeAnswersFor) {
  FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);
  FakeNode b(1, Ramp(8, 1.0, 1.0), 16, 2);
  MultiNodeOptions options;
  options.batch_size = 10;  // leaves rows of node batches for later batches
  auto source = MultiNodeBatchSource::Create(options, {&a, &b}, kObservation);
  ASSERT_TRUE(source.ok());
  Batch batch;
  for (int n = 0; n < 5; ++n) {
    ASSERT_TRUE(*(*source)->Next(absl::Seconds(5), &batch.rows, &batch.weights, &batch.origins));
    ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
  }
  a.ResumeNext();
  b.ResumeNext();
  for (int n = 0; n < 20; ++n) {
    ASSERT_TRUE(*(*source)->Next(absl::Seconds(5), &batch.rows, &batch.weights, &batch.origins));
    ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
  }
  const uint64_t dropped = (*source)->shares()[0].dropped + (*source)->shares()[1].dropped;
  EXPECT_GT(dropped, 0u) << "rows held across the restart are dropped";
  EXPECT_EQ((*source)->transitions_dropped(), dropped);
  EXPECT_EQ(a.void_answers() + b.void_answers(), 0u) << "dropped batches are not answered";
}

TEST(MultiNodeSourceTest, OneLimitOverEveryNodesInserts) {
  for (ShardPolicy policy : {ShardPolicy::kExact, ShardPolicy::kRoundRobin}) {
    SCOPED_TRACE(ShardPolicyName(policy));
    FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);
    FakeNode b(1, Ramp(8, 1.0, 1.0), 16, 2);
    a.set_inserted(100);
    b.set_inserted(28);
    MultiNodeOptions options;
    options.policy = policy;
    options.batch_size = 16;
    options.samples_per_insert = 1;
    options.spi_error_buffer = 64;
    options.min_inserted = 1;
    auto source = MultiNodeBatchSource::Create(options, {&a, &b}, kObservation);
    ASSERT_TRUE(source.ok()) << source.status();
    // Budget 1 x (128 - 1) + 64 = 191 rows: 11 batches of 16, not a 12th.
    Batch batch;
    for (int n = 0; n < 11; ++n) {
      ASSERT_TRUE(*(*source)->Next(absl::Seconds(5), &batch.rows, &batch.weights, &batch.origins));
      ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
    }
    absl::StatusOr<bool> held =
        (*source)->Next(absl::Milliseconds(20), &batch.rows, &batch.weights, &batch.origins);
    ASSERT_TRUE(held.ok());
    EXPECT_FALSE(*held) << "the 12th batch is over the budget";
    EXPECT_EQ((*source)->limiter_waits(), 1u);
    EXPECT_NEAR(*(*source)->samples_per_insert(), 176.0 / 128, 1e-9);
    // Either node's inserts raise the budget for both.
    b.set_inserted(b.inserted() + 16);
    ASSERT_TRUE(*(*source)->Next(absl::Seconds(5), &batch.rows, &batch.weights, &batch.origins));
    ASSERT_TRUE(AnswerWithKeys(source->get(), batch).ok());
  }
  FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);
  MultiNodeOptions bad;
  bad.batch_size = 16;
  bad.samples_per_insert = 1;
  bad.spi_error_buffer = 8;  // less than a batch: sampling could never start
  EXPECT_TRUE(absl::IsInvalidArgument(MultiNodeBatchSource::Create(bad, {&a}, 4).status()));
}

TEST(MultiNodeSourceTest, RefusesBadOptionsAndAnswersOfAnotherSize) {
  FakeNode a(0, Ramp(8, 1.0, 1.0), 16, 1);
  MultiNodeOptions options;
  options.batch_size = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(MultiNodeBatchSource::Create(options, {&a}, 4).status()));
  options = MultiNodeOptions();
  options.node_timeout = absl::ZeroDuration();
  EXPECT_TRUE(absl::IsInvalidArgument(MultiNodeBatchSource::Create(options, {&a}, 4).status()));
  options = MultiNodeOptions();
  EXPECT_TRUE(absl::IsInvalidArgument(MultiNodeBatchSource::Create(options, {}, 4).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(MultiNodeBatchSource::Create(options, {nullptr}, 4).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseShardPolicy("nearest").status()));
  for (ShardPolicy p : {ShardPolicy::kExact, ShardPolicy::kFirstReady, ShardPolicy::kRoundRobin}) {
    EXPECT_EQ(*ParseShardPolicy(ShardPolicyName(p)), p);
  }
  options.batch_size = 16;
  auto source = MultiNodeBatchSource::Create(options, {&a}, kObservation);
  ASSERT_TRUE(source.ok());
  Batch batch;
  ASSERT_TRUE(*(*source)->Next(absl::Seconds(5), &batch.rows, &batch.weights, &batch.origins));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      (*source)->Next(absl::Seconds(5), &batch.rows, &batch.weights, &batch.origins).status()));
  const std::vector<float> short_answer(3, 1.0f);
  EXPECT_TRUE(absl::IsInvalidArgument((*source)->WritePriorities(short_answer)));
}

}  // namespace
}  // namespace dreplay::learner
