// Copyright dreplay authors.

#include "common/flag_values.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dreplay {
namespace {

std::string TempFile(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << contents;
  chmod(path.c_str(), 0600);
  return path;
}

TEST(FlagErrorTest, NamesTheFlagAndItsValue) {
  const absl::Status s = FlagError("capacity", "3", "must be a power of two");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_EQ(s.message(), "--capacity=3: must be a power of two");
}

TEST(SecondsTest, TurnsZeroIntoNoLimitOnlyWhenAsked) {
  EXPECT_EQ(*Seconds("duration_s", 1.5, true), absl::Milliseconds(1500));
  EXPECT_EQ(*Seconds("duration_s", 0, true), absl::InfiniteDuration());
  EXPECT_EQ(Seconds("interval_s", 0, false).status().message(), "--interval_s=0: must be > 0");
  EXPECT_TRUE(absl::IsInvalidArgument(Seconds("interval_s", -1, true).status()));
}

TEST(CheckAtLeastAndRangeTest, NameTheBoundsTheValueMisses) {
  EXPECT_TRUE(CheckAtLeast("seed", 0, 0).ok());
  EXPECT_EQ(CheckAtLeast("seed", -1, 0).message(), "--seed=-1: must be >= 0");
  EXPECT_TRUE(CheckRange("batch_size", 8, 1, 8).ok());
  EXPECT_EQ(CheckRange("batch_size", 9, 1, 8).message(), "--batch_size=9: must be in [1, 8]");
}

TEST(SizeListTest, ParsesCommaSeparatedPositiveSizes) {
  EXPECT_EQ(*SizeList("hidden", "64,32"), (std::vector<int>{64, 32}));
  EXPECT_TRUE(SizeList("hidden", "")->empty());
  for (const char* bad : {"64,,32", "0", "a", "64,-1"}) {
    const absl::Status s = SizeList("hidden", bad).status();
    EXPECT_EQ(s.message(),
              std::string("--hidden=") + bad + ": must be a comma-separated list of sizes >= 1");
  }
}

TEST(ReadAuthTokenTest, ReadsTheFirstLineOfTheFileOrTakesTheTokenGiven) {
  EXPECT_EQ(*ReadAuthToken("inline", ""), "inline");
  EXPECT_EQ(*ReadAuthToken("", TempFile("token", "secret\r\nignored\n")), "secret");
  EXPECT_TRUE(absl::IsInvalidArgument(ReadAuthToken("a", "b").status()));
  const absl::Status missing = ReadAuthToken("", "/nonexistent/token").status();
  EXPECT_EQ(missing.message(), "--auth_token_file=/nonexistent/token: cannot be read");
}

TEST(ReadAuthTokenTest, AFileOpenToGroupOrOthersIsRefusedNamingItsMode) {
  const std::string path = TempFile("shared_token", "secret-token-0123456789\n");
  for (mode_t mode : {0640, 0604, 0660, 0644}) {
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    const absl::Status s = ReadAuthToken("", path, EmptyTokenFile::kRefused).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(s.message().find(absl::StrFormat("mode %04o", mode)), std::string::npos) << s;
    EXPECT_NE(s.message().find("chmod 600 " + path), std::string::npos) << s;
  }
  ASSERT_EQ(chmod(path.c_str(), 0400), 0);
  EXPECT_EQ(*ReadAuthToken("", path), "secret-token-0123456789");
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  const absl::Status named =
      ReadAuthToken("", "/nonexistent", EmptyTokenFile::kRefused, "learner_token_file").status();
  EXPECT_EQ(named.message(), "--learner_token_file=/nonexistent: cannot be read");
}

TEST(ReadAuthTokenTest, AnEmptyFileIsNoTokenUnlessRefused) {
  const std::string empty = TempFile("empty_token", "\n");
  EXPECT_EQ(*ReadAuthToken("", empty), "");
  const absl::Status s = ReadAuthToken("", empty, EmptyTokenFile::kRefused).status();
  EXPECT_EQ(s.message(), "--auth_token_file=" + empty + ": holds no token");
}

}  // namespace
}  // namespace dreplay
