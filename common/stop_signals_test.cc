// Copyright dreplay authors.

#include "common/stop_signals.h"

#include <signal.h>

#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dreplay {
namespace {

// Long enough never to pass on a loaded machine when the wait should end at
// once; short enough to keep the tests quick when it should time out.
constexpr absl::Duration kLongWait = absl::Seconds(30);
constexpr absl::Duration kShortWait = absl::Milliseconds(20);

TEST(StopSignalsTest, FlagThenDefaultSetsTheFlagOnTheFirstSignal) {
  StopSignals signals;
  EXPECT_FALSE(signals.requested());
  EXPECT_FALSE(signals.WaitFor(kShortWait));
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_TRUE(signals.flag().load());
  EXPECT_EQ(signals.signal_number(), SIGTERM);
  const absl::Time start = absl::Now();
  EXPECT_TRUE(signals.WaitFor(kLongWait));
  EXPECT_LT(absl::Now() - start, kLongWait);
}

TEST(StopSignalsTest, WaitForWakesWhenAnotherThreadRequestsAStop) {
  StopSignals signals;
  std::thread stopper([&] { signals.RequestStop(); });
  EXPECT_TRUE(signals.WaitFor(kLongWait));
  stopper.join();
  EXPECT_EQ(signals.signal_number(), 0);
}

TEST(StopSignalsTest, FlagThenDefaultLetsASecondSignalEndTheProcess) {
  EXPECT_EXIT(
      {
        StopSignals signals;
        raise(SIGINT);
        raise(SIGINT);
        std::_Exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGINT), "");
}

TEST(StopSignalsTest, BlockAndWaitTakesTheSignalInWait) {
  StopSignals signals(StopSignals::Mode::kBlockAndWait);
  ASSERT_EQ(raise(SIGINT), 0);  // blocked: pending until Wait()
  signals.Wait();
  EXPECT_TRUE(signals.requested());
  EXPECT_EQ(signals.signal_number(), SIGINT);
}

TEST(StopSignalsTest, BlockAndWaitTakesSIGUSR1AsARequestThatDoesNotStop) {
  StopSignals signals(StopSignals::Mode::kBlockAndWait);
  ASSERT_EQ(raise(SIGUSR1), 0);  // blocked: pending, and never fatal
  EXPECT_EQ(signals.WaitForEvent(kLongWait), StopSignals::Event::kRequest);
  EXPECT_FALSE(signals.requested());
  EXPECT_EQ(signals.WaitForEvent(kShortWait), StopSignals::Event::kTimeout);
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(signals.WaitForEvent(kLongWait), StopSignals::Event::kStop);
  EXPECT_EQ(signals.signal_number(), SIGTERM);
}

TEST(StopSignalsTest, BlockAndWaitDiscardsSignalsThatCameWhileStopping) {
  EXPECT_EXIT(
      {
        {
          StopSignals signals(StopSignals::Mode::kBlockAndWait);
          raise(SIGTERM);
          signals.Wait();
          raise(SIGTERM);  // while stopping: must not end the process
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(StopSignalsTest, GivesTheSignalsBackWhenDestroyed) {
  struct sigaction before = {};
  sigaction(SIGTERM, nullptr, &before);
  { StopSignals signals; }
  struct sigaction after = {};
  sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  // A new one starts without a stop request.
  StopSignals again;
  EXPECT_FALSE(again.requested());
}

}  // namespace
}  // namespace dreplay
