// Copyright dreplay authors.
//
// The sampler's forwarding modes (sampler.h, forward_queue.h): every
// transition staged at most once, and which ones first.

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "replay_server/ingest.h"
#include "replay_server/regions.h"
#include "replay_server/sampler.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

using protocol::ForwardMode;
using testing::Insert;
using testing::ReadStagingSlot;
using testing::SmallConfig;

constexpr uint64_t kEpoch = 3;

struct Staged {
  protocol::BatchHeader header;
  std::vector<protocol::BatchEntry> entries;
};

class ForwardSamplerTest : public ::testing::Test {
 protected:
  void Make(ForwardMode mode, uint64_t queue = 4096) {
    regions_ = ReplayRegions::Create(SmallConfig()).value();
    replay::ReplayMemoryOptions mo;
    mo.capacity = SmallConfig().capacity;
    mo.alpha = 1.0;
    mo.seed = 11;
    if (mode == ForwardMode::kForwardUniform) mo.mode = replay::SamplingMode::kUniform;
    memory_ = replay::ReplayMemory::Create(mo).value();
    auto* leases = static_cast<uint8_t*>(regions_->region(protocol::RegionKind::kLeases));
    ingest_ = std::make_unique<Ingest>(config(), IngestOptions{}, regions_->control(), leases,
                                       regions_->slots(), regions_->commits(), memory_.get(),
                                       &counters_, &clock_);
    ingest_->Restart({}, 0);
    SamplerOptions so;
    so.forward = mode;
    so.forward_queue = queue;
    ASSERT_TRUE(so.Validate().ok());
    sampler_ = std::make_unique<Sampler>(config(), so, regions_->control(), regions_->slots(),
                                         regions_->commits(), regions_->staging(), memory_.get(),
                                         &counters_, &clock_, leases);
    sampler_->Restart(kEpoch, 1);
  }

  const protocol::LayoutConfig& config() const { return regions_->config(); }

  void InsertAndIngest(int n, float priority = 1.f) {
    for (int k = 0; k < n; ++k) Insert(*regions_, priority);
    ASSERT_EQ(ingest_->Step(), static_cast<uint64_t>(n));
  }

  // Stages one batch and checks it as a learner would; releases it.
  bool StageAndTake(Staged* out) {
    if (!sampler_->StageOne()) return false;
    const uint64_t n = sampler_->next_batch() - 1;
    const std::vector<uint8_t> image = ReadStagingSlot(*regions_, n);
    EXPECT_TRUE(protocol::CheckStagedBatch(config(), image.data(), n, kEpoch).ok());
    std::memcpy(&out->header, image.data(), sizeof(out->header));
    EXPECT_EQ(out->header.payload_count, out->header.count);  // never a reference
    EXPECT_EQ(out->header.beta, 0.0f);                        // weights of 1
    out->entries.resize(out->header.count);
    std::memcpy(out->entries.data(), image.data() + protocol::StagingEntriesOffset(config()),
                out->entries.size() * sizeof(protocol::BatchEntry));
    for (uint32_t k = 0; k < out->header.count; ++k) {
      EXPECT_EQ(out->entries[k].priority_alpha, 1.0f);
      const uint8_t* copy =
          image.data() + protocol::StagingPayloadsOffset(config()) + k * config().slot_size;
      EXPECT_EQ(protocol::VerifySlot(copy, config().slot_size, out->entries[k].slot_sequence),
                protocol::SlotCheck::kOk);
    }
    sampler_->ReleaseOldest(/*learner_received=*/true);
    return true;
  }

  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<replay::ReplayMemory> memory_;
  ReplayCounters counters_;
  FakeClock clock_;
  std::unique_ptr<Ingest> ingest_;
  std::unique_ptr<Sampler> sampler_;
};

TEST(ForwardSamplerOptionsTest, ForwardingRefusesAServerSideRateLimit) {
  SamplerOptions so;
  so.forward = ForwardMode::kForwardPriority;
  so.rate_limiter.samples_per_insert = 4;
  so.rate_limiter.error_buffer = 64;
  EXPECT_EQ(so.Validate().code(), absl::StatusCode::kInvalidArgument);
  so.rate_limiter = replay::RateLimiterOptions{};
  so.forward_queue = 0;
  EXPECT_TRUE(so.Validate().ok()) << "the queue's bound is the FIFO forwarder's only";
  so.forward = ForwardMode::kForwardFifo;
  EXPECT_EQ(so.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ForwardSamplerTest, EveryModeStagesEachTransitionOnceAndOnlyFullBatches) {
  for (ForwardMode mode :
       {ForwardMode::kForwardPriority, ForwardMode::kForwardUniform, ForwardMode::kForwardFifo}) {
    SCOPED_TRACE(static_cast<int>(mode));
    Make(mode);
    sampler_->ResetLearnerCache(/*learner_cache=*/true);  // no references all the same
    InsertAndIngest(config().batch_size - 1);
    EXPECT_FALSE(sampler_->StageOne()) << "a batch waits until it is full";
    InsertAndIngest(4 * config().batch_size + 1);  // 5 batches in all
    std::set<uint64_t> seen;
    Staged staged;
    int batches = 0;
    while (StageAndTake(&staged)) {
      ++batches;
      EXPECT_EQ(staged.header.count, config().batch_size);
      for (const protocol::BatchEntry& e : staged.entries) {
        EXPECT_TRUE(seen.insert(e.slot_sequence).second) << "sequence " << e.slot_sequence;
        EXPECT_EQ(e.slot_index & protocol::kEntryCachedBit, 0u);
      }
    }
    EXPECT_EQ(batches, 5);
    EXPECT_EQ(seen.size(), 5u * config().batch_size);
    EXPECT_EQ(sampler_->forward_dropped(), 0u);
    // More arrive: only those are forwarded.
    InsertAndIngest(config().batch_size);
    ASSERT_TRUE(StageAndTake(&staged));
    for (const protocol::BatchEntry& e : staged.entries) {
      EXPECT_GE(e.slot_sequence, 5u * config().batch_size);
    }
  }
}

TEST_F(ForwardSamplerTest, PriorityForwardingSendsTheHighPrioritiesFirst) {
  Make(ForwardMode::kForwardPriority);
  // 24 at priority 1, then 8 at priority 1000 (alpha 1): the first batch
  // draws a low one with probability 24 / 8024 per entry.
  InsertAndIngest(24, 1.0f);
  InsertAndIngest(8, 1000.0f);
  Staged staged;
  ASSERT_TRUE(StageAndTake(&staged));
  for (const protocol::BatchEntry& e : staged.entries) EXPECT_GE(e.slot_sequence, 24u);
}

TEST_F(ForwardSamplerTest, FifoForwardsOldestFirstAndDropsBeyondItsQueue) {
  Make(ForwardMode::kForwardFifo, /*queue=*/16);
  InsertAndIngest(20);
  Staged staged;
  ASSERT_TRUE(StageAndTake(&staged));
  // The 4 oldest were dropped: the queue keeps the newest 16.
  EXPECT_EQ(sampler_->forward_dropped(), 4u);
  for (uint32_t k = 0; k < staged.header.count; ++k) {
    EXPECT_EQ(staged.entries[k].slot_sequence, 4u + k);
  }
  ASSERT_TRUE(StageAndTake(&staged));
  EXPECT_EQ(staged.entries[0].slot_sequence, 12u);
  EXPECT_FALSE(sampler_->StageOne());
}

TEST_F(ForwardSamplerTest, FifoSkipsWhatWasOverwrittenBeforeItsTurn) {
  const uint64_t capacity = SmallConfig().capacity;
  Make(ForwardMode::kForwardFifo, /*queue=*/2 * capacity);
  // The staging ring holds 2 batches: without releases, the queue grows
  // past the ring and the oldest queued slots are overwritten.
  InsertAndIngest(static_cast<int>(capacity));
  ASSERT_TRUE(sampler_->StageOne());
  ASSERT_TRUE(sampler_->StageOne());
  InsertAndIngest(static_cast<int>(capacity / 2));  // overwrites sequences 0 .. capacity/2 - 1
  sampler_->ReleaseOldest(true);
  sampler_->ReleaseOldest(true);
  Staged staged;
  ASSERT_TRUE(StageAndTake(&staged));
  // Sequences 16 .. 31 were queued, now overwritten: skipped and counted.
  EXPECT_EQ(staged.entries[0].slot_sequence, capacity / 2);
  EXPECT_EQ(sampler_->forward_dropped(), capacity / 2 - 2 * config().batch_size);
}

// Crossing percentiles (crossing_percentiles.h): one batch per period is
// ranked against what the memory held before it, in every mode.
TEST_F(ForwardSamplerTest, CrossingPercentilesRankWhatWasForwarded) {
  Make(ForwardMode::kForwardPriority);
  InsertAndIngest(24, 1.0f);
  InsertAndIngest(8, 1000.0f);
  Staged staged;
  ASSERT_TRUE(StageAndTake(&staged));
  // The 8 at 1000 crossed, each ranked among the 32 held: (24 + 8 / 2) / 32.
  EXPECT_EQ(sampler_->crossing().count(), 8u);
  EXPECT_DOUBLE_EQ(sampler_->crossing().sum(), 8 * 87.5);
  InsertAndIngest(8, 1.0f);
  ASSERT_TRUE(StageAndTake(&staged));
  EXPECT_EQ(sampler_->crossing().count(), 8u) << "within the period: not measured";
  clock_.Advance(absl::Milliseconds(50));
  ASSERT_TRUE(StageAndTake(&staged));
  EXPECT_EQ(sampler_->crossing().count(), 16u);

  // FIFO: the oldest cross whatever their priority. Priorities 1 .. 16 in
  // arrival order; the first batch takes 1 .. 8: (k - 0.5) / 16 on average
  // 25.
  Make(ForwardMode::kForwardFifo);
  for (int k = 1; k <= 16; ++k) InsertAndIngest(1, static_cast<float>(k));
  ASSERT_TRUE(StageAndTake(&staged));
  EXPECT_EQ(sampler_->crossing().count(), 8u);
  EXPECT_DOUBLE_EQ(sampler_->crossing().sum() / 8, 25.0);
}

}  // namespace
}  // namespace dreplay::server
