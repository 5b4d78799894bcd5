// Copyright dreplay authors.

#include "common/log_limiter.h"

#include "gtest/gtest.h"

namespace dreplay {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(LogLimiterTest, AllowsAFewLinesPerIntervalAndCountsTheRest) {
  LogLimiter limiter(3, absl::Seconds(10));
  uint64_t held = 99;
  int allowed = 0;
  for (int i = 0; i < 100000; ++i) allowed += limiter.Allow(kStart + absl::Microseconds(i), &held);
  EXPECT_EQ(allowed, 3);
  EXPECT_EQ(held, 0u);  // the first lines had nothing held back before them
  EXPECT_EQ(limiter.held_back_total(), 100000u - 3);
  // The next window's first line says how many were held back.
  ASSERT_TRUE(limiter.Allow(kStart + absl::Seconds(11), &held));
  EXPECT_EQ(held, 100000u - 3);
  ASSERT_TRUE(limiter.Allow(kStart + absl::Seconds(11), &held));
  EXPECT_EQ(held, 0u);
}

TEST(LogLimiterTest, TheNoteNamesTheCountOnlyWhenLinesWereHeldBack) {
  EXPECT_EQ(LogLimiter::HeldBackNote(0), "");
  EXPECT_EQ(LogLimiter::HeldBackNote(7), " (7 similar lines held back)");
}

}  // namespace
}  // namespace dreplay
