// Copyright dreplay authors.

#include "replay_server/checkpoint/sequence_reservations.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dreplay::server {
namespace {

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

SequenceReservationsOptions Options(const std::string& dir) {
  SequenceReservationsOptions o;
  o.path = dir + "/" + SequenceReservations::kFileName;
  o.leases = 3;
  o.lease_slots = 100;
  o.step_leases = 4;
  return o;
}

TEST(SequenceReservationsTest, AMissingFileIsAnEmptyTable) {
  auto table = SequenceReservations::Open(Options(TestDir("missing")));
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_FALSE((*table)->loaded());
  for (uint32_t l = 0; l < 3; ++l) {
    EXPECT_EQ((*table)->floor(l), 0u);
    EXPECT_EQ((*table)->reserved(l), 0u);
  }
}

TEST(SequenceReservationsTest, ReserveGrowsByTheStepAndSyncsOnlyWhenNeeded) {
  const SequenceReservationsOptions o = Options(TestDir("grow"));
  auto table = SequenceReservations::Open(o);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_TRUE((*table)->ReserveAll({100, 100, 100}).ok());
  EXPECT_EQ((*table)->reserved(0), 500u);  // needed + 4 * 100
  EXPECT_EQ((*table)->syncs(), 1u);
  for (uint64_t needed = 101; needed <= 500; ++needed) {
    ASSERT_TRUE((*table)->Reserve(1, needed).ok());
  }
  EXPECT_EQ((*table)->syncs(), 1u) << "within the mark: no write";
  ASSERT_TRUE((*table)->Reserve(1, 501).ok());
  EXPECT_EQ((*table)->reserved(1), 901u);
  EXPECT_EQ((*table)->syncs(), 2u);
  EXPECT_FALSE(std::filesystem::exists(o.path + ".tmp")) << "the temp file is renamed";

  // A new table reads the persisted marks as its floors.
  auto reopened = SequenceReservations::Open(o);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_TRUE((*reopened)->loaded());
  EXPECT_EQ((*reopened)->floor(0), 500u);
  EXPECT_EQ((*reopened)->floor(1), 901u);
  EXPECT_EQ((*reopened)->floor(2), 500u);
}

// Waits for `condition`, at most kSyncTimeout.
constexpr absl::Duration kSyncTimeout = absl::Seconds(30);
bool WaitUntil(const std::function<bool()>& condition) {
  const absl::Time deadline = absl::Now() + kSyncTimeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(SequenceReservationsTest, PublishableAsksAheadAndItsThreadSyncsTheNextMark) {
  const SequenceReservationsOptions o = Options(TestDir("ahead"));
  auto opened = SequenceReservations::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  SequenceReservations& table = **opened;
  ASSERT_TRUE(table.ReserveAll({100, 100, 100}).ok());  // marks 500: cursors up to 400
  EXPECT_EQ(table.Publishable(0, 0), 0u);
  EXPECT_EQ(table.Publishable(0, 100), 100u);
  EXPECT_EQ(table.syncs(), 1u) << "headroom above half a step: nothing asked";
  // Headroom 500 - (250 + 100) < 400 / 2: the next mark is asked for.
  EXPECT_EQ(table.Publishable(0, 250), 250u) << "published at once, not after the sync";
  // The sync thread raises the mark, then counts the sync: wait for both.
  ASSERT_TRUE(
      WaitUntil([&] { return table.reserved(0) == 750u && table.sync_generation() == 1u; }));
  EXPECT_EQ(table.syncs(), 2u);
  EXPECT_EQ(table.stalls(), 0u);
  auto reopened = SequenceReservations::Open(o);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->floor(0), 750u) << "the mark counts once the file holds it";
  EXPECT_EQ((*reopened)->floor(1), 500u);
}

TEST(SequenceReservationsTest, ALeaseWaitsAtItsSyncedMarkUntilTheSyncIsInPlace) {
  const std::string dir = TestDir("stall");
  const SequenceReservationsOptions o = Options(dir);
  auto opened = SequenceReservations::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  SequenceReservations& table = **opened;
  ASSERT_TRUE(table.ReserveAll({100, 100, 100}).ok());  // marks 500
  // The syncs fail while the directory is gone (even for root).
  std::filesystem::remove_all(dir);
  EXPECT_EQ(table.Publishable(1, 450), 400u) << "held at the synced mark - L";
  EXPECT_EQ(table.Publishable(1, 460), 400u);
  EXPECT_EQ(table.stalls(), 1u) << "one stall, however many steps it lasts";
  EXPECT_EQ(table.reserved(1), 500u);
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WaitUntil([&] { return table.sync_generation() >= 1; }));
  EXPECT_GE(table.reserved(1), 460u + 100u);
  EXPECT_EQ(table.Publishable(1, 460), 460u);
  EXPECT_EQ(table.stalls(), 1u);
  ASSERT_TRUE(table.WriteExact({1, 2, 3}).ok()) << "stops the thread, then writes";
  auto reopened = SequenceReservations::Open(o);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->floor(1), 2u);
}

TEST(SequenceReservationsTest, WriteExactLowersTheMarksForACleanStop) {
  const SequenceReservationsOptions o = Options(TestDir("exact"));
  auto table = SequenceReservations::Open(o);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_TRUE((*table)->ReserveAll({100, 100, 100}).ok());
  ASSERT_TRUE((*table)->WriteExact({7, 0, 42}).ok());
  auto reopened = SequenceReservations::Open(o);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->floor(0), 7u);
  EXPECT_EQ((*reopened)->floor(1), 0u);
  EXPECT_EQ((*reopened)->floor(2), 42u);
}

TEST(SequenceReservationsTest, ADamagedFileIsRefusedNamingIt) {
  const SequenceReservationsOptions o = Options(TestDir("damaged"));
  {
    auto table = SequenceReservations::Open(o);
    ASSERT_TRUE(table.ok()) << table.status();
    ASSERT_TRUE((*table)->ReserveAll({100, 200, 300}).ok());
  }
  const std::string good = ReadFile(o.path);
  ASSERT_FALSE(good.empty());

  std::string flipped = good;
  flipped[flipped.find("leases 3") + 9] = '9';  // a mark's first digit
  WriteFile(o.path, flipped);
  auto bad = SequenceReservations::Open(o);
  ASSERT_TRUE(absl::IsDataLoss(bad.status())) << bad.status();
  EXPECT_NE(bad.status().message().find(o.path), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("checksum does not match"), std::string::npos)
      << bad.status();

  WriteFile(o.path, good.substr(0, good.size() / 2));  // cut short
  EXPECT_TRUE(absl::IsDataLoss(SequenceReservations::Open(o).status()));
  WriteFile(o.path, "");
  EXPECT_TRUE(absl::IsDataLoss(SequenceReservations::Open(o).status()));

  // The good bytes load again.
  WriteFile(o.path, good);
  auto table = SequenceReservations::Open(o);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ((*table)->floor(2), 700u);
}

TEST(SequenceReservationsTest, AFileForAnotherLeaseCountIsRefused) {
  const SequenceReservationsOptions o = Options(TestDir("count"));
  WriteFile(o.path, EncodeSequenceReservations({1, 2}));
  auto table = SequenceReservations::Open(o);
  EXPECT_TRUE(absl::IsFailedPrecondition(table.status())) << table.status();
}

TEST(SequenceReservationsTest, AFailedWriteKeepsTheLastGoodMarks) {
  SequenceReservationsOptions o = Options(TestDir("unwritable"));
  o.path = o.path + "/no/such/dir/file";
  auto table = SequenceReservations::Open(o);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_FALSE((*table)->Reserve(0, 10).ok());
  EXPECT_EQ((*table)->reserved(0), 0u) << "nothing counts as reserved unless persisted";
}

TEST(SequenceReservationsTest, ValidateNamesTheBadField) {
  SequenceReservationsOptions o = Options("/tmp");
  o.step_leases = 0;
  const absl::Status s = o.Validate();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("step_leases=0"), std::string::npos) << s;
}

TEST(SequenceReservationsTest, DecodeRoundTrips) {
  const std::vector<uint64_t> marks = {0, 1, ~uint64_t{0}};
  auto decoded = DecodeSequenceReservations(EncodeSequenceReservations(marks));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, marks);
}

}  // namespace
}  // namespace dreplay::server
