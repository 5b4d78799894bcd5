// Copyright dreplay authors.

#include "verbs/send_queue_accounting.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay::verbs {
namespace {

// Plans and posts `n` requests with the caller's `user_signaled`; the device
// takes them all. Returns which were signalled on the wire.
std::vector<bool> PostAll(SendQueueAccounting* sq, int n, bool user_signaled) {
  std::vector<bool> wire;
  for (int i = 0; i < n; ++i) wire.push_back(sq->PlanNext(user_signaled, i + 1 == n));
  sq->EndPost(n);
  return wire;
}

// A device that has executed everything outstanding: it writes a completion
// for each signalled request, in order. Returns how many it wrote.
int CompleteEverything(SendQueueAccounting* sq) {
  int completions = 0;
  for (uint64_t seq = sq->retired(); seq < sq->posted(); ++seq) {
    if (!sq->IsSignaled(seq)) continue;
    EXPECT_TRUE(sq->Retire(seq));
    ++completions;
  }
  return completions;
}

TEST(SendQueueAccountingTest, TrailingUnsignalledRequestIsRetiredSoAFullSpanFitsLater) {
  // The case that stuck: a short unsignalled post, then a span as large as
  // the queue. Before, the unsignalled request was never retired (nothing
  // signalled followed it), so the span was refused forever.
  SendQueueAccounting sq(/*capacity=*/8, /*signal_every=*/2);
  PostAll(&sq, 1, /*user_signaled=*/false);
  EXPECT_EQ(sq.uncovered(), 0u);
  EXPECT_EQ(CompleteEverything(&sq), 1);
  EXPECT_EQ(sq.outstanding(), 0u);
  EXPECT_TRUE(sq.CheckRoom(8).ok());
}

TEST(SendQueueAccountingTest, SignalsTheLastRequestOfEveryPost) {
  SendQueueAccounting sq(16, 4);
  const std::vector<bool> wire = PostAll(&sq, 3, /*user_signaled=*/false);
  EXPECT_EQ(wire, (std::vector<bool>{false, false, true}));
}

TEST(SendQueueAccountingTest, SignalsOneInEverySignalEveryWithinALongPost) {
  SendQueueAccounting sq(16, 4);
  const std::vector<bool> wire = PostAll(&sq, 10, /*user_signaled=*/false);
  EXPECT_EQ(wire,
            (std::vector<bool>{false, false, false, true, false, false, false, true, false, true}));
}

TEST(SendQueueAccountingTest, KeepsTheCallersSignals) {
  SendQueueAccounting sq(16, 4);
  const std::vector<bool> wire = PostAll(&sq, 3, /*user_signaled=*/true);
  EXPECT_EQ(wire, (std::vector<bool>{true, true, true}));
}

TEST(SendQueueAccountingTest, RefusesASpanLargerThanTheFreeRoom) {
  SendQueueAccounting sq(8, 2);
  PostAll(&sq, 5, true);
  EXPECT_TRUE(sq.CheckRoom(3).ok());
  EXPECT_EQ(sq.CheckRoom(4).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(sq.CheckRoom(9).code(), absl::StatusCode::kResourceExhausted);
}

TEST(SendQueueAccountingTest, ACompletionRetiresEverythingBeforeIt) {
  SendQueueAccounting sq(8, 8);
  PostAll(&sq, 4, false);  // only seq 3 is signalled
  EXPECT_EQ(sq.outstanding(), 4u);
  EXPECT_TRUE(sq.Retire(3));
  EXPECT_EQ(sq.outstanding(), 0u);
}

TEST(SendQueueAccountingTest, IgnoresStaleCompletions) {
  SendQueueAccounting sq(8, 2);
  PostAll(&sq, 2, true);
  EXPECT_TRUE(sq.Retire(1));
  EXPECT_FALSE(sq.Retire(0));  // already retired
  EXPECT_FALSE(sq.Retire(2));  // never posted
  EXPECT_EQ(sq.retired(), 2u);
}

TEST(SendQueueAccountingTest, APartialPostReportsItsUncoveredTail) {
  SendQueueAccounting sq(8, 8);
  for (int i = 0; i < 4; ++i) sq.PlanNext(/*user_signaled=*/i == 0, i == 3);
  sq.EndPost(3);  // the device refused the signalled last request
  EXPECT_EQ(sq.posted(), 3u);
  EXPECT_EQ(sq.uncovered(), 2u);  // seq 1 and 2 follow the signalled seq 0
  sq.RetireAll();
  EXPECT_EQ(sq.outstanding(), 0u);
  EXPECT_EQ(sq.uncovered(), 0u);
}

TEST(SendQueueAccountingTest, NeverSticksUnderRandomPostsAndSignals) {
  // Whatever the caller posts and signals, once the device has executed
  // everything the whole queue is free again.
  std::mt19937 rng(12);
  for (const int capacity : {1, 2, 7, 64, 256}) {
    SendQueueAccounting sq(capacity, std::max(1, std::min(64, capacity / 4)));
    for (int round = 0; round < 500; ++round) {
      const int n = std::uniform_int_distribution<int>(1, capacity)(rng);
      if (!sq.CheckRoom(n).ok()) {
        CompleteEverything(&sq);
        ASSERT_EQ(sq.outstanding(), 0u) << "capacity " << capacity << " round " << round;
        ASSERT_TRUE(sq.CheckRoom(n).ok());
      }
      for (int i = 0; i < n; ++i) sq.PlanNext(rng() % 3 == 0, i + 1 == n);
      sq.EndPost(n);
      ASSERT_EQ(sq.uncovered(), 0u);
    }
  }
}

}  // namespace
}  // namespace dreplay::verbs
