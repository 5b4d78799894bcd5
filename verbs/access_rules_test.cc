// Copyright dreplay authors.

#include "verbs/access_rules.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verbs/verbs.h"

namespace dreplay::verbs {
namespace {

using ::testing::HasSubstr;

TEST(AccessRulesTest, AcceptsEveryCombinationThatLibibverbsAccepts) {
  EXPECT_TRUE(CheckAccessFlags(0).ok());
  EXPECT_TRUE(CheckAccessFlags(kLocalWrite).ok());
  EXPECT_TRUE(CheckAccessFlags(kRemoteRead).ok());
  EXPECT_TRUE(CheckAccessFlags(kLocalWrite | kRemoteWrite).ok());
  EXPECT_TRUE(CheckAccessFlags(kLocalWrite | kRemoteAtomic).ok());
  EXPECT_TRUE(CheckAccessFlags(AllAccessFlags()).ok());
}

TEST(AccessRulesTest, RefusesRemoteWriteWithoutLocalWrite) {
  const absl::Status s = CheckAccessFlags(kRemoteWrite | kRemoteRead);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("needs kLocalWrite"));
}

TEST(AccessRulesTest, RefusesRemoteAtomicWithoutLocalWrite) {
  EXPECT_TRUE(absl::IsInvalidArgument(CheckAccessFlags(kRemoteAtomic)));
}

TEST(AccessRulesTest, RefusesUnknownBitsAndNamesThem) {
  const absl::Status s = CheckAccessFlags(kRemoteRead | (1u << 7));
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("unknown bits 0x80"));
}

TEST(AccessRulesTest, AllAccessFlagsAreTheFlagsOfVerbsH) {
  EXPECT_EQ(AllAccessFlags(),
            kLocalWrite | kRemoteRead | kRemoteWrite | kRemoteAtomic | kMemoryWindowBind);
}

}  // namespace
}  // namespace dreplay::verbs
