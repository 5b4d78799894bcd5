// Copyright dreplay authors.

#include "replay_server/priority_updates.h"

#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "replay_server/regions.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

using testing::SmallConfig;
using testing::WriteUpdate;
using Result = PriorityUpdates::Result;

constexpr uint64_t kEpoch = 3;
constexpr uint64_t kIncarnation = 0x5eed'1234'abcdULL;
constexpr float kMaxPriority = 100.f;

class PriorityUpdatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    regions_ = ReplayRegions::Create(SmallConfig()).value();
    replay::ReplayMemoryOptions mo;
    mo.capacity = SmallConfig().capacity;
    mo.alpha = 1.0;
    mo.priority_epsilon = 0.5;
    memory_ = replay::ReplayMemory::Create(mo).value();
    for (uint64_t i = 0; i < 8; ++i) memory_->Insert(i, 100 + i, 0.5f);
    updates_ = std::make_unique<PriorityUpdates>(config(), regions_->mailbox(), regions_->staging(),
                                                 kMaxPriority, memory_.get(), &counters_);
    // Batches 0 and 1 were staged with every entry in memory.
    std::vector<protocol::BatchEntry> all;
    for (uint32_t i = 0; i < 8; ++i) all.push_back({100 + i, i, 1.0f});
    Stage(0, all);
    Stage(1, all);
    // What a server publishes, and a learner echoes from the staged batch.
    StoreRelease(&regions_->control()->server.incarnation, kIncarnation);
  }
  const protocol::LayoutConfig& config() const { return regions_->config(); }

  // Writes the header and entries of batch `n` into its staging slot, as the
  // sampler stages it.
  void Stage(uint64_t n, const std::vector<protocol::BatchEntry>& entries) {
    uint8_t* slot = regions_->staging() + protocol::StagingSlotOffset(config(), n);
    protocol::BatchHeader header{};
    header.batch_number = n;
    header.epoch = kEpoch;
    header.count = static_cast<uint32_t>(entries.size());
    std::memcpy(slot, &header, sizeof(header));
    std::memcpy(slot + protocol::StagingEntriesOffset(config()), entries.data(),
                entries.size() * sizeof(protocol::BatchEntry));
  }

  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<replay::ReplayMemory> memory_;
  ReplayCounters counters_;
  std::unique_ptr<PriorityUpdates> updates_;
};

TEST_F(PriorityUpdatesTest, IsNotReadyUntilTheCommitLineNamesTheBatch) {
  EXPECT_EQ(updates_->Consume(0, kEpoch, kIncarnation), Result::kNotReady);
  const protocol::PriorityRecord r{101, 1, 3.5f};
  WriteUpdate(*regions_, 0, kEpoch, {&r, 1});
  // Mailbox entry 0 answers batch 0, not batch depth (the same entry).
  EXPECT_EQ(updates_->Consume(config().staging_depth, kEpoch, kIncarnation), Result::kNotReady);
  EXPECT_EQ(updates_->Consume(0, kEpoch, kIncarnation), Result::kApplied);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(1), 4.0);
  EXPECT_EQ(counters_.priority_updates_applied, 1u);
}

TEST_F(PriorityUpdatesTest, DropsAndCountsStaleAndInvalidRecords) {
  memory_->Insert(2, 102 + config().capacity, 0.5f);  // slot 2 was overwritten
  const std::vector<protocol::PriorityRecord> records = {
      {100, 0, 1.5f},        // applied
      {102, 2, 9.5f},        // stale: slot 2 holds a later sequence
      {103, 3, -1.f},        // invalid priority
      {104, 1u << 30, 1.f},  // invalid index
      {105, 5, 2.5f},        // applied
  };
  WriteUpdate(*regions_, 1, kEpoch, records);
  EXPECT_EQ(updates_->Consume(1, kEpoch, kIncarnation), Result::kApplied);
  EXPECT_EQ(counters_.priority_updates_applied, 2u);
  EXPECT_EQ(counters_.priority_updates_stale, 1u);
  EXPECT_EQ(counters_.priority_updates_invalid, 2u);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(0), 2.0);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(2), 1.0);  // unchanged
  EXPECT_DOUBLE_EQ(memory_->stored_priority(3), 1.0);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(5), 3.0);
}

TEST_F(PriorityUpdatesTest, RejectsAnEntryWithABadChecksumWithoutApplyingIt) {
  const protocol::PriorityRecord r{101, 1, 3.5f};
  WriteUpdate(*regions_, 0, kEpoch, {&r, 1});
  regions_->mailbox_entry(0)[protocol::MailboxRecordsOffset(config()) + 12] ^=
      0x40;  // priority bits
  EXPECT_EQ(updates_->Consume(0, kEpoch, kIncarnation), Result::kRejected);
  EXPECT_EQ(counters_.mailbox_rejects, 1u);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(1), 1.0);
}

TEST_F(PriorityUpdatesTest, RejectsAnEntryOfAnotherEpochOrBatchOrWithTooManyRecords) {
  const protocol::PriorityRecord r{101, 1, 3.5f};
  WriteUpdate(*regions_, 0, kEpoch - 1, {&r, 1});
  EXPECT_EQ(updates_->Consume(0, kEpoch, kIncarnation), Result::kRejected);

  // Header batch number disagrees with the commit line.
  WriteUpdate(*regions_, 1, kEpoch, {&r, 1});
  uint8_t* entry = regions_->mailbox_entry(1);
  const uint64_t commit_for_3 = protocol::BatchCommitValue(3);
  StoreRelease(reinterpret_cast<uint64_t*>(entry + protocol::MailboxCommitOffset(config())),
               commit_for_3);
  EXPECT_EQ(updates_->Consume(3, kEpoch, kIncarnation), Result::kRejected);

  // A count beyond batch_size is never trusted for a copy.
  WriteUpdate(*regions_, 2, kEpoch, {&r, 1});
  protocol::MailboxHeader header;
  std::memcpy(&header, regions_->mailbox_entry(2), sizeof(header));
  header.count = config().batch_size + 1;
  std::memcpy(regions_->mailbox_entry(2), &header, sizeof(header));
  EXPECT_EQ(updates_->Consume(2, kEpoch, kIncarnation), Result::kRejected);
  EXPECT_EQ(counters_.mailbox_rejects, 3u);
  EXPECT_EQ(counters_.priority_updates_applied, 0u);
}

TEST_F(PriorityUpdatesTest, RejectsAnUpdateWrittenForABatchOfAnEarlierIncarnation) {
  // A learner answers a batch staged before the server restarted: same
  // epoch and batch numbers, another incarnation.
  const protocol::PriorityRecord r{101, 1, 3.5f};
  WriteUpdate(*regions_, 0, kEpoch, kIncarnation + 1, {&r, 1});
  EXPECT_EQ(updates_->Consume(0, kEpoch, kIncarnation), Result::kRejected);
  EXPECT_EQ(counters_.mailbox_rejects, 1u);
  EXPECT_EQ(counters_.priority_updates_applied, 0u);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(1), 1.0);
}

TEST_F(PriorityUpdatesTest, AnEmptyUpdateIsAppliedAndReleasesTheBatch) {
  WriteUpdate(*regions_, 0, kEpoch, {});
  EXPECT_EQ(updates_->Consume(0, kEpoch, kIncarnation), Result::kApplied);
  EXPECT_EQ(counters_.priority_updates_applied, 0u);
}

TEST_F(PriorityUpdatesTest, ARecordThatNamesNoEntryOfTheBatchIsInvalidAndNotApplied) {
  Stage(0, {{101, 1, 1.0f}, {102, 2 | protocol::kEntryCachedBit, 1.0f}});
  const std::vector<protocol::PriorityRecord> records = {
      {102, 2, 6.5f},  // applied: the batch's (a cached entry), out of order
      {103, 3, 9.5f},  // in memory, but not in this batch
      {101, 1, 3.5f},  // applied
      {105, 1, 7.5f},  // the batch's index with another sequence
  };
  WriteUpdate(*regions_, 0, kEpoch, records);
  EXPECT_EQ(updates_->Consume(0, kEpoch, kIncarnation), Result::kApplied);
  EXPECT_EQ(counters_.priority_updates_applied, 2u);
  EXPECT_EQ(counters_.priority_updates_invalid, 2u);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(1), 4.0);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(2), 7.0);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(3), 1.0);  // unchanged
}

TEST_F(PriorityUpdatesTest, EveryKindOfPriorityValueHasItsDefinedOutcome) {
  const float raw[8] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(),
                        -1.0f,
                        -0.0f,
                        0.0f,
                        std::numeric_limits<float>::denorm_min(),
                        1e30f};
  std::vector<protocol::PriorityRecord> records;
  for (uint32_t i = 0; i < 8; ++i) records.push_back({100 + i, i, raw[i]});
  WriteUpdate(*regions_, 0, kEpoch, records);
  EXPECT_EQ(updates_->Consume(0, kEpoch, kIncarnation), Result::kApplied);
  // NaN, +inf, -inf and negative: invalid, the old priority (0.5 + 0.5) kept.
  EXPECT_EQ(counters_.priority_updates_invalid, 4u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(memory_->stored_priority(i), 1.0) << i;
  // -0.0, 0 and a denormal: applied, the lowest value (epsilon^alpha).
  for (uint32_t i = 4; i < 7; ++i) EXPECT_DOUBLE_EQ(memory_->stored_priority(i), 0.5) << i;
  // Above max_priority: clamped to it, counted.
  EXPECT_DOUBLE_EQ(memory_->stored_priority(7), kMaxPriority + 0.5);
  EXPECT_EQ(counters_.priorities_bounded, 1u);
  EXPECT_EQ(counters_.priority_updates_applied, 4u);
}

TEST(EncodePriorityUpdateTest, RefusesTooManyRecordsOrASmallBuffer) {
  const protocol::LayoutConfig c = SmallConfig();
  std::vector<protocol::PriorityRecord> records(c.batch_size + 1);
  std::vector<uint8_t> entry(protocol::MailboxEntryStride(c));
  EXPECT_FALSE(
      protocol::EncodePriorityUpdate(c, 0, 1, kIncarnation, records, absl::MakeSpan(entry)).ok());
  records.resize(1);
  std::vector<uint8_t> small(protocol::MailboxEntryStride(c) - 1);
  EXPECT_FALSE(
      protocol::EncodePriorityUpdate(c, 0, 1, kIncarnation, records, absl::MakeSpan(small)).ok());
  EXPECT_TRUE(
      protocol::EncodePriorityUpdate(c, 0, 1, kIncarnation, records, absl::MakeSpan(entry)).ok());
}

}  // namespace
}  // namespace dreplay::server
