// Copyright dreplay authors.

#include "verbs/ibverbs_attributes.h"

#include "gtest/gtest.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::ibverbs {
namespace {

TEST(ToIbvAccessTest, MapsEachFlagOneForOne) {
  EXPECT_EQ(ToIbvAccess(0), 0);
  EXPECT_EQ(ToIbvAccess(kLocalWrite), IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(ToIbvAccess(kRemoteRead), IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(ToIbvAccess(kLocalWrite | kRemoteWrite),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(ToIbvAccess(kLocalWrite | kRemoteAtomic),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
}

TEST(ToIbvAccessTest, AddsNoLocalWriteOfItsOwn) {
  // Remote write without local write is refused before the mapping
  // (access_rules.h); the mapping itself never widens what was asked.
  EXPECT_EQ(ToIbvAccess(kRemoteWrite) & IBV_ACCESS_LOCAL_WRITE, 0);
  EXPECT_EQ(ToIbvAccess(kRemoteAtomic) & IBV_ACCESS_LOCAL_WRITE, 0);
}

}  // namespace
}  // namespace dreplay::verbs::ibverbs
