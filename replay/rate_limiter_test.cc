// Copyright dreplay authors.

#include "replay/rate_limiter.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace dreplay::replay {
namespace {

RateLimiterOptions Spi(double spi, uint64_t min_size, double buffer, bool block = false) {
  RateLimiterOptions o;
  o.samples_per_insert = spi;
  o.min_size_to_sample = min_size;
  o.error_buffer = buffer;
  o.block_inserts = block;
  return o;
}

TEST(RateLimiterTest, WithoutALimitOnlyTheMinimumSizeGatesSampling) {
  RateLimiter limiter(Spi(0, 100, 0));
  EXPECT_FALSE(limiter.CanSample(32, 99));
  EXPECT_TRUE(limiter.CanSample(32, 100));
  limiter.Sampled(1u << 30);
  EXPECT_TRUE(limiter.CanSample(32, 100));
  EXPECT_FALSE(limiter.InsertsBlocked(100));
}

TEST(RateLimiterTest, SampledNeverRunsMoreThanTheBufferAheadOfTheBudget) {
  constexpr double kSpi = 4;
  constexpr double kBuffer = 64;
  constexpr uint64_t kMin = 100;
  constexpr uint32_t kBatch = 32;
  RateLimiter limiter(Spi(kSpi, kMin, kBuffer));
  uint64_t size = 0;
  // An eager learner: samples whenever it may, after every insert.
  for (int i = 0; i < 10000; ++i) {
    limiter.Inserted(1);
    ++size;
    while (limiter.CanSample(kBatch, size)) limiter.Sampled(kBatch);
    if (size < kMin) {
      ASSERT_EQ(limiter.sampled(), 0u) << i;
      continue;
    }
    const double budget = kSpi * (static_cast<double>(limiter.inserted()) - kMin);
    ASSERT_LE(static_cast<double>(limiter.sampled()), budget + kBuffer) << i;
    // It keeps up: within one batch of the budget plus the buffer.
    ASSERT_GE(static_cast<double>(limiter.sampled()), budget + kBuffer - kBatch) << i;
  }
  EXPECT_NEAR(limiter.achieved_samples_per_insert(), kSpi * (10000.0 - kMin) / 10000.0, 0.05);
}

TEST(RateLimiterTest, InsertsBlockOnlyWhenAskedAndWhenTheyRunAhead) {
  RateLimiter lenient(Spi(2, 10, 16));
  lenient.Inserted(1000);
  EXPECT_FALSE(lenient.InsertsBlocked(1000));

  RateLimiter strict(Spi(2, 10, 16, /*block=*/true));
  strict.Inserted(18);  // budget 16: not more than the buffer ahead
  EXPECT_FALSE(strict.InsertsBlocked(18));
  strict.Inserted(1);  // budget 18 > 0 + 16
  EXPECT_TRUE(strict.InsertsBlocked(19));
  strict.Sampled(8);
  EXPECT_FALSE(strict.InsertsBlocked(19));
}

TEST(RateLimiterTest, InsertsNeverBlockWhileTheMemoryIsBelowTheMinimumSize) {
  // Far ahead of the budget, but the memory shrank (evictions ahead of an
  // actor's window) below the size sampling needs: only inserts can refill
  // it, so they go on.
  RateLimiter limiter(Spi(4, 100, 32, /*block=*/true));
  limiter.Inserted(200);  // budget 400, nothing sampled
  EXPECT_TRUE(limiter.InsertsBlocked(100));
  EXPECT_FALSE(limiter.CanSample(32, 99));
  EXPECT_FALSE(limiter.InsertsBlocked(99));
  EXPECT_FALSE(limiter.InsertsBlocked(0));
}

TEST(RateLimiterTest, ResetRestoresCounts) {
  RateLimiter limiter(Spi(1, 1, 8));
  limiter.Reset(100, 90);
  EXPECT_EQ(limiter.inserted(), 100u);
  EXPECT_EQ(limiter.sampled(), 90u);
  EXPECT_DOUBLE_EQ(limiter.achieved_samples_per_insert(), 0.9);
  EXPECT_TRUE(limiter.CanSample(8, 100));    // 98 <= 99 + 8
  EXPECT_FALSE(limiter.CanSample(18, 100));  // 108 > 107
}

TEST(RateLimiterOptionsTest, ValidateNamesTheBadField) {
  EXPECT_TRUE(Spi(4, 1, 32).Validate(32).ok());
  EXPECT_TRUE(Spi(0, 1, 0).Validate(32).ok());
  EXPECT_NE(Spi(-1, 1, 32).Validate(32).message().find("samples_per_insert=-1"), std::string::npos);
  EXPECT_NE(Spi(4, 0, 32).Validate(32).message().find("min_size_to_sample=0"), std::string::npos);
  EXPECT_NE(Spi(4, 1, 31).Validate(32).message().find("spi_error_buffer=31"), std::string::npos);
}

}  // namespace
}  // namespace dreplay::replay
