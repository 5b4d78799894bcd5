// Copyright dreplay authors.

#include "replay_server/invalid_priorities.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace dreplay::server {
namespace {

constexpr absl::Duration kInterval = absl::Seconds(10);

ReplayCounters Counts(uint64_t applied, uint64_t invalid) {
  ReplayCounters c;
  c.priority_updates_applied = applied;
  c.priority_updates_invalid = invalid;
  return c;
}

TEST(InvalidPriorityWarningsTest, SaysNothingWhileEveryRecordIsValid) {
  InvalidPriorityWarnings warnings(kInterval);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(warnings.Observe(Counts(0, 0), t0).has_value());
  EXPECT_FALSE(warnings.Observe(Counts(500, 0), t0 + absl::Seconds(30)).has_value());
}

TEST(InvalidPriorityWarningsTest, SaysPrioritiesAreFrozenWhenEveryRecordIsInvalid) {
  InvalidPriorityWarnings warnings(kInterval);
  const std::optional<std::string> w = warnings.Observe(Counts(0, 64), absl::FromUnixSeconds(1000));
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("64 priority records"), std::string::npos) << *w;
  EXPECT_NE(w->find("frozen"), std::string::npos) << *w;
}

TEST(InvalidPriorityWarningsTest, WarnsAtMostOncePerIntervalAboutTheRecordsSinceTheLastWarning) {
  InvalidPriorityWarnings warnings(kInterval);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(warnings.Observe(Counts(100, 3), t0).has_value());
  EXPECT_FALSE(warnings.Observe(Counts(150, 9), t0 + absl::Seconds(5)).has_value());
  const std::optional<std::string> w = warnings.Observe(Counts(300, 10), t0 + kInterval);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("sent 7 invalid priority records"), std::string::npos) << *w;
  EXPECT_NE(w->find("beside 200 applied"), std::string::npos) << *w;
  EXPECT_EQ(w->find("frozen"), std::string::npos) << *w;
  // Nothing invalid since: no warning, however long it has been.
  EXPECT_FALSE(warnings.Observe(Counts(900, 10), t0 + 10 * kInterval).has_value());
}

TEST(InvalidPriorityWarningsTest, RecordsOfARestoredRunAreNotWarnedAboutAgain) {
  InvalidPriorityWarnings warnings(kInterval);
  warnings.Baseline(Counts(1000, 40));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(warnings.Observe(Counts(1000, 40), t0).has_value());
  const std::optional<std::string> w = warnings.Observe(Counts(1000, 41), t0 + absl::Seconds(1));
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("sent 1 priority records"), std::string::npos) << *w;
}

}  // namespace
}  // namespace dreplay::server
