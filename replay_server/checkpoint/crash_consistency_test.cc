// Copyright dreplay authors.
//
// The checkpoint directory's files (checkpoints, sequence reservations, the
// start record) across crashes that lose every unsynced write, at seeded
// points of a running server's checkpoints and reservation syncs, and
// across a full disk. A killed process keeps its page cache, so only a
// simulated crash below it (testing/crash_file_system.h) tests the order of
// the fsyncs.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "replay_server/checkpoint/checkpoint.h"
#include "replay_server/checkpoint/checkpoint_store.h"
#include "replay_server/checkpoint/sequence_reservations.h"
#include "replay_server/checkpoint/server_checkpoints.h"
#include "replay_server/clock.h"
#include "replay_server/regions.h"
#include "replay_server/replay_core.h"
#include "testing/crash_file_system.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

using testing::CrashFileSystem;

constexpr char kRoot[] = "/disk";
constexpr char kDir[] = "/disk/checkpoints";
constexpr uint32_t kKeep = 2;
// Seeds of the crash test, server lifetimes per seed, core steps per lifetime.
constexpr uint64_t kSeeds = 150;
constexpr int kLifetimes = 4;
constexpr int kRounds = 120;
// A checkpoint is requested every this many rounds.
constexpr int kCheckpointEvery = 15;
// Bound of the waits for a background sync or write.
constexpr absl::Duration kWaitTimeout = absl::Seconds(10);

protocol::LayoutConfig Config() {
  protocol::LayoutConfig c = testing::SmallConfig();
  c.leases = 2;
  return c;
}

// One server process: its regions, core and checkpoint directory.
struct Lifetime {
  Lifetime(CrashFileSystem* fs, uint64_t incarnation) : fs(fs) {
    regions = ReplayRegions::Create(Config()).value();
    ReplayCoreOptions options;
    options.incarnation = incarnation;
    core = ReplayCore::Create(regions.get(), options, &clock).value();
  }
  ~Lifetime() { checkpoints.reset(); }  // its threads first

  absl::Status Open() {
    ServerCheckpointsOptions o;
    o.dir = kDir;
    o.keep = kKeep;
    o.file_system = fs;
    absl::StatusOr<std::unique_ptr<ServerCheckpoints>> opened =
        ServerCheckpoints::Open(o, regions.get(), core.get());
    if (!opened.ok()) return opened.status();
    checkpoints = *std::move(opened);
    return absl::OkStatus();
  }
  uint64_t Published(uint32_t l) const {
    return LoadAcquire(&regions->lease_line(l)->ingest_cursor);
  }
  // Plays each lease's actor: writes and commits what the published cursor
  // allows, from `next` on (at most `most` a lease).
  void WriteLeases(std::vector<uint64_t>* next, uint64_t most) {
    const uint64_t window = protocol::ActorWindow(regions->config());
    for (uint32_t l = 0; l < next->size(); ++l) {
      const uint64_t limit = Published(l) + window;
      for (uint64_t k = 0; k < most && (*next)[l] < limit; ++k, ++(*next)[l]) {
        testing::WriteLeaseSlot(*regions, l, (*next)[l], 1.f);
        testing::CommitLease(*regions, l, (*next)[l]);
      }
    }
  }
  void Step() {
    core->Step();
    checkpoints->Tick(absl::Now());
  }
  // Steps until `done` or the timeout; true if `done`.
  bool StepUntil(const std::function<bool()>& done) {
    const absl::Time deadline = absl::Now() + kWaitTimeout;
    while (!done()) {
      if (absl::Now() > deadline) return false;
      Step();
    }
    return true;
  }

  CrashFileSystem* const fs;
  FakeClock clock;
  std::unique_ptr<ReplayRegions> regions;
  std::unique_ptr<ReplayCore> core;
  std::unique_ptr<ServerCheckpoints> checkpoints;
};

// The newest checkpoint in the directory that loads, as a restart would
// find it (nullopt: none).
std::optional<CheckpointState> NewestLoadable(CrashFileSystem* fs) {
  CheckpointStoreOptions o;
  o.dir = kDir;
  o.keep = kKeep;
  o.file_system = fs;
  absl::StatusOr<CheckpointStore> store = CheckpointStore::Open(o);
  if (!store.ok()) return std::nullopt;
  for (const std::string& path : store->Candidates()) {
    std::unique_ptr<ReplayRegions> regions = ReplayRegions::Create(Config()).value();
    replay::ReplayMemoryOptions memory_options = ReplayCoreOptions().memory;
    memory_options.capacity = Config().capacity;
    std::unique_ptr<replay::ReplayMemory> memory =
        replay::ReplayMemory::Create(memory_options).value();
    CheckpointState state;
    if (ReadCheckpoint(path, regions.get(), memory.get(), &state, fs).ok()) return state;
  }
  return std::nullopt;
}

// What every lifetime so far promised: the restart must honour it.
struct Promises {
  std::vector<uint64_t> max_published;  // per lease, over every lifetime
  std::vector<uint64_t> next;           // per lease: the actor's next sequence
  uint64_t acknowledged_cut = 0;        // ingest cursor of the last checkpoint reported written
  uint64_t max_epoch = 0;
  bool published = false;       // a start completed: its cursors were visible
  uint64_t starts = 0;          // lifetimes whose start completed
  uint64_t crashed_starts = 0;  // lifetimes that crashed during their start
};

// One lifetime that crashes after `crash_after` file system changes (or at
// the end of its rounds); updates `promises`.
void RunUntilCrash(CrashFileSystem* fs, uint64_t incarnation, uint64_t crash_after,
                   Promises* promises, const std::string& where) {
  Lifetime life(fs, incarnation);
  fs->CrashAfter(crash_after);
  const absl::Status opened = life.Open();
  if (!opened.ok()) {
    // Only the crash may stop a start: the files never refuse after one.
    ASSERT_TRUE(fs->dead()) << where << ": " << opened;
    ++promises->crashed_starts;
    return;
  }
  ++promises->starts;
  const uint32_t leases = Config().leases;
  const uint64_t lease_slots = protocol::LeaseSlots(Config());
  for (uint32_t l = 0; l < leases; ++l) {
    const uint64_t cursor = life.core->lease_cursors()[l];
    // No sequence the last lifetimes may have handed out is handed out again.
    EXPECT_GE(cursor, promises->next[l]) << where << " lease " << l;
    if (promises->published) {
      EXPECT_GE(cursor, promises->max_published[l] + lease_slots) << where << " lease " << l;
    }
    promises->next[l] = cursor;
    promises->max_published[l] = std::max(promises->max_published[l], life.Published(l));
  }
  promises->published = true;
  EXPECT_GT(life.core->epoch(), promises->max_epoch) << where << ": an epoch ran twice";
  promises->max_epoch = life.core->epoch();
  for (int round = 0; round < kRounds && !fs->dead(); ++round) {
    life.WriteLeases(&promises->next, lease_slots);
    if (round % kCheckpointEvery == 0) life.checkpoints->Request();
    life.Step();
    for (uint32_t l = 0; l < leases; ++l) {
      promises->max_published[l] = std::max(promises->max_published[l], life.Published(l));
    }
    if (const auto written = life.checkpoints->last_written(); written.has_value()) {
      promises->acknowledged_cut = std::max(promises->acknowledged_cut, written->cut_ingest_cursor);
    }
  }
}

TEST(CrashConsistencyTest, NoCrashPointLosesAnAcknowledgedCheckpointOrReusesASequence) {
  uint64_t restores = 0;
  uint64_t starts = 0;
  uint64_t crashed_starts = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937_64 rng(seed);  // each seed replays alone
    CrashFileSystem fs(kRoot);
    Promises promises;
    promises.max_published.assign(Config().leases, 0);
    promises.next.assign(Config().leases, 0);
    for (int life = 0; life < kLifetimes; ++life) {
      const std::string where = absl::StrCat("seed ", seed, " lifetime ", life);
      // Crash points spread over a lifetime's changes: its start, its
      // checkpoints (write, sync, rotation) and its reservation syncs.
      const uint64_t crash_after = std::uniform_int_distribution<uint64_t>(0, 120)(rng);
      RunUntilCrash(&fs, seed * 100 + life + 1, crash_after, &promises, where);
      if (::testing::Test::HasFatalFailure()) return;
      // Odd lifetimes lose every unsynced write; even ones a random part.
      fs.Crash(life % 2 == 1 ? 0 : rng());
      const std::optional<CheckpointState> newest = NewestLoadable(&fs);
      const uint64_t restored = newest.has_value() ? newest->ingest_cursor : 0;
      restores += newest.has_value() ? 1 : 0;
      EXPECT_GE(restored, promises.acknowledged_cut)
          << where << ": a checkpoint reported written was lost";
    }
    starts += promises.starts;
    crashed_starts += promises.crashed_starts;
  }
  // The crash points did reach the interesting places.
  EXPECT_GT(restores, kSeeds);
  EXPECT_GT(starts, kSeeds);
  EXPECT_GT(crashed_starts, 0u);
  std::printf("%lu restores, %lu starts, %lu crashed starts over %lu seeds\n",
              static_cast<unsigned long>(restores), static_cast<unsigned long>(starts),
              static_cast<unsigned long>(crashed_starts), static_cast<unsigned long>(kSeeds));
}

TEST(CrashConsistencyTest, AFullDiskCorruptsNothingAndIngestResumesWhenSpaceReturns) {
  CrashFileSystem fs(kRoot);
  const uint64_t lease_slots = protocol::LeaseSlots(Config());
  std::vector<uint64_t> next(Config().leases, 0);
  auto life = std::make_unique<Lifetime>(&fs, 1);
  ASSERT_TRUE(life->Open().ok());
  // A checkpoint on a disk with room.
  life->WriteLeases(&next, 10);
  life->checkpoints->Request();
  ASSERT_TRUE(life->StepUntil([&] { return life->checkpoints->last_written().has_value(); }));
  const uint64_t good_cut = life->checkpoints->last_written()->cut_ingest_cursor;
  const std::string reservations_path = absl::StrCat(kDir, "/", SequenceReservations::kFileName);
  const std::string good_marks = ReadWholeFile(&fs, reservations_path).value();

  // The disk fills up: the next checkpoint fails, and so does every
  // reservation sync, so lease 0 stops at its synced mark.
  fs.SetSpaceLimit(fs.used_bytes());
  life->checkpoints->Request();
  ASSERT_TRUE(life->StepUntil([&] { return life->checkpoints->checkpoints_failed() == 1; }));
  const uint64_t mark = life->checkpoints->reservations().reserved(0);
  ASSERT_TRUE(life->StepUntil([&] {
    life->WriteLeases(&next, lease_slots);
    return life->core->lease_cursors()[0] >= mark - lease_slots &&
           life->checkpoints->reservations().stalls() > 0;
  })) << "lease 0 never reached its mark";
  // Nothing past the synced mark is published, and the files are the last
  // good ones, whole (no temporary file holds the space).
  EXPECT_LE(life->Published(0) + lease_slots, life->checkpoints->reservations().reserved(0));
  EXPECT_EQ(life->checkpoints->reservations().reserved(0), mark);
  EXPECT_EQ(ReadWholeFile(&fs, reservations_path).value(), good_marks);
  std::optional<CheckpointState> newest = NewestLoadable(&fs);
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->ingest_cursor, good_cut);
  for (const std::string& name : fs.List(kDir)) {
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << name << " left behind on a full disk";
  }

  // Space returns: the sync thread retries, the lease moves on, and a
  // checkpoint is written.
  fs.SetSpaceLimit(CrashFileSystem::kUnlimited);
  ASSERT_TRUE(life->StepUntil([&] {
    life->WriteLeases(&next, lease_slots);
    return life->Published(0) > mark;
  })) << "ingest did not resume";
  life->checkpoints->Request();
  const uint64_t written_before = life->core->counters().checkpoints_written;
  ASSERT_TRUE(
      life->StepUntil([&] { return life->core->counters().checkpoints_written > written_before; }));
  const uint64_t resumed_cut = life->checkpoints->last_written()->cut_ingest_cursor;
  EXPECT_GT(resumed_cut, good_cut);
  const uint64_t max_published = life->Published(0);

  // And a crash now restores the newer checkpoint, past every sequence handed out.
  life.reset();
  fs.Crash(0);
  newest = NewestLoadable(&fs);
  ASSERT_TRUE(newest.has_value());
  EXPECT_GE(newest->ingest_cursor, resumed_cut);
  Lifetime after(&fs, 2);
  ASSERT_TRUE(after.Open().ok());
  EXPECT_GE(after.core->lease_cursors()[0], max_published + lease_slots);
}

}  // namespace
}  // namespace dreplay::server
