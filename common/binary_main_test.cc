// Copyright dreplay authors.

#include "common/binary_main.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace dreplay {
namespace {

BinaryOptions TestOptions() { return {"tool", "tool: does things", "binary_main_test"}; }

TEST(BinaryMainTest, ExitStatusesAreTheSameForEveryBinary) {
  EXPECT_EQ(kExitSuccess, 0);
  EXPECT_EQ(kExitFailure, 1);
  EXPECT_EQ(kExitBadFlag, 2);
}

TEST(BinaryMainTest, MessagesStartWithTheBinarysName) {
  const BinaryMain binary(TestOptions());
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(binary.BadFlag(absl::InvalidArgumentError("--x=1: must be 2")), kExitBadFlag);
  EXPECT_EQ(binary.Failure(absl::UnavailableError("gone")), kExitFailure);
  EXPECT_EQ(binary.Failure("cannot connect to h:1", absl::UnavailableError("gone")), kExitFailure);
  EXPECT_EQ(binary.Exit(kExitFailure, "plain"), kExitFailure);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "tool: --x=1: must be 2\n"
            "tool: UNAVAILABLE: gone\n"
            "tool: cannot connect to h:1: UNAVAILABLE: gone\n"
            "tool: plain\n");
}

// Init() runs in a child process each time: gflags and glog take their
// settings once per process.
void InitAndExit(const char* arg) {
  BinaryMain binary(TestOptions());
  std::string program = "tool";
  std::string argument = arg;
  char* argv[] = {program.data(), argument.data(), nullptr};
  const std::optional<int> done = binary.Init(2, argv);
  std::_Exit(done.has_value() ? *done : 100);
}

TEST(BinaryMainDeathTest, InitGoesOnWithFlagsItKnows) {
  EXPECT_EXIT(InitAndExit("--logtostderr"), ::testing::ExitedWithCode(100), "");
}

TEST(BinaryMainDeathTest, InitRefusesAnArgumentThatIsNotAFlag) {
  EXPECT_EXIT(InitAndExit("extra"), ::testing::ExitedWithCode(kExitBadFlag),
              "tool: unexpected argument \"extra\"");
}

TEST(BinaryMainDeathTest, HelpExitsWithSuccessAndUnknownFlagsWithBadFlag) {
  EXPECT_EXIT(InitAndExit("--help"), ::testing::ExitedWithCode(kExitSuccess), "");
  EXPECT_EXIT(InitAndExit("--no_such_flag=1"), ::testing::ExitedWithCode(kExitBadFlag),
              "no_such_flag");
}

}  // namespace
}  // namespace dreplay
