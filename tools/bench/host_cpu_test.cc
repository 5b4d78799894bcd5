// Copyright dreplay authors.

#include "tools/bench/host_cpu.h"

#include <chrono>

#include "gtest/gtest.h"

namespace dreplay::tools {
namespace {

TEST(HostCpuTest, CountsTheBusyTimeOfThisThread) {
  const absl::StatusOr<double> before = HostBusyCpuSeconds();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(*before, 0);
  // Half a second of this thread's work must show (ticks are 10 ms).
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  volatile uint64_t spins = 0;
  while (std::chrono::steady_clock::now() < until) spins = spins + 1;
  const absl::StatusOr<double> after = HostBusyCpuSeconds();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(*after - *before, 0.25);  // less what a hypervisor may steal
}

}  // namespace
}  // namespace dreplay::tools
