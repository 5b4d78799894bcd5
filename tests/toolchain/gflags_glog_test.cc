// gflags parses a command line; glog delivers messages to a sink.
#include <string>
#include <vector>

#include "gflags/gflags.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

DEFINE_int32(toolchain_depth, 4, "a test flag");
DEFINE_string(toolchain_name, "none", "a test flag");

namespace {

TEST(GflagsToolchainTest, ParsesFlagsAndLeavesPositionalArguments) {
  std::vector<std::string> args = {"prog", "--toolchain_depth=16", "--toolchain_name=rc",
                                   "positional"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  char** argvp = argv.data();
  gflags::ParseCommandLineFlags(&argc, &argvp, /*remove_flags=*/true);
  EXPECT_EQ(FLAGS_toolchain_depth, 16);
  EXPECT_EQ(FLAGS_toolchain_name, "rc");
  ASSERT_EQ(argc, 2);
  EXPECT_STREQ(argvp[1], "positional");
}

TEST(GflagsToolchainTest, RejectsAnUnparsableValue) {
  std::string error = gflags::SetCommandLineOption("toolchain_depth", "not-a-number");
  EXPECT_TRUE(error.empty());  // empty result means the value was refused
  EXPECT_NE(FLAGS_toolchain_depth, 0);
}

class CapturingSink : public google::LogSink {
 public:
  void send(google::LogSeverity severity, const char* full_filename, const char* base_filename,
            int line, const struct ::tm* tm_time, const char* message,
            size_t message_len) override {
    messages.emplace_back(message, message_len);
    severities.push_back(severity);
  }
  std::vector<std::string> messages;
  std::vector<google::LogSeverity> severities;
};

TEST(GlogToolchainTest, DeliversMessagesToASink) {
  CapturingSink sink;
  google::AddLogSink(&sink);
  LOG(WARNING) << "queue pair " << 7 << " moved to error";
  google::RemoveLogSink(&sink);
  ASSERT_EQ(sink.messages.size(), 1u);
  EXPECT_EQ(sink.messages[0], "queue pair 7 moved to error");
  EXPECT_EQ(sink.severities[0], google::GLOG_WARNING);
}

}  // namespace
