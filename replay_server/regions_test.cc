// Copyright dreplay authors.

#include "replay_server/regions.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "replay_server/test_util.h"

namespace dreplay::replay {
namespace {

TEST(ReplayRegionsTest, AllocatesEveryRegionPageAlignedZeroedAndSizedByTheLayout) {
  LayoutConfig config = testing::SmallConfig();
  config.max_actors = 3;
  auto regions = ReplayRegions::Create(config);
  ASSERT_TRUE(regions.ok()) << regions.status();
  const ReplayRegions& r = **regions;
  const struct {
    RegionKind kind;
    uint64_t bytes;
  } expected[] = {
      {RegionKind::kControl, sizeof(ControlBlock)},
      {RegionKind::kSlots, SlotRingBytes(config)},
      {RegionKind::kCommits, CommitWordsBytes(config)},
      {RegionKind::kStaging, StagingRingBytes(config)},
      {RegionKind::kMailbox, MailboxBytes(config)},
      {RegionKind::kParams, ParamsRegionBytes(config)},
      {RegionKind::kStats, sizeof(StatsBlock)},
      {RegionKind::kActors, 3 * sizeof(ActorLine)},
  };
  for (const auto& e : expected) {
    SCOPED_TRACE(RegionKindName(e.kind));
    ASSERT_NE(r.region(e.kind), nullptr);
    EXPECT_EQ(r.region_bytes(e.kind), e.bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r.region(e.kind)) % kRegionAlignment, 0u);
  }
  for (uint64_t i = 0; i < config.capacity; ++i) ASSERT_EQ(r.commits()[i], 0u);
  EXPECT_EQ(r.region(RegionKind::kTail),
            static_cast<uint8_t*>(r.region(RegionKind::kControl)) + kTailOffset);
  EXPECT_EQ(r.region_bytes(RegionKind::kTail), kTailLineBytes);
  EXPECT_EQ(r.slot(3), r.slots() + 3 * config.slot_size);
  EXPECT_EQ(r.staging_slot(config.staging_depth + 1), r.staging() + StagingSlotStride(config));
  EXPECT_EQ(r.mailbox_entry(1), r.mailbox() + MailboxEntryStride(config));
}

TEST(ReplayRegionsTest, WritesTheControlHeaderClientsCheck) {
  auto r = ReplayRegions::Create(testing::SmallConfig()).value();
  EXPECT_TRUE(CheckControlHeader(r->control()->header).ok());
  EXPECT_EQ(r->control()->header.config, testing::SmallConfig());
  EXPECT_EQ(r->control()->tail.tail, 0u);
}

TEST(ReplayRegionsTest, HasNoActorsRegionWithoutActorLines) {
  auto r = ReplayRegions::Create(testing::SmallConfig()).value();
  EXPECT_EQ(r->actors(), nullptr);
  EXPECT_EQ(r->region_bytes(RegionKind::kActors), 0u);
}

TEST(ReplayRegionsTest, RejectsAnInvalidConfig) {
  LayoutConfig config = testing::SmallConfig();
  config.capacity = 100;
  EXPECT_EQ(ReplayRegions::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dreplay::replay
