// Copyright dreplay authors.

#include "replay/replay_memory.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay::replay {
namespace {

std::unique_ptr<ReplayMemory> MakeMemory(uint64_t capacity, double alpha, double epsilon,
                                         SamplingMode mode = SamplingMode::kPrioritized,
                                         uint64_t seed = 1) {
  ReplayMemoryOptions options;
  options.capacity = capacity;
  options.alpha = alpha;
  options.priority_epsilon = epsilon;
  options.mode = mode;
  options.seed = seed;
  auto memory = ReplayMemory::Create(options);
  EXPECT_TRUE(memory.ok()) << memory.status();
  return std::move(memory).value();
}

TEST(ReplayMemoryOptionsTest, RejectsBadValuesByName) {
  ReplayMemoryOptions options;
  options.capacity = 12;
  EXPECT_NE(options.Validate().message().find("capacity=12"), std::string::npos);
  options.capacity = 16;
  options.alpha = 1.5;
  EXPECT_NE(options.Validate().message().find("alpha=1.5"), std::string::npos);
  options.alpha = 0.6;
  options.priority_epsilon = 0;
  EXPECT_NE(options.Validate().message().find("priority_epsilon=0"), std::string::npos);
  options.priority_epsilon = 1e-6;
  EXPECT_TRUE(options.Validate().ok());
  EXPECT_FALSE(ReplayMemory::Create(ReplayMemoryOptions{}).ok());
}

TEST(ReplayMemoryTest, InsertEvictsWhatTheIndexHeld) {
  auto m = MakeMemory(4, 1.0, 0.5);
  m->Insert(1, 10, 1.5f);
  EXPECT_EQ(m->size(), 1u);
  EXPECT_EQ(m->sequence(1), 10u);
  EXPECT_DOUBLE_EQ(m->stored_priority(1), 2.0);
  m->Insert(1, 14, 0.5f);  // the ring came round: sequence 14 replaces 10
  EXPECT_EQ(m->size(), 1u);
  EXPECT_EQ(m->sequence(1), 14u);
  EXPECT_DOUBLE_EQ(m->total_priority(), 1.0);
  m->Remove(1);
  EXPECT_EQ(m->size(), 0u);
  EXPECT_FALSE(m->valid(1));
  EXPECT_EQ(m->total_priority(), 0.0);
  m->Remove(1);  // removing twice is harmless
  EXPECT_EQ(m->size(), 0u);
}

TEST(ReplayMemoryTest, InsertWithoutAnEstimateGetsTheCurrentMaximum) {
  auto m = MakeMemory(8, 1.0, 0.5);
  m->Insert(0, 0, 0.0f);  // empty: initial_max_priority
  EXPECT_DOUBLE_EQ(m->stored_priority(0), 1.0);
  m->Insert(1, 1, 6.5f);  // stored 7
  m->Insert(2, 2, -1.0f);
  EXPECT_DOUBLE_EQ(m->stored_priority(2), 7.0);
  m->Insert(3, 3, std::nanf(""));
  EXPECT_DOUBLE_EQ(m->stored_priority(3), 7.0);
  EXPECT_DOUBLE_EQ(m->max_priority(), 7.0);
}

// Records the observer calls with the entry the index held at the time.
class EntryLog : public ReplayMemoryObserver {
 public:
  explicit EntryLog(const ReplayMemory* memory) : memory_(memory) {}
  void BeforeEntryChange(uint64_t index) override {
    calls.push_back({index, memory_->sequence(index), memory_->stored_priority(index)});
  }
  struct Call {
    uint64_t index, sequence;
    double value;
    bool operator==(const Call& o) const {
      return index == o.index && sequence == o.sequence && value == o.value;
    }
  };
  std::vector<Call> calls;

 private:
  const ReplayMemory* memory_;
};

TEST(ReplayMemoryTest, RunsGiveExactlyWhatSingleInsertsAndRemovesGive) {
  constexpr uint64_t kCapacity = 256;
  auto single = MakeMemory(kCapacity, 0.6, 1e-6);
  auto run = MakeMemory(kCapacity, 0.6, 1e-6);
  EntryLog single_log(single.get()), run_log(run.get());
  single->set_observer(&single_log);
  run->set_observer(&run_log);
  std::mt19937_64 rng(3);
  uint64_t sequence = 0;
  for (int round = 0; round < 400; ++round) {
    const uint64_t first = rng() % kCapacity;
    const uint64_t count = rng() % (kCapacity - first + 1);
    if (rng() % 4 == 0) {
      for (uint64_t k = 0; k < count; ++k) single->Remove(first + k);
      run->RemoveRun(first, count);
    } else {
      // Missing estimates (0, negative, NaN) read the max mid-run.
      std::vector<float> priorities(count);
      for (float& p : priorities) {
        const uint64_t kind = rng() % 8;
        p = kind == 0   ? 0.0f
            : kind == 1 ? -1.0f
            : kind == 2 ? std::nanf("")
                        : static_cast<float>(rng() % 1000) / 7;
      }
      for (uint64_t k = 0; k < count; ++k) single->Insert(first + k, sequence + k, priorities[k]);
      run->InsertRun(first, sequence, priorities);
      sequence += count;
    }
    ASSERT_EQ(run->size(), single->size()) << round;
    ASSERT_EQ(run->total_priority(), single->total_priority()) << round;
    ASSERT_EQ(run->max_priority(), single->max_priority()) << round;
  }
  for (uint64_t i = 0; i < kCapacity; ++i) {
    ASSERT_EQ(run->sequence(i), single->sequence(i)) << i;
    ASSERT_EQ(run->stored_priority(i), single->stored_priority(i)) << i;
    const float a = run->rank_key(i), b = single->rank_key(i);
    ASSERT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << i;
  }
  EXPECT_TRUE(run_log.calls == single_log.calls);
  EXPECT_GT(run_log.calls.size(), 1000u);
  std::vector<SampledItem> a(64), b(64);
  ASSERT_EQ(single->SampleBatch(64, 0.4, absl::MakeSpan(a)), 64);
  ASSERT_EQ(run->SampleBatch(64, 0.4, absl::MakeSpan(b)), 64);
  for (int k = 0; k < 64; ++k) EXPECT_EQ(a[k].index, b[k].index) << k;
}

TEST(ReplayMemoryTest, StaleAndInvalidPriorityUpdatesAreNotApplied) {
  auto m = MakeMemory(4, 1.0, 0.5);
  m->Insert(2, 6, 1.5f);
  EXPECT_EQ(m->UpdatePriority(2, 6, 3.5f), ReplayMemory::UpdateResult::kApplied);
  EXPECT_DOUBLE_EQ(m->stored_priority(2), 4.0);
  m->Insert(2, 10, 1.5f);  // overwritten by a later sequence
  EXPECT_EQ(m->UpdatePriority(2, 6, 100.f), ReplayMemory::UpdateResult::kStale);
  EXPECT_DOUBLE_EQ(m->stored_priority(2), 2.0);
  EXPECT_EQ(m->UpdatePriority(3, 7, 1.f), ReplayMemory::UpdateResult::kStale);  // empty
  EXPECT_EQ(m->UpdatePriority(4, 10, 1.f), ReplayMemory::UpdateResult::kInvalid);
  EXPECT_EQ(m->UpdatePriority(2, 10, -1.f), ReplayMemory::UpdateResult::kInvalid);
  EXPECT_EQ(m->UpdatePriority(2, 10, INFINITY), ReplayMemory::UpdateResult::kInvalid);
  EXPECT_EQ(m->UpdatePriority(2, 10, std::nanf("")), ReplayMemory::UpdateResult::kInvalid);
  EXPECT_EQ(m->UpdatePriority(2, 10, 0.f), ReplayMemory::UpdateResult::kApplied);
  EXPECT_DOUBLE_EQ(m->stored_priority(2), 0.5);  // epsilon keeps it drawable
}

TEST(ReplayMemoryTest, StoredValueIsPriorityPlusEpsilonToTheAlpha) {
  auto m = MakeMemory(4, 0.5, 0.25);
  EXPECT_DOUBLE_EQ(m->StoredValue(3.75f), 2.0);
  EXPECT_DOUBLE_EQ(m->StoredValue(0.0f), 0.5);
  auto uniform = MakeMemory(4, 0.6, 1e-6, SamplingMode::kUniform);
  EXPECT_DOUBLE_EQ(uniform->StoredValue(123.f), 1.0);
}

TEST(ReplayMemoryTest, StratifiedBatchGivesHandComputedIndicesAndWeights) {
  // alpha = 1, epsilon = 0.5: stored values 1, 2, 4, 2 (total 9). With 9
  // strata each stratum [j, j + 1) lies inside one leaf's range, so the
  // draws are determined whatever the random numbers.
  auto m = MakeMemory(4, 1.0, 0.5);
  m->Insert(0, 100, 0.5f);
  m->Insert(1, 101, 1.5f);
  m->Insert(2, 102, 3.5f);
  m->Insert(3, 103, 1.5f);
  std::vector<SampledItem> items(9);
  ASSERT_EQ(m->SampleBatch(9, 0.5, absl::MakeSpan(items)), 9);
  const uint64_t expected_index[9] = {0, 1, 1, 2, 2, 2, 2, 3, 3};
  // w = (N P)^-beta / max: N = 4, P = v / 9, beta = 0.5.
  // (4/9)^-0.5 = 1.5 (the max), (8/9)^-0.5 = 1.0606602, (16/9)^-0.5 = 0.75.
  const double w_max = std::pow(4.0 * 1 / 9, -0.5);  // 1.5, index 0
  const double expected_weight[4] = {1.0, std::pow(4.0 * 2 / 9, -0.5) / w_max,
                                     std::pow(4.0 * 4 / 9, -0.5) / w_max,
                                     std::pow(4.0 * 2 / 9, -0.5) / w_max};
  for (int j = 0; j < 9; ++j) {
    const uint64_t i = expected_index[j];
    EXPECT_EQ(items[j].index, i) << "stratum " << j;
    EXPECT_EQ(items[j].sequence, 100 + i);
    EXPECT_DOUBLE_EQ(items[j].probability, m->stored_priority(i) / 9.0);
    EXPECT_EQ(items[j].priority_alpha, m->stored_priority(i));
    EXPECT_FLOAT_EQ(items[j].weight, static_cast<float>(expected_weight[i])) << "stratum " << j;
  }
  EXPECT_FLOAT_EQ(static_cast<float>(expected_weight[1]), 0.70710677f);
  EXPECT_FLOAT_EQ(static_cast<float>(expected_weight[2]), 0.5f);
  // beta = 0: all weights 1; beta = 1: w = P_min / P.
  ASSERT_EQ(m->SampleBatch(9, 0.0, absl::MakeSpan(items)), 9);
  for (const SampledItem& item : items) EXPECT_EQ(item.weight, 1.0f);
  ASSERT_EQ(m->SampleBatch(9, 1.0, absl::MakeSpan(items)), 9);
  EXPECT_FLOAT_EQ(items[3].weight, 0.25f);
  EXPECT_FLOAT_EQ(items[1].weight, 0.5f);
}

TEST(ReplayMemoryTest, SampleOneGivesThePriorityAlphaOfItsDraw) {
  // alpha = 1, epsilon = 0.5: stored values 1 and 4 (total 5).
  auto m = MakeMemory(2, 1.0, 0.5);
  m->Insert(0, 100, 0.5f);
  m->Insert(1, 101, 3.5f);
  const SampledItem first = m->SampleOne(0, 5);   // [0, 1): index 0
  const SampledItem second = m->SampleOne(4, 5);  // [4, 5): index 1
  EXPECT_EQ(first.index, 0u);
  EXPECT_DOUBLE_EQ(first.priority_alpha, 1.0);
  EXPECT_DOUBLE_EQ(second.priority_alpha, 4.0);
  EXPECT_DOUBLE_EQ(second.probability, second.priority_alpha / 5.0);
}

TEST(ReplayMemoryTest, SamplesInProportionToStoredPriorities) {
  auto m = MakeMemory(16, 1.0, 1e-9, SamplingMode::kPrioritized, 99);
  std::vector<double> stored(16, 0.0);
  double total = 0;
  for (uint64_t i = 0; i < 16; i += 2) {  // odd indices stay empty
    m->Insert(i, i, static_cast<float>(i + 1));
    stored[i] = m->stored_priority(i);
    total += stored[i];
  }
  std::vector<int> counts(16, 0);
  std::vector<SampledItem> items(32);
  constexpr int kBatches = 20000;
  for (int b = 0; b < kBatches; ++b) {
    ASSERT_EQ(m->SampleBatch(32, 0.4, absl::MakeSpan(items)), 32);
    for (const SampledItem& item : items) ++counts[item.index];
  }
  const double draws = 32.0 * kBatches;
  double chi_square = 0;
  for (int i = 0; i < 16; ++i) {
    if (stored[i] == 0) {
      EXPECT_EQ(counts[i], 0);
      continue;
    }
    const double expected = draws * stored[i] / total;
    chi_square += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  // 7 degrees of freedom; stratification only lowers the variance.
  // P(chi^2 > 45) < 1e-7 for a correct sampler.
  EXPECT_LT(chi_square, 45.0);
}

TEST(ReplayMemoryTest, UniformModeDrawsValidIndicesWithUnitWeights) {
  auto m = MakeMemory(8, 0.6, 1e-6, SamplingMode::kUniform, 3);
  m->Insert(1, 1, 100.f);
  m->Insert(4, 4, 0.001f);
  m->Insert(6, 6, 5.f);
  EXPECT_EQ(m->UpdatePriority(6, 6, 1000.f), ReplayMemory::UpdateResult::kApplied);
  std::vector<int> counts(8, 0);
  std::vector<SampledItem> items(3);
  for (int b = 0; b < 30000; ++b) {
    ASSERT_EQ(m->SampleBatch(3, 1.0, absl::MakeSpan(items)), 3);
    for (const SampledItem& item : items) {
      EXPECT_EQ(item.weight, 1.0f);
      ++counts[item.index];
    }
  }
  // Three strata over three equal leaves: each draw is exactly one leaf.
  EXPECT_EQ(counts[1], 30000);
  EXPECT_EQ(counts[4], 30000);
  EXPECT_EQ(counts[6], 30000);
}

TEST(ReplayMemoryTest, RemovedIndicesAreNeverDrawn) {
  auto m = MakeMemory(8, 0.6, 1e-6);
  for (uint64_t i = 0; i < 8; ++i) m->Insert(i, i, 1.f);
  for (uint64_t i = 0; i < 8; i += 2) m->Remove(i);
  std::vector<SampledItem> items(16);
  for (int b = 0; b < 1000; ++b) {
    ASSERT_EQ(m->SampleBatch(16, 0.4, absl::MakeSpan(items)), 16);
    for (const SampledItem& item : items) EXPECT_EQ(item.index % 2, 1u);
  }
  m->Clear();
  EXPECT_EQ(m->SampleBatch(16, 0.4, absl::MakeSpan(items)), 0);
}

TEST(ReplayMemoryTest, SameSeedGivesTheSameDraws) {
  auto a = MakeMemory(64, 0.6, 1e-6, SamplingMode::kPrioritized, 42);
  auto b = MakeMemory(64, 0.6, 1e-6, SamplingMode::kPrioritized, 42);
  for (uint64_t i = 0; i < 64; ++i) {
    a->Insert(i, i, static_cast<float>(i % 7));
    b->Insert(i, i, static_cast<float>(i % 7));
  }
  std::vector<SampledItem> x(32), y(32);
  for (int k = 0; k < 10; ++k) {
    a->SampleBatch(32, 0.5, absl::MakeSpan(x));
    b->SampleBatch(32, 0.5, absl::MakeSpan(y));
    for (int j = 0; j < 32; ++j) EXPECT_EQ(x[j].index, y[j].index);
  }
}

TEST(ReplayMemoryTest, RestoreLoadsValuesAndRejectsInconsistentOnes) {
  auto m = MakeMemory(4, 1.0, 0.5);
  const std::vector<double> values = {1.0, 0.0, 3.0, 0.5};
  const std::vector<uint64_t> sequences = {8, ReplayMemory::kNoSequence, 6, 3};
  ASSERT_TRUE(m->Restore(values, sequences).ok());
  EXPECT_EQ(m->size(), 3u);
  EXPECT_DOUBLE_EQ(m->total_priority(), 4.5);
  EXPECT_EQ(m->sequence(2), 6u);
  const std::vector<double> bad = {1.0, 2.0, 3.0, 0.5};  // index 1 empty but valued
  EXPECT_EQ(m->Restore(bad, sequences).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->size(), 0u);
  EXPECT_FALSE(m->Restore(values, absl::MakeSpan(sequences).first(3)).ok());
}

TEST(ReplayMemoryTest, RankKeysFollowRawPrioritiesInBothModes) {
  for (const SamplingMode mode : {SamplingMode::kPrioritized, SamplingMode::kUniform}) {
    auto m = MakeMemory(4, 0.6, 1e-6, mode);
    EXPECT_TRUE(std::isnan(m->rank_key(0)));
    m->Insert(0, 1, 2.5f);
    m->Insert(1, 2, std::nanf(""));  // no estimate: ranks with the highest
    m->Insert(2, 3, 0.0f);
    const std::vector<float> run = {0.25f, 7.0f};
    m->InsertRun(2, 10, run);  // replaces index 2's entry
    EXPECT_EQ(m->rank_key(0), 2.5f);
    EXPECT_TRUE(std::isinf(m->rank_key(1)));
    EXPECT_EQ(m->rank_key(2), 0.25f);
    EXPECT_EQ(m->rank_key(3), 7.0f);
    ASSERT_EQ(m->UpdatePriority(3, 11, 0.0f), ReplayMemory::UpdateResult::kApplied);
    EXPECT_EQ(m->rank_key(3), 0.0f);  // an update of 0 is an estimate
    EXPECT_EQ(m->UpdatePriority(0, 99, 5.0f), ReplayMemory::UpdateResult::kStale);
    EXPECT_EQ(m->rank_key(0), 2.5f);
    m->Remove(0);
    m->RemoveRun(1, 2);
    for (uint64_t i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(m->rank_key(i))) << i;
    EXPECT_EQ(m->rank_keys().size(), 4u);
    m->Clear();
    EXPECT_TRUE(std::isnan(m->rank_key(3)));
  }
  // A restore keeps stored values, not raw priorities: no key until set.
  auto m = MakeMemory(2, 1.0, 0.5);
  m->Insert(0, 1, 3.0f);
  ASSERT_TRUE(m->Restore(std::vector<double>{1.0, 2.0}, std::vector<uint64_t>{4, 5}).ok());
  EXPECT_TRUE(std::isnan(m->rank_key(0)));
  EXPECT_TRUE(std::isnan(m->rank_key(1)));
}

TEST(BetaScheduleTest, AnnealsLinearlyThenHolds) {
  BetaSchedule beta{0.4, 1.0, 100};
  EXPECT_TRUE(beta.Validate().ok());
  EXPECT_DOUBLE_EQ(beta.At(0), 0.4);
  EXPECT_DOUBLE_EQ(beta.At(50), 0.7);
  EXPECT_DOUBLE_EQ(beta.At(100), 1.0);
  EXPECT_DOUBLE_EQ(beta.At(1000), 1.0);
  EXPECT_DOUBLE_EQ((BetaSchedule{0.4, 1.0, 0}).At(0), 1.0);
  EXPECT_FALSE((BetaSchedule{-0.1, 1.0, 10}).Validate().ok());
}

}  // namespace
}  // namespace dreplay::replay
