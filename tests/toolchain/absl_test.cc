// Abseil links and works: Status, StrFormat, Mutex.
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace {

absl::StatusOr<int> ParsePositive(int x) {
  if (x <= 0) return absl::InvalidArgumentError(absl::StrFormat("%d is not positive", x));
  return x;
}

TEST(AbslToolchainTest, StatusCarriesCodeAndMessage) {
  const auto bad = ParsePositive(-3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "-3 is not positive");
  EXPECT_EQ(*ParsePositive(7), 7);
}

TEST(AbslToolchainTest, StrFormatFormatsLikePrintf) {
  EXPECT_EQ(absl::StrFormat("%08.3f|%-4s|%#x", 3.14159, "ab", 255), "0003.142|ab  |0xff");
}

TEST(AbslToolchainTest, MutexSerialisesWriters) {
  absl::Mutex mu;
  long total = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        absl::MutexLock lock(&mu);
        total += 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(total, 20000);
}

}  // namespace
