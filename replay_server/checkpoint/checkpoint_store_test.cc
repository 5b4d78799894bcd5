// Copyright dreplay authors.

#include "replay_server/checkpoint/checkpoint_store.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace dreplay::server {
namespace {

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A writer that puts `contents` at the path it is given.
auto Writes(const std::string& contents) {
  return [contents](const std::string& path) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << contents;
    out.close();
    return out ? absl::OkStatus() : absl::InternalError("cannot write " + path);
  };
}

TEST(CheckpointStoreTest, KeepsTheNewestCheckpointsNewestFirst) {
  auto store = CheckpointStore::Open({TestDir("keep3"), 3});
  ASSERT_TRUE(store.ok()) << store.status();
  for (const char* contents : {"1", "2", "3", "4", "5"}) {
    ASSERT_TRUE(store->Save(Writes(contents)).ok());
  }
  EXPECT_EQ(ReadFile(store->LatestPath()), "5");
  EXPECT_EQ(ReadFile(store->OlderPath(1)), "4");
  EXPECT_EQ(ReadFile(store->OlderPath(2)), "3");
  EXPECT_FALSE(Exists(store->OlderPath(3)));
  EXPECT_FALSE(Exists(store->NewPath()));
  EXPECT_EQ(store->Candidates(), (std::vector<std::string>{store->LatestPath(), store->OlderPath(1),
                                                           store->OlderPath(2)}));
}

TEST(CheckpointStoreTest, KeepingOneReplacesTheCheckpointInPlace) {
  auto store = CheckpointStore::Open({TestDir("keep1"), 1});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(store->Candidates().empty());
  ASSERT_TRUE(store->Save(Writes("a")).ok());
  ASSERT_TRUE(store->Save(Writes("b")).ok());
  EXPECT_EQ(ReadFile(store->LatestPath()), "b");
  EXPECT_FALSE(Exists(store->OlderPath(1)));
  EXPECT_EQ(store->Candidates(), std::vector<std::string>{store->LatestPath()});
}

TEST(CheckpointStoreTest, AFailedWriteLeavesTheKeptCheckpointsAsTheyWere) {
  auto store = CheckpointStore::Open({TestDir("failed"), 2});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(store->Save(Writes("old")).ok());
  ASSERT_TRUE(store->Save(Writes("new")).ok());
  const absl::Status s =
      store->Save([](const std::string&) { return absl::InternalError("disk full"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ReadFile(store->LatestPath()), "new");
  EXPECT_EQ(ReadFile(store->OlderPath(1)), "old");
}

TEST(CheckpointStoreTest, ACheckpointLeftBeforeItsRenameIsTheNewestCandidate) {
  auto store = CheckpointStore::Open({TestDir("interrupted"), 2});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(store->Save(Writes("saved")).ok());
  ASSERT_TRUE(Writes("written, not yet renamed")(store->NewPath()).ok());
  EXPECT_EQ(store->Candidates(), (std::vector<std::string>{store->NewPath(), store->LatestPath()}));
}

TEST(CheckpointStoreTest, TheStartRecordIsAbsentAtFirstAndRoundTrips) {
  auto store = CheckpointStore::Open({TestDir("start"), 1});
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::optional<StartRecord>> none = store->ReadStartRecord();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(store->WriteStartRecord({0xfeedfacecafebeefULL, 7}).ok());
  ASSERT_TRUE(store->WriteStartRecord({0x0123456789abcdefULL, 8}).ok());  // replaces it
  absl::StatusOr<std::optional<StartRecord>> record = store->ReadStartRecord();
  ASSERT_TRUE(record.ok()) << record.status();
  ASSERT_TRUE(record->has_value());
  EXPECT_EQ((*record)->incarnation, 0x0123456789abcdefULL);
  EXPECT_EQ((*record)->epoch, 8u);
}

TEST(CheckpointStoreTest, ADamagedStartRecordIsDataLoss) {
  const std::string dir = TestDir("damaged_start");
  auto store = CheckpointStore::Open({dir, 1});
  ASSERT_TRUE(store.ok()) << store.status();
  for (const char* damaged : {"", "dreplay start incarnation=zz epoch=1\n",
                              "dreplay start incarnation=1 epoch=-2\n", "something else\n"}) {
    ASSERT_TRUE(Writes(damaged)(dir + "/last_start").ok());
    EXPECT_EQ(store->ReadStartRecord().status().code(), absl::StatusCode::kDataLoss) << damaged;
  }
}

absl::StatusCode OpenCode(const std::string& dir, uint32_t keep) {
  CheckpointStoreOptions options;
  options.dir = dir;
  options.keep = keep;
  return CheckpointStore::Open(options).status().code();
}

TEST(CheckpointStoreTest, OpenRefusesABadKeepOrNoDirectory) {
  EXPECT_EQ(OpenCode(TestDir("zero"), 0), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenCode(TestDir("many"), kMaxCheckpointKeep + 1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenCode("", 1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenCode(TestDir("fine"), kMaxCheckpointKeep), absl::StatusCode::kOk);
}

}  // namespace
}  // namespace dreplay::server
