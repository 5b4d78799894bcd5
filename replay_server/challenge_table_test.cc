// Copyright dreplay authors.

#include "replay_server/challenge_table.h"

#include <vector>

#include "gtest/gtest.h"

namespace dreplay::server {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(ChallengeTableTest, ANonceIsGoodForOneHelloOnly) {
  ChallengeTable table(8, absl::Seconds(10));
  const protocol::Nonce nonce = *table.Issue(kStart);
  EXPECT_TRUE(table.Consume(nonce, kStart + absl::Seconds(1)));
  EXPECT_FALSE(table.Consume(nonce, kStart + absl::Seconds(1)));  // replayed
  EXPECT_EQ(table.size(), 0u);
}

TEST(ChallengeTableTest, AnUnknownOrExpiredNonceIsRefused) {
  ChallengeTable table(8, absl::Seconds(10));
  protocol::Nonce nonce = *table.Issue(kStart);
  protocol::Nonce other = nonce;
  other[0] ^= 1;
  EXPECT_FALSE(table.Consume(other, kStart));
  EXPECT_FALSE(table.Consume(nonce, kStart + absl::Seconds(10)));
}

TEST(ChallengeTableTest, AFloodOfRequestsKeepsTheTableBoundedAndForgetsTheOldest) {
  ChallengeTable table(4, absl::Seconds(10));
  std::vector<protocol::Nonce> nonces;
  for (int i = 0; i < 100; ++i) nonces.push_back(*table.Issue(kStart));
  EXPECT_LE(table.size(), 4u);
  EXPECT_FALSE(table.Consume(nonces.front(), kStart));
  EXPECT_TRUE(table.Consume(nonces.back(), kStart));
}

TEST(ChallengeTableTest, ExpiredNoncesAreForgottenWhenNewOnesAreIssued) {
  ChallengeTable table(100, absl::Seconds(10));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(table.Issue(kStart).ok());
  ASSERT_TRUE(table.Issue(kStart + absl::Seconds(11)).ok());
  EXPECT_EQ(table.size(), 1u);
}

}  // namespace
}  // namespace dreplay::server
