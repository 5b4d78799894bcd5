// Copyright dreplay authors.
//
// The capability check of ibverbs_device.h against the capabilities real
// devices report (ibv_query_device), without a device.

#include <infiniband/verbs.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verbs/ibverbs_device.h"

namespace dreplay::verbs::ibverbs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// What the devices report, in the fields the check reads.
ibv_device_attr Profile(bool type2_windows, int max_mw, ibv_atomic_cap atomics) {
  ibv_device_attr attr = {};
  attr.device_cap_flags = type2_windows ? IBV_DEVICE_MEM_WINDOW_TYPE_2B : 0;
  attr.max_mw = max_mw;
  attr.atomic_cap = atomics;
  return attr;
}

TEST(MissingCapabilitiesTest, Mlx5AndRxeSince514CanServeTheProtocol) {
  EXPECT_THAT(MissingCapabilities(Profile(true, 1 << 24, IBV_ATOMIC_HCA), IBV_TRANSPORT_IB),
              IsEmpty());
  EXPECT_THAT(MissingCapabilities(Profile(true, 0x1000, IBV_ATOMIC_HCA), IBV_TRANSPORT_IB),
              IsEmpty());
}

TEST(MissingCapabilitiesTest, RxeBefore514HasNoWindows) {
  const auto missing = MissingCapabilities(Profile(false, 0, IBV_ATOMIC_HCA), IBV_TRANSPORT_IB);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_THAT(missing[0], HasSubstr("type-2 memory windows"));
}

TEST(MissingCapabilitiesTest, SiwIsIwarpWithoutWindows) {
  const auto missing = MissingCapabilities(Profile(false, 0, IBV_ATOMIC_NONE), IBV_TRANSPORT_IWARP);
  ASSERT_EQ(missing.size(), 2u);
  EXPECT_THAT(missing[0], HasSubstr("iWARP"));
  EXPECT_THAT(missing[1], HasSubstr("max_mw 0"));
}

TEST(MissingCapabilitiesTest, AFlagWithoutAnyWindowIsNotEnough) {
  EXPECT_THAT(MissingCapabilities(Profile(true, 0, IBV_ATOMIC_NONE), IBV_TRANSPORT_IB),
              ElementsAre(HasSubstr("max_mw 0")));
}

}  // namespace
}  // namespace dreplay::verbs::ibverbs
