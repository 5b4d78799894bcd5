// Copyright dreplay authors.

#include "common/peer_address.h"

#include "gtest/gtest.h"

namespace dreplay {
namespace {

TEST(SourceOfTest, DropsThePortOfEveryAddressForm) {
  EXPECT_EQ(SourceOf("127.0.0.2:4242"), "127.0.0.2");
  EXPECT_EQ(SourceOf("::1:4242"), "::1");
  EXPECT_EQ(SourceOf("[::1]:4242"), "::1");
  EXPECT_EQ(SourceOf("localhost"), "localhost");
  EXPECT_EQ(SourceOf(""), "");
}

}  // namespace
}  // namespace dreplay
