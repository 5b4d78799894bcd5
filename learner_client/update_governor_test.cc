// Copyright dreplay authors.

#include "learner_client/update_governor.h"

#include "gtest/gtest.h"

namespace dreplay::learner {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(UpdateGovernorTest, WithoutARateNothingWaits) {
  UpdateGovernor governor(0, kStart);
  for (int i = 0; i < 100; ++i) governor.Updated(kStart);
  EXPECT_EQ(governor.Delay(kStart), absl::ZeroDuration());
}

TEST(UpdateGovernorTest, SpacesUpdatesByOneOverTheRate) {
  UpdateGovernor governor(100, kStart);  // every 10 ms
  EXPECT_EQ(governor.Delay(kStart), absl::ZeroDuration());
  governor.Updated(kStart);
  EXPECT_EQ(governor.Delay(kStart + absl::Milliseconds(4)), absl::Milliseconds(6));
  EXPECT_EQ(governor.Delay(kStart + absl::Milliseconds(10)), absl::ZeroDuration());
  governor.Updated(kStart + absl::Milliseconds(10));
  EXPECT_EQ(governor.Delay(kStart + absl::Milliseconds(10)), absl::Milliseconds(10));
}

TEST(UpdateGovernorTest, ALearnerThatFellBehindCatchesUpByAtMostTheBurst) {
  UpdateGovernor governor(100, kStart, /*burst=*/3);
  governor.Updated(kStart);
  const absl::Time later = kStart + absl::Seconds(1);  // 99 updates missed
  int at_once = 0;
  while (governor.Delay(later) == absl::ZeroDuration()) {
    governor.Updated(later);
    ASSERT_LE(++at_once, 10);
  }
  EXPECT_EQ(at_once, 3);
  EXPECT_EQ(governor.Delay(later), absl::Milliseconds(10));
}

TEST(UpdateGovernorTest, AnEagerLearnerRunsAtTheRate) {
  // A learner that updates whenever allowed, on a clock stepping 1 ms.
  UpdateGovernor governor(250, kStart);
  int updates = 0;
  for (absl::Time t = kStart; t < kStart + absl::Seconds(2); t += absl::Milliseconds(1)) {
    if (governor.Delay(t) == absl::ZeroDuration()) {
      governor.Updated(t);
      ++updates;
    }
  }
  EXPECT_EQ(updates, 500);
}

}  // namespace
}  // namespace dreplay::learner
