// Copyright dreplay authors.

#include "testing/crash_file_system.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "replay_server/checkpoint/durable_file.h"

namespace dreplay::testing {
namespace {

constexpr char kRoot[] = "/crash";

std::string Read(CrashFileSystem* fs, const std::string& path) {
  absl::StatusOr<std::string> text = server::ReadWholeFile(fs, path);
  return text.ok() ? *text
                   : "<" + std::string(absl::StatusCodeToString(text.status().code())) + ">";
}

void WriteUnsynced(CrashFileSystem* fs, const std::string& path, const std::string& text) {
  auto file = fs->NewWritableFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append(text).ok());
  ASSERT_TRUE((*file)->Close().ok());
}

TEST(CrashFileSystemTest, ACrashDropsUnsyncedBytesAndNames) {
  CrashFileSystem fs(kRoot);
  WriteUnsynced(&fs, "/crash/a", "never synced");
  ASSERT_TRUE(fs.SyncDirectory(kRoot).ok());  // the name is durable, the bytes are not
  WriteUnsynced(&fs, "/crash/b", "no name either");
  EXPECT_EQ(Read(&fs, "/crash/a"), "never synced");
  fs.Crash(0);
  EXPECT_EQ(Read(&fs, "/crash/a"), "");
  EXPECT_EQ(Read(&fs, "/crash/b"), "<NOT_FOUND>");
}

TEST(CrashFileSystemTest, AReplacedFileIsTheOldOrTheNewOneAfterAnyCrash) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    CrashFileSystem fs(kRoot);
    ASSERT_TRUE(server::ReplaceFileDurably("/crash/f", "old", &fs).ok());
    fs.CrashAfter(seed % 6);  // somewhere in the next replacement
    (void)server::ReplaceFileDurably("/crash/f", "new", &fs);
    fs.Crash(seed);
    const std::string text = Read(&fs, "/crash/f");
    EXPECT_TRUE(text == "old" || text == "new") << "seed " << seed << ": " << text;
  }
}

TEST(CrashFileSystemTest, ARenameWithoutADirectorySyncMayBeLost) {
  CrashFileSystem fs(kRoot);
  auto file = fs.NewWritableFile("/crash/f.tmp");
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Append("x").ok());
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE((*file)->Close().ok());
  ASSERT_TRUE(fs.Rename("/crash/f.tmp", "/crash/f").ok());
  fs.Crash(0);
  EXPECT_EQ(fs.List(kRoot), std::vector<std::string>());
}

TEST(CrashFileSystemTest, ANewDirectoryIsLostUnlessItsParentIsSynced) {
  CrashFileSystem fs(kRoot);
  ASSERT_TRUE(fs.CreateDirectory("/crash/d").ok());
  ASSERT_TRUE(server::ReplaceFileDurably("/crash/d/f", "x", &fs).ok());
  fs.Crash(0);
  EXPECT_FALSE(fs.IsDirectory("/crash/d"));
  ASSERT_TRUE(server::CreateDirectoryDurably("/crash/d/e", &fs).ok());
  ASSERT_TRUE(server::ReplaceFileDurably("/crash/d/e/f", "x", &fs).ok());
  fs.Crash(0);
  EXPECT_EQ(Read(&fs, "/crash/d/e/f"), "x");
}

TEST(CrashFileSystemTest, AfterTheCrashPointEveryChangeFails) {
  CrashFileSystem fs(kRoot);
  fs.CrashAfter(1);
  auto file = fs.NewWritableFile("/crash/f");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->Append("x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fs.SyncDirectory(kRoot).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(fs.dead());
}

TEST(CrashFileSystemTest, AFullDiskWritesWhatFitsAndSaysSo) {
  CrashFileSystem fs(kRoot);
  fs.SetSpaceLimit(10);
  auto file = fs.NewWritableFile("/crash/f");
  ASSERT_TRUE(file.ok());
  const absl::Status s = (*file)->Append("0123456789abc");
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s;
  EXPECT_EQ(Read(&fs, "/crash/f"), "0123456789");
  EXPECT_EQ(fs.used_bytes(), 10u);
  // A failed replacement removes its temporary file: the space comes back.
  file->reset();
  ASSERT_TRUE(fs.Remove("/crash/f").ok());
  ASSERT_TRUE(server::ReplaceFileDurably("/crash/g", "12345678", &fs).ok());
  EXPECT_FALSE(server::ReplaceFileDurably("/crash/g", "123456789", &fs).ok());
  EXPECT_EQ(Read(&fs, "/crash/g"), "12345678");
  EXPECT_FALSE(fs.Exists("/crash/g.tmp"));
  fs.SetSpaceLimit(CrashFileSystem::kUnlimited);
  EXPECT_TRUE(server::ReplaceFileDurably("/crash/g", "123456789", &fs).ok());
}

}  // namespace
}  // namespace dreplay::testing
