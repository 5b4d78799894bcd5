// Copyright dreplay authors.

#include "replay_server/regions.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

TEST(ReplayRegionsTest, AllocatesEveryRegionPageAlignedZeroedAndSizedByTheLayout) {
  protocol::LayoutConfig config = testing::SmallConfig();
  config.max_actors = 3;
  auto regions = ReplayRegions::Create(config);
  ASSERT_TRUE(regions.ok()) << regions.status();
  const ReplayRegions& r = **regions;
  const struct {
    protocol::RegionKind kind;
    uint64_t bytes;
  } expected[] = {
      {protocol::RegionKind::kControl, sizeof(protocol::ControlBlock)},
      {protocol::RegionKind::kSlots, protocol::SlotRingBytes(config)},
      {protocol::RegionKind::kCommits, protocol::CommitWordsBytes(config)},
      {protocol::RegionKind::kStaging, protocol::StagingRingBytes(config)},
      {protocol::RegionKind::kMailbox, protocol::MailboxBytes(config)},
      {protocol::RegionKind::kParams, protocol::ParamsRegionBytes(config)},
      {protocol::RegionKind::kStats, sizeof(protocol::StatsBlock)},
      {protocol::RegionKind::kActors, 3 * sizeof(protocol::ActorLine)},
  };
  for (const auto& e : expected) {
    SCOPED_TRACE(protocol::RegionKindName(e.kind));
    ASSERT_NE(r.region(e.kind), nullptr);
    EXPECT_EQ(r.region_bytes(e.kind), e.bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r.region(e.kind)) % protocol::kRegionAlignment, 0u);
  }
  for (uint64_t i = 0; i < config.capacity; ++i) ASSERT_EQ(r.commits()[i], 0u);
  EXPECT_EQ(r.region_bytes(protocol::RegionKind::kLeases), protocol::LeasesRegionBytes(config));
  EXPECT_EQ(reinterpret_cast<uint8_t*>(r.lease_line(1)),
            static_cast<uint8_t*>(r.region(protocol::RegionKind::kLeases)) + 64);
  EXPECT_EQ(r.slot(3), r.slots() + 3 * config.slot_size);
  EXPECT_EQ(r.staging_slot(config.staging_depth + 1),
            r.staging() + protocol::StagingSlotStride(config));
  EXPECT_EQ(r.mailbox_entry(1), r.mailbox() + protocol::MailboxEntryStride(config));
}

TEST(ReplayRegionsTest, WritesTheControlHeaderClientsCheck) {
  auto r = ReplayRegions::Create(testing::SmallConfig()).value();
  EXPECT_TRUE(protocol::CheckControlHeader(r->control()->header).ok());
  EXPECT_EQ(r->control()->header.config, testing::SmallConfig());
  EXPECT_EQ(r->lease_line(0)->ingest_cursor, 0u);
}

TEST(ReplayRegionsTest, HasNoActorsRegionWithoutActorLines) {
  auto r = ReplayRegions::Create(testing::SmallConfig()).value();
  EXPECT_EQ(r->actors(), nullptr);
  EXPECT_EQ(r->region_bytes(protocol::RegionKind::kActors), 0u);
}

TEST(ReplayRegionsTest, RejectsAnInvalidConfig) {
  protocol::LayoutConfig config = testing::SmallConfig();
  config.capacity = 100;
  EXPECT_EQ(ReplayRegions::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dreplay::server
