// Copyright dreplay authors.

#include "replay_server/checkpoint/server_checkpoints.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "replay_server/checkpoint/durable_file.h"
#include "replay_server/checkpoint/sequence_reservations.h"
#include "replay_server/clock.h"
#include "replay_server/regions.h"
#include "replay_server/replay_core.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

ServerCheckpointsOptions Options(const std::string& dir) {
  ServerCheckpointsOptions o;
  o.dir = dir;
  return o;
}

// One server on `dir`: regions, a core, and its checkpoints.
struct Server {
  explicit Server(uint64_t incarnation) {
    regions = ReplayRegions::Create(testing::SmallConfig()).value();
    ReplayCoreOptions options;
    options.incarnation = incarnation;
    core = ReplayCore::Create(regions.get(), options, &clock).value();
  }
  absl::Status Open(const std::string& dir) {
    absl::StatusOr<std::unique_ptr<ServerCheckpoints>> opened =
        ServerCheckpoints::Open(Options(dir), regions.get(), core.get());
    if (!opened.ok()) return opened.status();
    checkpoints = *std::move(opened);
    return absl::OkStatus();
  }
  // Inserts `n` transitions in lease 0, ingests them, stops with a final
  // checkpoint.
  void RunAndStop(int n) {
    for (int k = 0; k < n; ++k) testing::Insert(*regions, 1.f + k);
    core->Step();
    ASSERT_TRUE(checkpoints->Stop(/*final_checkpoint=*/true).ok());
  }

  FakeClock clock;
  std::unique_ptr<ReplayRegions> regions;
  std::unique_ptr<ReplayCore> core;
  std::unique_ptr<ServerCheckpoints> checkpoints;
};

std::string ReservationsPath(const std::string& dir) {
  return dir + "/" + SequenceReservations::kFileName;
}

TEST(ServerCheckpointsTest, ACheckpointWithoutItsReservationsIsRefusedNamingTheFile) {
  const std::string dir = TestDir("no_reservations");
  {
    Server first(11);
    ASSERT_TRUE(first.Open(dir).ok());
    first.RunAndStop(5);
  }
  ASSERT_TRUE(std::filesystem::remove(ReservationsPath(dir)));
  Server second(22);
  const absl::Status s = second.Open(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find(ReservationsPath(dir) + " is missing"), std::string::npos) << s;
  EXPECT_NE(s.message().find("to start empty"), std::string::npos) << s;

  // The way out: with the checkpoints moved away the start is a fresh one.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("replay.ckpt", 0) == 0) {
      std::filesystem::remove(entry.path());
    }
  }
  Server third(33);
  EXPECT_TRUE(third.Open(dir).ok());
  EXPECT_FALSE(third.checkpoints->restored());
}

TEST(ServerCheckpointsTest, ACheckpointWithACursorAboveItsMarkIsRefused) {
  const std::string dir = TestDir("cursor_above_mark");
  {
    Server first(11);
    ASSERT_TRUE(first.Open(dir).ok());
    first.RunAndStop(5);  // the clean stop writes the exact cursors: 5, 0, ...
  }
  // A reservations file from elsewhere, with lease 0 below the checkpoint.
  const uint32_t leases = testing::SmallConfig().leases;
  std::vector<uint64_t> marks(leases, 0);
  marks[0] = 3;
  ASSERT_TRUE(ReplaceFileDurably(ReservationsPath(dir), EncodeSequenceReservations(marks)).ok());
  Server second(22);
  const absl::Status s = second.Open(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("lease 0 at cursor 5, above its mark 3"), std::string::npos) << s;
}

TEST(ServerCheckpointsTest, ACleanRestartRestoresAndSkipsNothing) {
  const std::string dir = TestDir("clean_restart");
  {
    Server first(11);
    ASSERT_TRUE(first.Open(dir).ok());
    first.RunAndStop(5);
  }
  Server second(22);
  ASSERT_TRUE(second.Open(dir).ok());
  EXPECT_TRUE(second.checkpoints->restored());
  EXPECT_EQ(second.core->lease_cursors()[0], 5u);
  EXPECT_EQ(second.core->sequences_skipped_after_restart(), 0u);
}

TEST(ServerCheckpointsTest, TheDirectoryAndItsFilesAreTheServersAlone) {
  const std::string dir = TestDir("modes") + "/nested/checkpoints";
  {
    Server first(11);
    ASSERT_TRUE(first.Open(dir).ok());
    first.RunAndStop(2);
  }
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (const char* name : {"replay.ckpt", "sequence_reservations", "last_start"}) {
    ASSERT_EQ(stat((dir + "/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << name;
  }
}

}  // namespace
}  // namespace dreplay::server
