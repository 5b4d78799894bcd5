// Copyright dreplay authors.

#include "replay_server/forward_queue.h"

#include <memory>
#include <vector>

#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "replay_server/regions.h"

namespace dreplay::server {
namespace {

class ForwardQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    protocol::LayoutConfig c;
    c.capacity = 64;
    c.slot_size = 168;
    c.batch_size = 4;
    c.staging_depth = 2;
    c.param_bytes = 256;
    c.leases = 4;  // 16 slots each
    regions_ = ReplayRegions::Create(c).value();
  }

  uint8_t* leases() const {
    return static_cast<uint8_t*>(regions_->region(protocol::RegionKind::kLeases));
  }

  // Appends a journal entry as ingest does.
  void Journal(uint32_t lease, uint64_t first, uint32_t count) {
    auto* entry = reinterpret_cast<protocol::JournalEntry*>(
        leases() + protocol::JournalEntryOffset(regions_->config(), end_));
    StoreRelaxed(&entry->first_sequence, first);
    StoreRelaxed(reinterpret_cast<uint64_t*>(&entry->lease), (uint64_t{count} << 32) | lease);
    StoreRelease(&entry->number, end_);
    ++end_;
    StoreRelease(&regions_->control()->server.journal_end, end_);
  }

  std::unique_ptr<ReplayRegions> regions_;
  uint64_t end_ = 0;
};

TEST_F(ForwardQueueTest, GivesTransitionsInJournalOrderWithTheirSlots) {
  Journal(0, 0, 2);  // before the queue starts: not queued
  ForwardQueue queue(regions_->config(), 100, leases(), regions_->control());
  queue.Restart();
  Journal(2, 5, 2);
  Journal(1, 15, 1);
  EXPECT_EQ(queue.Refill(), 0u);
  ASSERT_EQ(queue.size(), 3u);
  const std::vector<std::pair<uint64_t, uint64_t>> expected = {
      {2 * 16 + 5, 5}, {2 * 16 + 6, 6}, {1 * 16 + 15, 15}};
  for (const auto& [index, sequence] : expected) {
    const QueuedTransition t = queue.PopFront();
    EXPECT_EQ(t.index, index);
    EXPECT_EQ(t.sequence, sequence);
  }
  EXPECT_EQ(queue.size(), 0u);
}

TEST_F(ForwardQueueTest, DropsTheOldestBeyondItsBound) {
  ForwardQueue queue(regions_->config(), 5, leases(), regions_->control());
  queue.Restart();
  Journal(0, 0, 3);
  Journal(1, 0, 3);
  Journal(2, 0, 3);
  EXPECT_EQ(queue.Refill(), 4u);
  ASSERT_EQ(queue.size(), 5u);
  QueuedTransition t = queue.PopFront();
  EXPECT_EQ(t.index, 16u + 1);  // lease 1, sequence 1: the newest 5 kept
  // Many one-transition runs: the ring of runs never holds more than the bound.
  for (uint64_t s = 3; s < 20; ++s) Journal(0, s, 1);
  EXPECT_EQ(queue.Refill(), 4u + 17u - 5u);  // 4 queued and 17 new, 5 kept
  EXPECT_EQ(queue.size(), 5u);
  EXPECT_EQ(queue.PopFront().sequence, 15u);
}

TEST_F(ForwardQueueTest, EntriesOverwrittenBeforeTheyWereTakenAreCountedLost) {
  ForwardQueue queue(regions_->config(), 1 << 20, leases(), regions_->control());
  queue.Restart();
  for (uint64_t k = 0; k < protocol::kJournalEntries + 10; ++k) Journal(k % 4, k / 4, 1);
  queue.Refill();
  EXPECT_EQ(queue.journal_entries_lost(), 10u);
  EXPECT_EQ(queue.size(), protocol::kJournalEntries);
  EXPECT_EQ(queue.PopFront().sequence, 10u / 4);
}

}  // namespace
}  // namespace dreplay::server
