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
    auto lease = table_->Acquire(actor);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(*lease, actor - 10);
    table_->Bind(*lease, actor, /*client_id=*/actor + 100);
  }
  EXPECT_EQ(table_->held(), 3u);
  EXPECT_EQ(state(1), protocol::LeaseState::kHeld);
  EXPECT_EQ(regions_->lease_line(1)->holder_actor_id, 11u);
  // All held: a newcomer is refused, naming the count.
  auto refused = table_->Acquire(20);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("all 3 actor leases are held"), std::string::npos);
  // Released: its actor still gets it back first; a newcomer takes it only
  // when nothing else is free.
  table_->Release(111);
  EXPECT_EQ(state(1), protocol::LeaseState::kReleased);
  EXPECT_EQ(*table_->Acquire(11), 1u);
  EXPECT_EQ(*table_->Acquire(20), 1u);
}

TEST_F(LeaseTableTest, AHeldLeaseIsNeverTakenFromItsConnection) {
  ASSERT_EQ(*table_->Acquire(11), 0u);
  table_->Bind(0, 11, /*client_id=*/111);
  // A second hello of actor 11 while client 111 holds the lease: refused,
  // the holder keeps it (the old rule displaced it).
  auto again = table_->Acquire(11);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("held by client 111"), std::string::npos)
      << again.status();
  EXPECT_EQ(state(0), protocol::LeaseState::kHeld);
  EXPECT_EQ(regions_->lease_line(0)->holder_actor_id, 11u);
  // Once that connection is gone, the same actor takes it back.
  table_->Release(111);
  EXPECT_EQ(*table_->Acquire(11), 0u);
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
