// Copyright dreplay authors.
//
// The samples-per-insert rate limiter in the replay core: the ratio it holds,
// inserts it blocks, the policy it publishes and its counters.

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/time/time.h"
#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "replay_server/regions.h"
#include "replay_server/replay_core.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

using testing::Insert;
using testing::SmallConfig;
using testing::WriteUpdate;

// Most steps a phase of a test may take before it fails (no sleeps: the core
// is stepped directly).
constexpr int kMaxSteps = 10000;

class ReplayRatioTest : public ::testing::Test {
 protected:
  void Start(const replay::RateLimiterOptions& limiter,
             const protocol::LayoutConfig& config = SmallConfig()) {
    regions_ = ReplayRegions::Create(config).value();
    ReplayCoreOptions options;
    options.memory.seed = 5;
    options.sampler.rate_limiter = limiter;
    auto core = ReplayCore::Create(regions_.get(), options, &clock_);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(core).value();
  }
  // An eager learner: answers every staged batch at once (no records).
  void AnswerAll() {
    for (; answered_ < core_->sampler().next_batch(); ++answered_) {
      WriteUpdate(*regions_, answered_, core_->epoch(), {});
    }
  }
  // Steps, answering, until a step does no work.
  void StepUntilIdle() {
    for (int i = 0; i < kMaxSteps; ++i) {
      AnswerAll();
      if (!core_->Step().did_work()) return;
    }
    FAIL() << "the core never went idle";
  }
  double Budget(const replay::RateLimiterOptions& o) const {
    return o.samples_per_insert *
           (static_cast<double>(core_->counters().inserted) - o.min_size_to_sample);
  }

  FakeClock clock_;
  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<ReplayCore> core_;
  uint64_t answered_ = 0;
};

TEST_F(ReplayRatioTest, PublishesThePolicyInTheControlBlock) {
  replay::RateLimiterOptions o;
  o.samples_per_insert = 3.5;
  o.min_size_to_sample = 16;
  o.error_buffer = 40;
  o.block_inserts = true;
  Start(o);
  const protocol::PolicyLine& p = regions_->control()->policy;
  EXPECT_EQ(p.samples_per_insert, 3.5);
  EXPECT_EQ(p.spi_error_buffer, 40);
  EXPECT_EQ(p.min_size_to_sample, 16u);
  EXPECT_EQ(p.spi_block_actors, 1u);
}

TEST_F(ReplayRatioTest, RejectsAnErrorBufferSmallerThanABatch) {
  regions_ = ReplayRegions::Create(SmallConfig()).value();
  ReplayCoreOptions options;
  options.sampler.rate_limiter.samples_per_insert = 1;
  options.sampler.rate_limiter.error_buffer = SmallConfig().batch_size - 1;
  EXPECT_EQ(ReplayCore::Create(regions_.get(), options, &clock_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ReplayRatioTest, HoldsSampledWithinTheErrorBufferOfTheBudgetOverALongRun) {
  replay::RateLimiterOptions o;
  o.samples_per_insert = 2;
  o.min_size_to_sample = 16;
  o.error_buffer = 24;
  Start(o);
  std::mt19937 random(7);
  std::uniform_int_distribution<int> burst(1, 5);
  for (int round = 0; round < 3000; ++round) {
    for (int k = burst(random); k > 0; --k) Insert(*regions_, 1.f);
    StepUntilIdle();
    const ReplayCounters& c = core_->counters();
    ASSERT_EQ(c.inserted, LoadAcquire(&regions_->lease_line(0)->ingest_cursor));
    if (c.inserted < o.min_size_to_sample) {
      ASSERT_EQ(c.sampled, 0u);
      continue;
    }
    // Never ahead by more than the buffer; an eager learner keeps it from
    // falling behind by more than the buffer too.
    ASSERT_LE(static_cast<double>(c.sampled), Budget(o) + o.error_buffer) << "round " << round;
    ASSERT_GE(static_cast<double>(c.sampled), Budget(o) - o.error_buffer) << "round " << round;
  }
  const ReplayCounters& c = core_->counters();
  EXPECT_NEAR(static_cast<double>(c.sampled) / c.inserted, o.samples_per_insert, 0.05);
  EXPECT_GT(c.limiter_sample_waits, 0u);
  EXPECT_EQ(core_->sampler().limiter().sampled(), c.sampled);
  core_->PublishStats();  // an idle step (a limiter wait alone) does not
  EXPECT_EQ(LoadAcquire(&regions_->stats()->limiter_sample_waits), c.limiter_sample_waits);
}

TEST_F(ReplayRatioTest, CountsTheTimeABatchWaitedForInserts) {
  replay::RateLimiterOptions o;
  o.samples_per_insert = 1;
  o.min_size_to_sample = 8;
  o.error_buffer = 8;
  Start(o);
  for (int k = 0; k < 8; ++k) Insert(*regions_, 1.f);
  StepUntilIdle();
  EXPECT_EQ(core_->counters().sampled, 8u);  // budget 0 + buffer 8
  EXPECT_EQ(core_->counters().limiter_sample_wait_ns, 0u);
  core_->Step();  // the sampler is held back by the limiter from here on
  clock_.Advance(absl::Milliseconds(3));
  for (int k = 0; k < 8; ++k) Insert(*regions_, 1.f);
  StepUntilIdle();
  EXPECT_EQ(core_->counters().sampled, 16u);
  EXPECT_GE(core_->counters().limiter_sample_wait_ns, 3'000'000u);
}

TEST_F(ReplayRatioTest, BlockedInsertsStopIngestUntilSamplingCatchesUp) {
  replay::RateLimiterOptions o;
  o.samples_per_insert = 1;
  o.min_size_to_sample = 8;
  o.error_buffer = 8;
  o.block_inserts = true;
  Start(o);
  // The learner stays away: two batches (16 transitions) fill the staging
  // ring, so inserts may run only to 8 + 16 + 8 = 32 before they block.
  constexpr int kChunk = 4;
  for (int round = 0; round < 12; ++round) {
    for (int k = 0; k < kChunk; ++k) Insert(*regions_, 1.f);
    for (int i = 0; i < 4; ++i) core_->Step();
  }
  const uint64_t tail = 12 * kChunk;  // inserted by the actor
  EXPECT_EQ(core_->counters().sampled, 16u);
  EXPECT_GT(core_->counters().inserted, 32u);
  EXPECT_LE(core_->counters().inserted, 32u + kChunk);
  EXPECT_LT(core_->ingest_cursor(), tail);
  EXPECT_TRUE(core_->sampler().InsertsBlocked());
  const uint64_t cursor = core_->ingest_cursor();
  clock_.Advance(absl::Milliseconds(5));
  core_->Step();
  EXPECT_EQ(core_->ingest_cursor(), cursor);
  EXPECT_GE(core_->counters().limiter_insert_wait_ns, 5'000'000u);

  // The learner catches up: ingest resumes and takes every transition.
  for (int i = 0; i < kMaxSteps && core_->ingest_cursor() < tail; ++i) {
    AnswerAll();
    core_->Step();
  }
  EXPECT_EQ(core_->ingest_cursor(), tail);
  EXPECT_EQ(core_->counters().inserted, tail);
  EXPECT_EQ(LoadAcquire(&regions_->stats()->limiter_insert_wait_ns),
            core_->counters().limiter_insert_wait_ns);
}

TEST_F(ReplayRatioTest, EvictionsBelowTheMinimumSizeNeverWedgeBlockedInserts) {
  // The minimum size is most of the ring and the actor window is half of it:
  // an actor writing a window ahead overwrites (so evicts) more than the
  // memory can spare. Blocked inserts must not wait for a sampler that waits
  // for inserts.
  protocol::LayoutConfig config = SmallConfig();  // capacity 64, batch 8
  config.actor_window = 32;
  replay::RateLimiterOptions o;
  o.samples_per_insert = 1;
  o.min_size_to_sample = 56;
  o.error_buffer = 8;
  o.block_inserts = true;
  Start(o, config);
  for (int k = 0; k < 56; ++k) Insert(*regions_, 1.f);
  StepUntilIdle();
  ASSERT_EQ(core_->counters().sampled, 8u);  // budget 0 + buffer 8
  // The actor writes its whole window, 56..87 (64..87 overwrite 0..23, which
  // ingest evicts as soon as it sees them written), and commits it a few
  // transitions at a time.
  const uint64_t first = testing::Reserve(*regions_, 32);
  ASSERT_EQ(first, 56u);
  for (uint64_t s = first; s < first + 32; ++s) testing::WriteSlot(*regions_, s, 1.f, 128);
  for (uint64_t s = first; s < first + 32; ++s) {
    testing::Commit(*regions_, s);
    if (s % 4 == 3) StepUntilIdle();
  }
  for (int i = 0; i < kMaxSteps && core_->ingest_cursor() < first + 32; ++i) {
    AnswerAll();
    core_->Step();
  }
  EXPECT_EQ(core_->ingest_cursor(), first + 32)
      << "ingest wedged: inserted " << core_->counters().inserted << ", sampled "
      << core_->counters().sampled;
  StepUntilIdle();
  // Sampling resumed once the memory was back to the minimum size, and the
  // limiter holds the ratio from there.
  EXPECT_EQ(core_->counters().inserted, 88u);
  EXPECT_EQ(core_->counters().sampled, 40u);  // budget 88 - 56 = 32, + buffer 8
}

TEST_F(ReplayRatioTest, WithoutALimitOnlyTheMinimumSizeHoldsSamplingBack) {
  replay::RateLimiterOptions o;
  o.min_size_to_sample = 8;
  Start(o);
  for (int k = 0; k < 7; ++k) Insert(*regions_, 1.f);
  StepUntilIdle();
  EXPECT_EQ(core_->counters().sampled, 0u);
  Insert(*regions_, 1.f);
  for (int i = 0; i < 50; ++i) {
    AnswerAll();
    core_->Step();
  }
  EXPECT_GE(core_->counters().sampled, 50u * SmallConfig().batch_size);
  EXPECT_EQ(core_->counters().limiter_sample_waits, 0u);
}

}  // namespace
}  // namespace dreplay::server
