// Copyright dreplay authors.

#include "replay_server/lease_table.h"

#include <memory>

#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

class LeaseTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    protocol::LayoutConfig config = testing::SmallConfig();
    config.leases = 3;
    regions_ = ReplayRegions::Create(config).value();
    table_ = std::make_unique<LeaseTable>(regions_.get());
  }
  protocol::LeaseState state(uint32_t lease) const {
    return static_cast<protocol::LeaseState>(regions_->lease_line(lease)->state);
  }
  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<LeaseTable> table_;
};

TEST_F(LeaseTableTest, GrantsFreeLeasesThenGivesAnActorItsOwnBack) {
  for (uint32_t actor = 10; actor < 13; ++actor) {
    auto grant = table_->Acquire(actor);
    ASSERT_TRUE(grant.ok()) << grant.status();
    EXPECT_EQ(grant->lease, actor - 10);
    EXPECT_EQ(grant->displaced_client, 0u);
    table_->Bind(grant->lease, actor, /*client_id=*/actor + 100);
  }
  EXPECT_EQ(table_->held(), 3u);
  EXPECT_EQ(state(1), protocol::LeaseState::kHeld);
  EXPECT_EQ(regions_->lease_line(1)->holder_actor_id, 11u);
  // All held: a newcomer is refused, naming the count.
  auto refused = table_->Acquire(20);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("all 3 actor leases are held"), std::string::npos);
  // Actor 11 reconnecting displaces its old connection and keeps lease 1.
  auto again = table_->Acquire(11);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->lease, 1u);
  EXPECT_EQ(again->displaced_client, 111u);
  // Released: its actor still gets it back first; a newcomer takes it only
  // when nothing else is free.
  table_->Release(111);
  EXPECT_EQ(state(1), protocol::LeaseState::kReleased);
  EXPECT_EQ(table_->Acquire(11)->lease, 1u);
  EXPECT_EQ(table_->Acquire(20)->lease, 1u);
  EXPECT_EQ(table_->Acquire(11)->displaced_client, 0u);
}

TEST_F(LeaseTableTest, ResumesAfterTheLastCommittedSequenceAtOrAfterTheCursor) {
  EXPECT_EQ(table_->ResumeSequence(2), 0u);
  for (int k = 0; k < 5; ++k) testing::InsertLease(*regions_, 2, 1.f);
  EXPECT_EQ(table_->ResumeSequence(2), 5u);
  // Sequence 6 committed but 5 not: the actor resumes at 5 (6 is written
  // again, ingest has not passed 5).
  testing::CommitLease(*regions_, 2, 6);
  EXPECT_EQ(table_->ResumeSequence(2), 5u);
  StoreRelease(&regions_->lease_line(2)->ingest_cursor, 3);
  EXPECT_EQ(table_->ResumeSequence(2), 5u);
  EXPECT_EQ(table_->ResumeSequence(0), 0u);
}

}  // namespace
}  // namespace dreplay::server
