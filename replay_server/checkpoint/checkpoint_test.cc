// Copyright dreplay authors.

#include "replay_server/checkpoint/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "common/shared_words.h"
#include "common/verification_log.h"
#include "gtest/gtest.h"
#include "replay_server/lease_table.h"
#include "replay_server/regions.h"
#include "replay_server/replay_core.h"
#include "testing/in_memory_peers.h"
#include "xxhash.h"

namespace dreplay::server {
namespace {

using testing::Commit;
using testing::Insert;
using testing::ReadStagingSlot;
using testing::Reserve;
using testing::SmallConfig;
using testing::WriteSlot;
using testing::WriteUpdate;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::vector<char> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Each test's first server is incarnation 11 unless it says otherwise.
ReplayCoreOptions Options(uint64_t incarnation = 11) {
  ReplayCoreOptions options;
  options.incarnation = incarnation;
  options.memory.alpha = 0.7;
  options.sampler.rate_limiter.min_size_to_sample = 4;
  return options;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TempDir() + "/replay.ckpt";
    std::remove(path_.c_str());
    regions_ = ReplayRegions::Create(SmallConfig()).value();
    core_ = ReplayCore::Create(regions_.get(), Options(), &clock_).value();
  }

  // A server that ran for a while: some inserts, a batch staged, a priority
  // update applied, one reservation pending and one committed but not
  // ingested.
  void RunForAWhile() {
    for (int k = 0; k < 40; ++k) Insert(*regions_, 0.25f * k);
    core_->Step();
    const std::vector<uint8_t> batch0 = ReadStagingSlot(*regions_, 0);
    protocol::BatchEntry e;
    std::memcpy(&e, batch0.data() + protocol::StagingEntriesOffset(config()), sizeof(e));
    const protocol::PriorityRecord r{e.slot_sequence, e.slot_index, 42.f};
    WriteUpdate(*regions_, 0, 1, {&r, 1});
    core_->Step();
    committed_ = Insert(*regions_, 3.f);  // committed after the last step
    pending_ = Reserve(*regions_, 1);     // being written, not committed
  }

  const protocol::LayoutConfig& config() const { return regions_->config(); }

  std::string path_;
  FakeClock clock_;
  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<ReplayCore> core_;
  uint64_t pending_ = 0;
  uint64_t committed_ = 0;
};

TEST_F(CheckpointTest, RoundTripRestoresMemorySlotsCountersAndBumpsTheEpoch) {
  RunForAWhile();
  ASSERT_TRUE(core_->SaveCheckpoint(path_).ok());
  EXPECT_EQ(core_->counters().checkpoints_written, 1u);
  EXPECT_NE(access((path_ + ".tmp").c_str(), F_OK), 0) << "temporary file left behind";

  auto regions = ReplayRegions::Create(SmallConfig()).value();
  auto core = ReplayCore::Create(regions.get(), Options(/*incarnation=*/22), &clock_).value();
  ASSERT_TRUE(core->RestoreCheckpoint(path_).ok());
  EXPECT_EQ(core->epoch(), 2u);
  EXPECT_EQ(LoadAcquire(&regions->control()->server.epoch), 2u);
  // The restored server keeps its own incarnation and knows the writer's.
  EXPECT_EQ(core->incarnation(), 22u);
  EXPECT_EQ(LoadAcquire(&regions->control()->server.incarnation), 22u);
  EXPECT_EQ(core->restored_incarnation(), 11u);
  EXPECT_EQ(LoadAcquire(&regions->lease_line(0)->ingest_cursor), committed_);
  EXPECT_EQ(core->memory().size(), core_->memory().size());
  for (uint64_t i = 0; i < config().capacity; ++i) {
    EXPECT_EQ(core->memory().sequence(i), core_->memory().sequence(i)) << i;
    EXPECT_EQ(core->memory().stored_priority(i), core_->memory().stored_priority(i)) << i;
  }
  // Every slot the memory holds, and the committed one, is saved as it was.
  for (uint64_t i = 0; i < config().capacity; ++i) {
    if (!core_->memory().valid(i) && i != testing::SlotOf(config(), committed_)) continue;
    EXPECT_EQ(std::memcmp(regions->slot(i), regions_->slot(i), config().slot_size), 0) << i;
  }
  // The one being written is not: its header was caught mid-write.
  const uint8_t* pending_slot = regions->slot(testing::SlotOf(config(), pending_));
  EXPECT_TRUE(std::all_of(pending_slot, pending_slot + config().slot_size,
                          [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(core->counters().inserted, core_->counters().inserted);
  EXPECT_EQ(core->counters().priority_updates_applied, 1u);
  EXPECT_EQ(core->counters().checkpoints_written, 0u);  // counted after the write
  EXPECT_EQ(core->counters().restore_dropped, 0u);

  // The committed one is ingested, the lease then waits at the one being
  // written; batch numbers restart at 0 in epoch 2.
  const StepResult r = core->Step();
  EXPECT_EQ(r.ingested, 1u);
  EXPECT_EQ(core->memory().sequence(testing::SlotOf(config(), committed_)), committed_);
  EXPECT_FALSE(core->memory().valid(testing::SlotOf(config(), pending_)));
  EXPECT_EQ(core->ingest_cursor(), committed_ + 1);
  EXPECT_TRUE(protocol::CheckStagedBatch(config(), ReadStagingSlot(*regions, 0).data(), 0, 2).ok());
}

TEST_F(CheckpointTest, AnOlderFormatIsRefusedWithItsVersion) {
  RunForAWhile();
  ASSERT_TRUE(core_->SaveCheckpoint(path_).ok());
  std::vector<char> bytes = ReadFile(path_);
  CheckpointHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  header.format_version = 4;
  std::memcpy(bytes.data(), &header, sizeof(header));
  WriteFile(path_, bytes);
  auto regions = ReplayRegions::Create(SmallConfig()).value();
  auto core = ReplayCore::Create(regions.get(), Options(), &clock_).value();
  const absl::Status s = core->RestoreCheckpoint(path_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("format version 4"), std::string::npos) << s;
  EXPECT_NE(s.message().find("reads version 5 only"), std::string::npos) << s;
}

TEST_F(CheckpointTest, TheLimiterAndCacheCountersSurviveARestart) {
  RunForAWhile();
  ASSERT_GT(core_->counters().staged_payloads, 0u);
  ASSERT_TRUE(core_->SaveCheckpoint(path_).ok());
  auto regions = ReplayRegions::Create(SmallConfig()).value();
  auto core = ReplayCore::Create(regions.get(), Options(), &clock_).value();
  ASSERT_TRUE(core->RestoreCheckpoint(path_).ok());
  EXPECT_EQ(core->counters().staged_payloads, core_->counters().staged_payloads);
  EXPECT_EQ(core->sampler().limiter().inserted(), core_->counters().inserted);
  EXPECT_EQ(core->sampler().limiter().sampled(), core_->counters().sampled);
}

TEST_F(CheckpointTest, ASlotTornWhenSavedIsRecordedEmpty) {
  RunForAWhile();
  ASSERT_TRUE(core_->memory().valid(5));
  regions_->slot(5)[sizeof(protocol::SlotHeader) + 3] ^= 0xFF;  // an actor mid-write
  CheckpointWriteStats stats;
  ASSERT_TRUE(core_->SaveCheckpoint(path_, &stats).ok());
  EXPECT_EQ(stats.slots_absent, 1u);
  EXPECT_EQ(stats.slots_kept, core_->memory().size() - 1);
  auto regions = ReplayRegions::Create(SmallConfig()).value();
  auto core = ReplayCore::Create(regions.get(), Options(), &clock_).value();
  ASSERT_TRUE(core->RestoreCheckpoint(path_).ok());
  EXPECT_EQ(core->counters().restore_dropped, 0u) << "the file holds no torn slot";
  EXPECT_FALSE(core->memory().valid(5));
  EXPECT_EQ(regions->commits()[5], protocol::kNeverCommitted);
  EXPECT_EQ(core->memory().size(), core_->memory().size() - 1);
}

TEST_F(CheckpointTest, TheVerificationLogNamesTheCutItsAbsentSlotsAndTheRestoredCut) {
  RunForAWhile();
  const std::string log_path = TempDir() + "/checkpoint.vlog";
  std::remove(log_path.c_str());
  auto log = VerificationLog::Open(log_path);
  ASSERT_TRUE(log.ok()) << log.status();
  CheckpointCut cut = core_->CutCheckpoint();
  cut.cut_id = 3;
  cut.log = log->get();
  const uint64_t sequence = cut.sequences[5];
  ASSERT_NE(sequence, replay::ReplayMemory::kNoSequence);
  regions_->slot(5)[sizeof(protocol::SlotHeader) + 3] ^= 0xFF;  // overwritten during the write
  const auto stats = WriteCheckpoint(path_, *regions_, &cut);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->cut_id, 3u);
  const std::string written(ReadFile(log_path).data(), ReadFile(log_path).size());
  EXPECT_EQ(written, "D 3 5 " + std::to_string(sequence) + "\nC 3\n");

  ReplayCoreOptions options = Options(12);
  options.ingest.verification_log = log->get();
  auto regions = ReplayRegions::Create(SmallConfig()).value();
  auto core = ReplayCore::Create(regions.get(), options, &clock_).value();
  ASSERT_TRUE(core->RestoreCheckpoint(path_).ok());
  const std::vector<char> after = ReadFile(log_path);
  const std::string restored(after.begin() + written.size(), after.end());
  EXPECT_EQ(restored.rfind("B " + std::to_string(cut.state.epoch) + " " +
                               std::to_string(cut.state.ingest_cursor) + "\nR ",
                           0),
            0u)
      << restored;
  // A cut of a core with the log writes its K record with the next id.
  CheckpointCut next = core->CutCheckpoint();
  EXPECT_EQ(next.cut_id, 1u);
  EXPECT_EQ(next.log, log->get());
  const std::vector<char> all = ReadFile(log_path);
  EXPECT_NE(std::string(all.begin(), all.end())
                .find("K 1 " + std::to_string(core->epoch()) + " " +
                      std::to_string(next.state.ingest_cursor) + "\n"),
            std::string::npos);
}

TEST_F(CheckpointTest, CommitsAfterALeasesVerifiedPrefixAreClearedOnRestore) {
  RunForAWhile();
  core_->Step();
  // The ring is streamed while the actor keeps writing: `late` was caught
  // with its commit word but a half-written slot, `after` complete.
  CheckpointCut cut = core_->CutCheckpoint();
  WriteSlot(*regions_, pending_, 4.f, 128);
  Commit(*regions_, pending_);
  const uint64_t late = Insert(*regions_, 5.f);
  const uint64_t after = Insert(*regions_, 6.f);
  regions_->slot(testing::SlotOf(config(), late))[sizeof(protocol::SlotHeader) + 1] ^= 0xFF;
  ASSERT_TRUE(WriteCheckpoint(path_, *regions_, &cut).ok());

  auto regions = ReplayRegions::Create(SmallConfig()).value();
  auto core = ReplayCore::Create(regions.get(), Options(), &clock_).value();
  ASSERT_TRUE(core->RestoreCheckpoint(path_).ok());
  EXPECT_EQ(regions->commits()[testing::SlotOf(config(), pending_)],
            protocol::CommitValue(pending_));
  EXPECT_EQ(regions->commits()[testing::SlotOf(config(), late)], protocol::kNeverCommitted);
  EXPECT_EQ(regions->commits()[testing::SlotOf(config(), after)], protocol::kNeverCommitted);

  // The actor resumes at `late` and writes it again; ingest takes the new
  // slot, not the old commit word's.
  core->Step();
  EXPECT_EQ(core->ingest_cursor(), late);
  WriteSlot(*regions, late, 7.f, 96);
  Commit(*regions, late);
  const uint64_t inserted_before = core->counters().inserted;
  core->Step();
  EXPECT_EQ(core->ingest_cursor(), late + 1);
  EXPECT_EQ(core->counters().inserted, inserted_before + 1);
  EXPECT_EQ(core->counters().torn_slots, 0u);
  protocol::SlotHeader header;
  std::memcpy(&header, regions->slot(testing::SlotOf(config(), late)), sizeof(header));
  EXPECT_EQ(header.payload_length, 96u) << "the new actor's slot, not the old one";
}

TEST_F(CheckpointTest, ACorruptedFileIsRejectedAndLeavesTheMemoryEmpty) {
  RunForAWhile();
  ASSERT_TRUE(core_->SaveCheckpoint(path_).ok());
  std::vector<char> bytes = ReadFile(path_);
  bytes[bytes.size() / 2] ^= 1;
  WriteFile(path_, bytes);
  auto regions = ReplayRegions::Create(SmallConfig()).value();
  auto core = ReplayCore::Create(regions.get(), Options(), &clock_).value();
  const absl::Status s = core->RestoreCheckpoint(path_);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s;
  EXPECT_EQ(core->memory().size(), 0u);
  EXPECT_EQ(core->epoch(), 1u);
  for (uint64_t i = 0; i < config().capacity; ++i) {
    ASSERT_EQ(regions->commits()[i], protocol::kNeverCommitted);
  }
}

// A file whose sections were edited, with its checksum made valid again (a
// forged file, or damage that the checksum does not see).
void Reseal(std::vector<char>* bytes) {
  const size_t header = sizeof(CheckpointHeader);
  const size_t body = bytes->size() - header - sizeof(uint64_t);
  const uint64_t body_digest =
      XXH3_64bits_withSeed(bytes->data() + header, body, protocol::kChecksumSeed);
  std::vector<char> sealed(bytes->begin(), bytes->begin() + header);
  sealed.insert(sealed.end(), reinterpret_cast<const char*>(&body_digest),
                reinterpret_cast<const char*>(&body_digest) + sizeof(body_digest));
  const uint64_t trailer =
      XXH3_64bits_withSeed(sealed.data(), sealed.size(), protocol::kChecksumSeed);
  std::memcpy(bytes->data() + header + body, &trailer, sizeof(trailer));
}

// Offsets of the lease sections in a checkpoint of `c`.
size_t LeaseCursorsOffset(const protocol::LayoutConfig& c) {
  return sizeof(CheckpointHeader) + protocol::SlotRingBytes(c) + protocol::CommitWordsBytes(c) +
         c.capacity * 16;
}
size_t LeaseHoldersOffset(const protocol::LayoutConfig& c) {
  return LeaseCursorsOffset(c) + c.leases * sizeof(uint64_t);
}

class ForgedCheckpointTest : public CheckpointTest {
 protected:
  // Saves a checkpoint, lets `edit` change its bytes, reseals it and
  // restores it into a fresh core.
  absl::Status RestoreEdited(const std::function<void(std::vector<char>*)>& edit) {
    RunForAWhile();
    EXPECT_TRUE(core_->SaveCheckpoint(path_).ok());
    std::vector<char> bytes = ReadFile(path_);
    edit(&bytes);
    Reseal(&bytes);
    WriteFile(path_, bytes);
    regions2_ = ReplayRegions::Create(SmallConfig()).value();
    core2_ = ReplayCore::Create(regions2_.get(), Options(22), &clock_).value();
    const absl::Status s = core2_->RestoreCheckpoint(path_);
    if (!s.ok()) {
      EXPECT_EQ(core2_->memory().size(), 0u) << "a refused file leaves nothing";
    }
    return s;
  }
  template <typename T>
  static void Put(std::vector<char>* bytes, size_t offset, const T& value) {
    std::memcpy(bytes->data() + offset, &value, sizeof(value));
  }
  template <typename T>
  static T Get(const std::vector<char>& bytes, size_t offset) {
    T value;
    std::memcpy(&value, bytes.data() + offset, sizeof(value));
    return value;
  }

  std::unique_ptr<ReplayRegions> regions2_;
  std::unique_ptr<ReplayCore> core2_;
};

TEST_F(ForgedCheckpointTest, AResealedButUneditedFileStillRestores) {
  EXPECT_TRUE(RestoreEdited([](std::vector<char>*) {}).ok());
}

TEST_F(ForgedCheckpointTest, ALeaseCursorBelowItsStoredSequencesIsRefused) {
  const absl::Status s = RestoreEdited([&](std::vector<char>* bytes) {
    // Lease 0 back at 2 (and the ingest cursor with it): its stored
    // sequences 2.. would be handed out again.
    const uint64_t cursor = Get<uint64_t>(*bytes, LeaseCursorsOffset(config()));
    Put<uint64_t>(bytes, LeaseCursorsOffset(config()), 2);
    const size_t ingest = offsetof(CheckpointHeader, ingest_cursor);
    Put<uint64_t>(bytes, ingest, Get<uint64_t>(*bytes, ingest) - (cursor - 2));
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("holds sequence 2 of lease 0, not below its cursor 2"),
            std::string::npos)
      << s;
}

TEST_F(ForgedCheckpointTest, CursorsThatDoNotAddUpToTheIngestCursorAreRefused) {
  const absl::Status s = RestoreEdited([&](std::vector<char>* bytes) {
    const size_t ingest = offsetof(CheckpointHeader, ingest_cursor);
    Put<uint64_t>(bytes, ingest, Get<uint64_t>(*bytes, ingest) + 1);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("the lease cursors add up to"), std::string::npos) << s;
}

TEST_F(ForgedCheckpointTest, ASequenceAtAnotherLeasePositionIsRefused) {
  const absl::Status s = RestoreEdited([&](std::vector<char>* bytes) {
    const size_t sequences = LeaseCursorsOffset(config()) - config().capacity * 8;
    Put<uint64_t>(bytes, sequences, 1);  // index 0 claims sequence 1
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("index 0 holds sequence 1, which belongs at another index"),
            std::string::npos)
      << s;
}

TEST_F(ForgedCheckpointTest, AnUnknownLeaseHolderStateIsRefused) {
  const absl::Status s = RestoreEdited([&](std::vector<char>* bytes) {
    Put<CheckpointLeaseHolder>(bytes, LeaseHoldersOffset(config()), {7, 1, 1});
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("lease 0 has holder state 7"), std::string::npos) << s;
}

TEST_F(ForgedCheckpointTest, ANeverHeldLeaseNamingAnActorIsRefused) {
  const absl::Status s = RestoreEdited([&](std::vector<char>* bytes) {
    Put<CheckpointLeaseHolder>(bytes, LeaseHoldersOffset(config()), {0, 5, 0});
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("lease 0 was never held but names actor 5"), std::string::npos) << s;
}

TEST(ForgedLeaseHoldersTest, OneActorHoldingTwoLeasesIsRefused) {
  const std::string path = TempDir() + "/two_leases.ckpt";
  protocol::LayoutConfig config = SmallConfig();
  config.leases = 4;
  FakeClock clock;
  auto regions = ReplayRegions::Create(config).value();
  auto core = ReplayCore::Create(regions.get(), Options(), &clock).value();
  {
    LeaseTable table(regions.get());
    for (uint32_t actor : {9u, 4u}) {
      const uint32_t lease = table.Acquire(actor).value();
      table.Bind(lease, actor, /*client_id=*/actor + 100);
    }
  }
  ASSERT_TRUE(core->SaveCheckpoint(path).ok());
  std::vector<char> bytes = ReadFile(path);
  CheckpointLeaseHolder holder;
  std::memcpy(&holder, bytes.data() + LeaseHoldersOffset(config), sizeof(holder));
  ASSERT_EQ(holder.actor_id, 9u);
  std::memcpy(bytes.data() + LeaseHoldersOffset(config) + sizeof(holder), &holder,
              sizeof(holder));  // lease 1 now names actor 9 too
  Reseal(&bytes);
  WriteFile(path, bytes);
  auto restored_regions = ReplayRegions::Create(config).value();
  auto restored = ReplayCore::Create(restored_regions.get(), Options(22), &clock).value();
  const absl::Status s = restored->RestoreCheckpoint(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("actor 9 holds leases 0 and 1"), std::string::npos) << s;
}

TEST_F(CheckpointTest, TheFileIsReadableByTheServersUserAlone) {
  RunForAWhile();
  ASSERT_TRUE(core_->SaveCheckpoint(path_).ok());
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(CheckpointTest, ATruncatedFileIsRejected) {
  RunForAWhile();
  ASSERT_TRUE(core_->SaveCheckpoint(path_).ok());
  std::vector<char> bytes = ReadFile(path_);
  bytes.resize(bytes.size() - 9);
  WriteFile(path_, bytes);
  auto regions = ReplayRegions::Create(SmallConfig()).value();
  auto core = ReplayCore::Create(regions.get(), Options(), &clock_).value();
  EXPECT_EQ(core->RestoreCheckpoint(path_).code(), absl::StatusCode::kDataLoss);
  bytes.resize(100);  // not even a header
  WriteFile(path_, bytes);
  EXPECT_EQ(core->RestoreCheckpoint(path_).code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, AFileThatIsNotACheckpointIsRejected) {
  WriteFile(path_, std::vector<char>(4096, 'x'));
  EXPECT_EQ(core_->RestoreCheckpoint(path_).code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, AMismatchedLayoutIsRefusedWithTheFieldNamed) {
  RunForAWhile();
  ASSERT_TRUE(core_->SaveCheckpoint(path_).ok());
  protocol::LayoutConfig other = SmallConfig();
  other.batch_size = 4;
  auto regions = ReplayRegions::Create(other).value();
  auto core = ReplayCore::Create(regions.get(), Options(), &clock_).value();
  const absl::Status s = core->RestoreCheckpoint(path_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("batch_size: 8 vs 4"), std::string::npos) << s;
}

TEST_F(CheckpointTest, ADifferentAlphaIsRefused) {
  RunForAWhile();
  ASSERT_TRUE(core_->SaveCheckpoint(path_).ok());
  auto regions = ReplayRegions::Create(SmallConfig()).value();
  ReplayCoreOptions options = Options();
  options.memory.alpha = 0.5;
  auto core = ReplayCore::Create(regions.get(), options, &clock_).value();
  const absl::Status s = core->RestoreCheckpoint(path_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("alpha=0.7"), std::string::npos) << s;
}

TEST_F(CheckpointTest, AMissingFileIsNotFound) {
  EXPECT_EQ(core_->RestoreCheckpoint(path_ + ".absent").code(), absl::StatusCode::kNotFound);
}

TEST_F(CheckpointTest, AnUnwritableDirectoryFailsWithoutTouchingTheOldCheckpoint) {
  RunForAWhile();
  ASSERT_TRUE(core_->SaveCheckpoint(path_).ok());
  const std::vector<char> before = ReadFile(path_);
  const absl::Status s = core_->SaveCheckpoint(TempDir() + "/no/such/dir/replay.ckpt");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_EQ(ReadFile(path_), before);
  // A second save replaces the file whole.
  Insert(*regions_, 1.f);
  core_->Step();
  ASSERT_TRUE(core_->SaveCheckpoint(path_).ok());
  EXPECT_NE(ReadFile(path_), before);
  EXPECT_EQ(ReadFile(path_).size(), before.size());
}

TEST(CheckpointLeasesAndParamsTest, AnActorGetsItsLeaseBackAndThePublishedParamsAreThere) {
  const std::string path = TempDir() + "/leases_params.ckpt";
  protocol::LayoutConfig config = SmallConfig();
  config.leases = 4;
  FakeClock clock;
  auto regions = ReplayRegions::Create(config).value();
  auto core = ReplayCore::Create(regions.get(), Options(), &clock).value();
  {
    LeaseTable table(regions.get());
    for (uint32_t actor : {9u, 4u, 7u}) {  // leases 0, 1, 2
      const uint32_t lease = table.Acquire(actor).value();
      table.Bind(lease, actor, /*client_id=*/actor + 100);
    }
    table.Release(/*client_id=*/104);  // actor 4 left before the checkpoint
  }
  // The learner published version 3 (half 1), and half 0 holds version 2.
  const std::vector<uint8_t> params = testing::PayloadFor(3, 200);
  for (uint64_t version : {2u, 3u}) {
    uint8_t* half =
        regions->params() + protocol::ParamsHalfOffset(config, protocol::ParamsHalfOf(version));
    ASSERT_TRUE(protocol::EncodeParamsHalf(config, version, testing::PayloadFor(version, 200),
                                           absl::MakeSpan(half, protocol::ParamsHalfStride(config)))
                    .ok());
    protocol::ParamsHeader header{};
    header.version = version;
    header.active_half = protocol::ParamsHalfOf(version);
    std::memcpy(regions->params(), &header, sizeof(header));
  }
  CheckpointWriteStats stats;
  ASSERT_TRUE(core->SaveCheckpoint(path, &stats).ok());
  EXPECT_EQ(stats.params_version, 3u);

  auto restored_regions = ReplayRegions::Create(config).value();
  auto restored = ReplayCore::Create(restored_regions.get(), Options(22), &clock).value();
  ASSERT_TRUE(restored->RestoreCheckpoint(path).ok());
  LeaseTable table(restored_regions.get());
  EXPECT_EQ(table.held(), 0u) << "no connection holds a lease after a restart";
  for (const auto& [actor, lease] : {std::pair<uint32_t, uint32_t>{9, 0}, {4, 1}, {7, 2}}) {
    EXPECT_EQ(table.Acquire(actor).value(), lease) << "actor " << actor;
  }
  EXPECT_EQ(table.Acquire(/*actor_id=*/1).value(), 3u) << "a new actor: the free lease";
  EXPECT_EQ(LoadAcquire(&restored_regions->lease_line(2)->grants), 1u);

  protocol::ParamsHeader header;
  std::memcpy(&header, restored_regions->params(), sizeof(header));
  EXPECT_EQ(header.version, 3u);
  EXPECT_EQ(header.active_half, 1u);
  const uint8_t* half =
      restored_regions->params() + protocol::ParamsHalfOffset(config, header.active_half);
  ASSERT_TRUE(protocol::CheckParamsHalf(config, half, 3).ok());
  EXPECT_EQ(std::memcmp(half + sizeof(protocol::ParamsHalfHeader), params.data(), params.size()),
            0);
}

TEST(CheckpointHeaderTest, HeaderLayoutIsFixed) {
  EXPECT_EQ(sizeof(CheckpointHeader), 480u);
  EXPECT_EQ(kCheckpointVersion, 5u);
}

}  // namespace
}  // namespace dreplay::server
