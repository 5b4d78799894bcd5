// Copyright dreplay authors.

#include "replay_server/sampler.h"

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/frame_codec.h"
#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "replay_server/ingest.h"
#include "replay_server/regions.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

using testing::Commit;
using testing::Insert;
using testing::ReadStagingSlot;
using testing::Reserve;
using testing::SmallConfig;
using testing::WriteSlot;

constexpr uint64_t kEpoch = 7;
constexpr uint64_t kIncarnation = 0xfeed;

class SamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    regions_ = ReplayRegions::Create(SmallConfig()).value();
    replay::ReplayMemoryOptions mo;
    mo.capacity = SmallConfig().capacity;
    mo.alpha = 1.0;
    mo.priority_epsilon = 0.5;
    mo.seed = 5;
    memory_ = replay::ReplayMemory::Create(mo).value();
    ingest_ = std::make_unique<Ingest>(
        config(), IngestOptions{}, regions_->control(),
        static_cast<uint8_t*>(regions_->region(protocol::RegionKind::kLeases)), regions_->slots(),
        regions_->commits(), memory_.get(), &counters_, &clock_);
    SamplerOptions so;
    so.beta = replay::BetaSchedule{0.5, 0.5, 0};
    so.rate_limiter.min_size_to_sample = 4;
    sampler_ = std::make_unique<Sampler>(config(), so, regions_->control(), regions_->slots(),
                                         regions_->commits(), regions_->staging(), memory_.get(),
                                         &counters_, &clock_);
    sampler_->Restart(kEpoch, kIncarnation);
  }

  const protocol::LayoutConfig& config() const { return regions_->config(); }

  // The first `count` entries of a staging slot image.
  std::vector<protocol::BatchEntry> EntriesOf(const std::vector<uint8_t>& image,
                                              uint32_t count) const {
    std::vector<protocol::BatchEntry> entries(count);
    std::memcpy(entries.data(), image.data() + protocol::StagingEntriesOffset(config()),
                count * sizeof(protocol::BatchEntry));
    return entries;
  }

  void InsertAndIngest(int n, float priority = 1.f) {
    for (int k = 0; k < n; ++k) Insert(*regions_, priority);
    ASSERT_EQ(ingest_->Step(), static_cast<uint64_t>(n));
  }

  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<replay::ReplayMemory> memory_;
  ReplayCounters counters_;
  FakeClock clock_;
  std::unique_ptr<Ingest> ingest_;
  std::unique_ptr<Sampler> sampler_;
};

TEST_F(SamplerTest, WaitsUntilTheMemoryHoldsMinSizeToSample) {
  InsertAndIngest(3);
  EXPECT_FALSE(sampler_->StageOne());
  InsertAndIngest(1);
  EXPECT_TRUE(sampler_->StageOne());
}

TEST_F(SamplerTest, StagesAWholeVerifiableBatchWithCopiesOfTheSampledSlots) {
  InsertAndIngest(20);
  ASSERT_TRUE(sampler_->StageOne());
  EXPECT_EQ(sampler_->next_batch(), 1u);
  EXPECT_EQ(LoadAcquire(&regions_->control()->server.batches_staged), 1u);
  EXPECT_EQ(LoadAcquire(&regions_->control()->server.epoch), kEpoch);
  EXPECT_EQ(LoadAcquire(&regions_->control()->server.incarnation), kIncarnation);
  const std::vector<uint8_t> image = ReadStagingSlot(*regions_, 0);
  ASSERT_TRUE(protocol::CheckStagedBatch(config(), image.data(), 0, kEpoch).ok());
  protocol::BatchHeader header;
  std::memcpy(&header, image.data(), sizeof(header));
  EXPECT_EQ(header.incarnation, kIncarnation);
  EXPECT_EQ(header.count, config().batch_size);
  EXPECT_EQ(header.size, 20u);
  EXPECT_FLOAT_EQ(header.beta, 0.5f);
  EXPECT_EQ(counters_.sampled, config().batch_size);
  EXPECT_EQ(counters_.batches_staged, 1u);
  for (uint32_t k = 0; k < header.count; ++k) {
    protocol::BatchEntry entry;
    std::memcpy(
        &entry,
        image.data() + protocol::StagingEntriesOffset(config()) + k * sizeof(protocol::BatchEntry),
        sizeof(entry));
    EXPECT_EQ(memory_->sequence(entry.slot_index), entry.slot_sequence);
    EXPECT_EQ(entry.priority_alpha, static_cast<float>(memory_->stored_priority(entry.slot_index)));
    const uint8_t* copy =
        image.data() + protocol::StagingPayloadsOffset(config()) + k * config().slot_size;
    EXPECT_EQ(std::memcmp(copy, regions_->slot(entry.slot_index), config().slot_size), 0);
    EXPECT_EQ(protocol::VerifySlot(copy, config().slot_size, entry.slot_sequence),
              protocol::SlotCheck::kOk);
  }
  // The learner sees nothing for batch 1 yet, nor batch 0 of another epoch.
  EXPECT_EQ(
      protocol::CheckStagedBatch(config(), ReadStagingSlot(*regions_, 1).data(), 1, kEpoch).code(),
      absl::StatusCode::kUnavailable);
  EXPECT_EQ(protocol::CheckStagedBatch(config(), image.data(), 0, kEpoch + 1).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SamplerTest, ATornReadOfAStagedBatchFailsItsChecksum) {
  InsertAndIngest(20);
  ASSERT_TRUE(sampler_->StageOne());
  std::vector<uint8_t> image = ReadStagingSlot(*regions_, 0);
  image[protocol::StagingPayloadsOffset(config()) + 50] ^= 1;
  EXPECT_EQ(protocol::CheckStagedBatch(config(), image.data(), 0, kEpoch).code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(SamplerTest, DoesNotReuseAStagingSlotBeforeItsBatchIsReleased) {
  InsertAndIngest(20);
  const uint32_t depth = config().staging_depth;
  for (uint32_t n = 0; n < depth; ++n) ASSERT_TRUE(sampler_->StageOne());
  const std::vector<uint8_t> batch0 = ReadStagingSlot(*regions_, 0);
  for (int k = 0; k < 10; ++k) EXPECT_FALSE(sampler_->StageOne());
  EXPECT_EQ(counters_.staging_stalls, 1u);  // one stall, however many steps
  EXPECT_EQ(ReadStagingSlot(*regions_, 0), batch0);
  ASSERT_TRUE(sampler_->HasOutstanding());
  EXPECT_EQ(sampler_->oldest_outstanding(), 0u);
  sampler_->ReleaseOldest(/*learner_received=*/true);
  EXPECT_EQ(LoadAcquire(&regions_->control()->server.batches_released), 1u);
  ASSERT_TRUE(sampler_->StageOne());  // batch depth, into slot 0
  EXPECT_TRUE(
      protocol::CheckStagedBatch(config(), ReadStagingSlot(*regions_, depth).data(), depth, kEpoch)
          .ok());
  EXPECT_FALSE(sampler_->StageOne());
}

TEST_F(SamplerTest, EntriesCarryThePriorityAlphaOfTheSampledSlots) {
  // Stored values 1 and 4 (alpha 1, epsilon 0.5), beta 0.5: the learner's
  // w = (p_min / p)^0.5 is 1 for the small one and 0.5 for the big one.
  Insert(*regions_, 0.5f);
  Insert(*regions_, 3.5f);
  Insert(*regions_, 0.5f);
  Insert(*regions_, 3.5f);
  ASSERT_EQ(ingest_->Step(), 4u);
  ASSERT_TRUE(sampler_->StageOne());
  const std::vector<uint8_t> image = ReadStagingSlot(*regions_, 0);
  protocol::BatchHeader header;
  std::memcpy(&header, image.data(), sizeof(header));
  const std::vector<protocol::BatchEntry> entries = EntriesOf(image, header.count);
  std::vector<float> weights(entries.size());
  protocol::StagedWeights(entries, header.beta, absl::MakeSpan(weights));
  for (uint32_t k = 0; k < entries.size(); ++k) {
    const bool small = entries[k].slot_index % 2 == 0;
    EXPECT_EQ(entries[k].priority_alpha, small ? 1.0f : 4.0f);
    EXPECT_FLOAT_EQ(weights[k], small ? 1.0f : 0.5f);
  }
}

TEST_F(SamplerTest, LearnerWeightsEqualTheMemorysForTheSameDraws) {
  for (int k = 0; k < 20; ++k) Insert(*regions_, 0.05f + 0.37f * static_cast<float>(k * k % 11));
  ASSERT_EQ(ingest_->Step(), 20u);
  for (uint64_t n = 0; n < 5; ++n) {
    ASSERT_TRUE(sampler_->StageOne());
    const std::vector<uint8_t> image = ReadStagingSlot(*regions_, n);
    protocol::BatchHeader header;
    std::memcpy(&header, image.data(), sizeof(header));
    const std::vector<protocol::BatchEntry> entries = EntriesOf(image, header.count);
    std::vector<float> learner(entries.size());
    protocol::StagedWeights(entries, header.beta, absl::MakeSpan(learner));
    // The memory's weights for these draws, from their probabilities.
    std::vector<replay::SampledItem> draws(entries.size());
    for (size_t k = 0; k < entries.size(); ++k) {
      draws[k].index = entries[k].slot_index;
      draws[k].probability =
          memory_->stored_priority(entries[k].slot_index) / memory_->total_priority();
    }
    memory_->ComputeWeights(0.5, absl::MakeSpan(draws));
    for (size_t k = 0; k < entries.size(); ++k) {
      EXPECT_NEAR(learner[k], draws[k].weight, 1e-5 * draws[k].weight) << "batch " << n << " " << k;
    }
    sampler_->ReleaseOldest(/*learner_received=*/true);
  }
}

TEST_F(SamplerTest, DrawsAgainWhenASampledSlotWasOverwritten) {
  InsertAndIngest(8);
  // Slots 0..3 are being rewritten by actors for sequences 64..67: the slot
  // bytes are new but the commit words are not yet.
  Reserve(*regions_, 56);  // sequences 8..63 reserved elsewhere
  for (uint64_t q = 64; q < 68; ++q) {
    ASSERT_EQ(Reserve(*regions_, 1), q);
    WriteSlot(*regions_, q, 1.f, 128);
  }
  ASSERT_TRUE(sampler_->StageOne());
  const std::vector<uint8_t> image = ReadStagingSlot(*regions_, 0);
  ASSERT_TRUE(protocol::CheckStagedBatch(config(), image.data(), 0, kEpoch).ok());
  protocol::BatchHeader header;
  std::memcpy(&header, image.data(), sizeof(header));
  EXPECT_GT(header.count, 0u);
  for (uint32_t k = 0; k < header.count; ++k) {
    protocol::BatchEntry entry;
    std::memcpy(
        &entry,
        image.data() + protocol::StagingEntriesOffset(config()) + k * sizeof(protocol::BatchEntry),
        sizeof(entry));
    EXPECT_GE(entry.slot_index, 4u) << "an overwritten slot was staged";
  }
  // Each rejected slot was removed from the memory when it was drawn.
  EXPECT_GT(counters_.sample_copy_rejects, 0u);
  EXPECT_EQ(memory_->size(), 8u - counters_.sample_copy_rejects);
}

class CopySlotConsistentTest : public SamplerTest {
 protected:
  uint8_t* destination() { return regions_->staging() + protocol::StagingPayloadsOffset(config()); }
};

TEST_F(CopySlotConsistentTest, CopiesASlotThatHoldsItsSequenceThroughout) {
  const uint64_t q = Insert(*regions_, 1.f);
  EXPECT_EQ(
      CopySlotConsistent(config(), regions_->slot(q), &regions_->commits()[q], q, destination()),
      SlotCopy::kOk);
  EXPECT_EQ(std::memcmp(destination(), regions_->slot(q), config().slot_size), 0);
}

TEST_F(CopySlotConsistentTest, RejectsASlotWhoseCommitChangedBeforeTheCopy) {
  const uint64_t q = Insert(*regions_, 1.f);
  Commit(*regions_, q + config().capacity);
  EXPECT_EQ(
      CopySlotConsistent(config(), regions_->slot(q), &regions_->commits()[q], q, destination()),
      SlotCopy::kCommitChangedBefore);
}

TEST_F(CopySlotConsistentTest, RejectsASlotOverwrittenMidCopyBeforeItsNewCommit) {
  // An actor rewrites the slot for the next lap while the copy is half done;
  // its commit has not landed yet, so only the checksum can tell.
  const uint64_t q = Insert(*regions_, 1.f);
  const std::function<void()> overwrite = [&] {
    WriteSlot(*regions_, q + config().capacity, 2.f, 128);
  };
  EXPECT_EQ(CopySlotConsistent(config(), regions_->slot(q), &regions_->commits()[q], q,
                               destination(), &overwrite),
            SlotCopy::kBadSlot);
}

TEST_F(CopySlotConsistentTest, RejectsASlotOverwrittenAndCommittedMidCopy) {
  const uint64_t q = Insert(*regions_, 1.f);
  const std::function<void()> overwrite = [&] {
    WriteSlot(*regions_, q + config().capacity, 2.f, 128);
    Commit(*regions_, q + config().capacity);
  };
  EXPECT_EQ(CopySlotConsistent(config(), regions_->slot(q), &regions_->commits()[q], q,
                               destination(), &overwrite),
            SlotCopy::kCommitChangedAfter);
}

TEST_F(CopySlotConsistentTest, RejectsAPayloadChangedMidCopyWithTheSameHeader) {
  // Only payload bytes in the second half change (a torn rewrite).
  const uint64_t q = Insert(*regions_, 1.f);
  const std::function<void()> scribble = [&] {
    uint8_t* last = regions_->slot(q) + config().slot_size - 8;
    const uint64_t garbage = 0x0123456789abcdefULL;
    CopyToShared(last, &garbage, sizeof(garbage));
  };
  EXPECT_EQ(CopySlotConsistent(config(), regions_->slot(q), &regions_->commits()[q], q,
                               destination(), &scribble),
            SlotCopy::kBadSlot);
}

TEST_F(SamplerTest, WithALinkCodecTheCopiedSlotsArePackedAndUnpackToTheSlots) {
  SamplerOptions so;
  so.beta = replay::BetaSchedule{0.5, 0.5, 0};
  so.rate_limiter.min_size_to_sample = 4;
  so.link_codec = CodecOptions{CodecKind::kZstd, 1};
  ASSERT_TRUE(so.Validate().ok());
  sampler_ = std::make_unique<Sampler>(config(), so, regions_->control(), regions_->slots(),
                                       regions_->commits(), regions_->staging(), memory_.get(),
                                       &counters_, &clock_);
  sampler_->Restart(kEpoch, kIncarnation);
  InsertAndIngest(20);
  ASSERT_TRUE(sampler_->StageOne());
  const std::vector<uint8_t> image = ReadStagingSlot(*regions_, 0);
  ASSERT_TRUE(protocol::CheckStagedBatch(config(), image.data(), 0, kEpoch).ok());
  protocol::BatchHeader header;
  std::memcpy(&header, image.data(), sizeof(header));
  const uint64_t raw = uint64_t{header.payload_count} * config().slot_size;
  ASSERT_EQ(header.payload_count, config().batch_size);
  // Slots of 128-byte payloads in larger slots shrink.
  ASSERT_GT(header.packed_bytes, 0u);
  EXPECT_LT(header.packed_bytes, raw);
  EXPECT_EQ(header.used_bytes, protocol::StagingPayloadsOffset(config()) + header.packed_bytes);
  EXPECT_EQ(sampler_->packed_in(), raw);
  EXPECT_EQ(sampler_->packed_out(), header.packed_bytes);
  std::unique_ptr<FrameCodec> codec = FrameCodec::Create(*so.link_codec).value();
  std::vector<uint8_t> slots(raw);
  ASSERT_TRUE(
      codec
          ->Decompress(absl::MakeConstSpan(image.data() + protocol::StagingPayloadsOffset(config()),
                                           header.packed_bytes),
                       absl::MakeSpan(slots))
          .ok());
  for (uint32_t k = 0; k < header.count; ++k) {
    protocol::BatchEntry entry;
    std::memcpy(
        &entry,
        image.data() + protocol::StagingEntriesOffset(config()) + k * sizeof(protocol::BatchEntry),
        sizeof(entry));
    const uint8_t* copy = slots.data() + uint64_t{k} * config().slot_size;
    EXPECT_EQ(std::memcmp(copy, regions_->slot(entry.slot_index), config().slot_size), 0);
  }
  // The block is what the checksum covers: a flipped byte in it is caught.
  std::vector<uint8_t> torn = image;
  torn[protocol::StagingPayloadsOffset(config()) + header.packed_bytes - 1] ^= 1;
  EXPECT_EQ(protocol::CheckStagedBatch(config(), torn.data(), 0, kEpoch).code(),
            absl::StatusCode::kDataLoss);
}

TEST(SamplerOptionsTest, RejectsBadValues) {
  SamplerOptions options;
  EXPECT_TRUE(options.Validate().ok());
  options.rate_limiter.min_size_to_sample = 0;
  EXPECT_FALSE(options.Validate().ok());
  options.rate_limiter.min_size_to_sample = 1;
  options.max_draws_per_entry = 0;
  EXPECT_FALSE(options.Validate().ok());
  options.max_draws_per_entry = 1;
  options.beta.initial = 2;
  EXPECT_FALSE(options.Validate().ok());
  options.beta.initial = 0.4;
  options.link_codec = CodecOptions{CodecKind::kZstd, 99};
  const absl::Status s = options.Validate();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("link_codec"), std::string::npos) << s;
}

}  // namespace
}  // namespace dreplay::server
