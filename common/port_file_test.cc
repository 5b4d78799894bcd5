// Copyright dreplay authors.

#include "common/port_file.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace dreplay {
namespace {

TEST(PortFileTest, WritesThePortAndANewlineAndLeavesNoTemporaryFile) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/server.port";
  ASSERT_TRUE(WritePortFile(path, 41234).ok());
  ASSERT_TRUE(WritePortFile(path, 5).ok());  // replaced whole
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "5\n");
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
}

TEST(PortFileTest, NamesTheFileItCannotWrite) {
  const absl::Status s = WritePortFile("/nonexistent-dir/x.port", 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("/nonexistent-dir/x.port.tmp"), std::string::npos) << s;
}

}  // namespace
}  // namespace dreplay
