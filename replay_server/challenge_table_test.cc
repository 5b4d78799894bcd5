// Copyright dreplay authors.

#include "replay_server/challenge_table.h"

#include <vector>

#include "gtest/gtest.h"

namespace dreplay::server {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

ChallengeTableOptions Options(size_t capacity, size_t per_source) {
  ChallengeTableOptions o;
  o.capacity = capacity;
  o.per_source = per_source;
  o.lifetime = absl::Seconds(10);
  return o;
}

TEST(ChallengeTableTest, ANonceIsGoodForOneHelloOnly) {
  ChallengeTable table(Options(8, 8));
  const protocol::Nonce nonce = *table.Issue("10.0.0.1", kStart);
  EXPECT_TRUE(table.Consume(nonce, "10.0.0.1", kStart + absl::Seconds(1)));
  EXPECT_FALSE(table.Consume(nonce, "10.0.0.1", kStart + absl::Seconds(1)));  // replayed
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.sources(), 0u);
}

TEST(ChallengeTableTest, AnUnknownExpiredOrForeignNonceIsRefused) {
  ChallengeTable table(Options(8, 8));
  protocol::Nonce nonce = *table.Issue("10.0.0.1", kStart);
  protocol::Nonce other = nonce;
  other[0] ^= 1;
  EXPECT_FALSE(table.Consume(other, "10.0.0.1", kStart));
  EXPECT_FALSE(table.Consume(nonce, "10.0.0.1", kStart + absl::Seconds(10)));
  // A nonce issued to one host is no good from another, and is gone after.
  const protocol::Nonce relayed = *table.Issue("10.0.0.1", kStart);
  EXPECT_FALSE(table.Consume(relayed, "10.0.0.2", kStart));
  EXPECT_FALSE(table.Consume(relayed, "10.0.0.1", kStart));
}

TEST(ChallengeTableTest, AFloodFromOneHostEvictsOnlyItsOwnNonces) {
  ChallengeTable table(Options(16, 4));
  const protocol::Nonce honest = *table.Issue("10.0.0.2", kStart);
  std::vector<protocol::Nonce> flood;
  for (int i = 0; i < 100000; ++i) flood.push_back(*table.Issue("10.0.0.1", kStart));
  EXPECT_EQ(table.size(), 5u);
  EXPECT_EQ(table.evicted_per_source(), 100000u - 4);
  EXPECT_FALSE(table.Consume(flood.front(), "10.0.0.1", kStart));
  EXPECT_TRUE(table.Consume(flood.back(), "10.0.0.1", kStart));
  EXPECT_TRUE(table.Consume(honest, "10.0.0.2", kStart));
}

TEST(ChallengeTableTest, AtCapacityTheHostHoldingMostLosesItsOldest) {
  ChallengeTable table(Options(8, 6));
  const protocol::Nonce a = *table.Issue("10.0.0.2", kStart);
  const protocol::Nonce b = *table.Issue("10.0.0.3", kStart);
  std::vector<protocol::Nonce> flood;
  for (int i = 0; i < 6; ++i) flood.push_back(*table.Issue("10.0.0.1", kStart));
  ASSERT_EQ(table.size(), 8u);
  const protocol::Nonce c = *table.Issue("10.0.0.4", kStart);  // table full
  EXPECT_EQ(table.size(), 8u);
  EXPECT_EQ(table.evicted_by_capacity(), 1u);
  EXPECT_FALSE(table.Consume(flood[0], "10.0.0.1", kStart));
  EXPECT_TRUE(table.Consume(a, "10.0.0.2", kStart));
  EXPECT_TRUE(table.Consume(b, "10.0.0.3", kStart));
  EXPECT_TRUE(table.Consume(c, "10.0.0.4", kStart));
}

TEST(ChallengeTableTest, ConsumedNoncesLeaveNoTraceHoweverManyWereIssued) {
  ChallengeTable table(Options(4096, 64));
  for (int i = 0; i < 200000; ++i) {
    const protocol::Nonce n = *table.Issue("10.0.0.1", kStart);
    ASSERT_TRUE(table.Consume(n, "10.0.0.1", kStart));
  }
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.sources(), 0u);
}

TEST(ChallengeTableTest, ExpiredNoncesAreForgottenWhenNewOnesAreIssued) {
  ChallengeTable table(Options(100, 100));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(table.Issue("10.0.0.1", kStart).ok());
  ASSERT_TRUE(table.Issue("10.0.0.1", kStart + absl::Seconds(11)).ok());
  EXPECT_EQ(table.size(), 1u);
}

TEST(ChallengeTableTest, OptionsAreValidated) {
  EXPECT_FALSE(Options(4, 5).Validate().ok());
  EXPECT_FALSE(Options(4, 0).Validate().ok());
  ChallengeTableOptions o = Options(4, 4);
  o.lifetime = absl::ZeroDuration();
  EXPECT_FALSE(o.Validate().ok());
  EXPECT_TRUE(Options(4, 4).Validate().ok());
}

}  // namespace
}  // namespace dreplay::server
