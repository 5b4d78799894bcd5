// Copyright dreplay authors.

#include "common/verification_log.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace dreplay {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(VerificationLogTest, WritesOneLinePerRecordInTheDocumentedFormat) {
  const std::string path = TempPath("format.vlog");
  unlink(path.c_str());
  {
    auto log = VerificationLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status();
    (*log)->Started(2);
    (*log)->Ingested(3, 41, 0xabcdef);
    (*log)->Torn(4, 42);
    (*log)->CheckpointCut(1, 2, 40);
    (*log)->SlotAbsent(1, 5, 17);
    (*log)->CheckpointWritten(1);
    (*log)->CheckpointRestored(2, 40);
    (*log)->Restored(3, 41, 0xabcdef, true);
    (*log)->Accepted(3, 41, 0xabcdef, false);
    (*log)->Committed(2, 3, 41, 0xabcdef);
    EXPECT_EQ((*log)->failed_writes(), 0u);
  }
  EXPECT_EQ(ReadAll(path),
            "S 2\n"
            "I 3 41 0000000000abcdef\n"
            "T 4 42\n"
            "K 1 2 40\n"
            "D 1 5 17\n"
            "C 1\n"
            "B 2 40\n"
            "R 3 41 0000000000abcdef 1\n"
            "A 3 41 0000000000abcdef 0\n"
            "P 2 3 41 0000000000abcdef\n");
}

TEST(VerificationLogTest, AppendsToAnExistingFile) {
  const std::string path = TempPath("append.vlog");
  unlink(path.c_str());
  for (int i = 0; i < 2; ++i) {
    auto log = VerificationLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status();
    (*log)->CheckpointWritten(i + 1);
  }
  EXPECT_EQ(ReadAll(path), "C 1\nC 2\n");
}

TEST(VerificationLogTest, RecordsOfConcurrentWritersNeverInterleave) {
  const std::string path = TempPath("threads.vlog");
  unlink(path.c_str());
  constexpr int kThreads = 4;
  constexpr int kRecords = 2000;
  {
    auto log = VerificationLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kRecords; ++i) (*log)->Ingested(t, i, ~uint64_t{0});
      });
    }
    for (auto& t : threads) t.join();
  }
  const std::vector<std::string> lines = absl::StrSplit(ReadAll(path), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kRecords));
  for (const std::string& line : lines) {
    const std::vector<std::string> fields = absl::StrSplit(line, ' ');
    ASSERT_EQ(fields.size(), 4u) << line;
    EXPECT_EQ(fields[3], "ffffffffffffffff") << line;
  }
}

TEST(VerificationLogTest, RefusesAPathItCannotOpen) {
  EXPECT_FALSE(VerificationLog::Open("").ok());
  auto log = VerificationLog::Open("/nonexistent-dir/x.vlog");
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("/nonexistent-dir/x.vlog"), std::string::npos);
}

}  // namespace
}  // namespace dreplay
