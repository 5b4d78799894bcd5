// Copyright dreplay authors.
//
// Transfer-once staging in the replay core: what the learner provably holds
// is staged as a reference, never a stale one, and holdings are forgotten on
// a new learner or epoch.

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "replay_server/regions.h"
#include "replay_server/replay_core.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

using testing::Insert;
using testing::ReadStagingSlot;
using testing::WriteUpdate;

// Most steps a phase of a test may take before it fails.
constexpr int kMaxSteps = 10000;

// capacity 16, so that slots are overwritten often; batch 4, depth 2.
protocol::LayoutConfig TinyConfig() {
  protocol::LayoutConfig c = testing::SmallConfig();
  c.capacity = 16;
  c.batch_size = 4;
  c.staging_depth = 2;
  return c;
}

// One staged batch as the learner sees it.
struct Batch {
  protocol::BatchHeader header;
  std::vector<protocol::BatchEntry> entries;
  std::vector<uint8_t> image;
  uint32_t cached() const { return header.count - header.payload_count; }
};

class TransferOnceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    regions_ = ReplayRegions::Create(TinyConfig()).value();
    ReplayCoreOptions options;
    options.memory.seed = 3;
    options.sampler.rate_limiter.min_size_to_sample = 4;
    auto core = ReplayCore::Create(regions_.get(), options, &clock_);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(core).value();
  }
  const protocol::LayoutConfig& config() const { return regions_->config(); }

  // A learner connects: the accept thread's hand-off, applied by one step.
  void ConnectLearner(bool learner_cache) {
    const uint64_t generation = core_->NoteLearnerConnected(learner_cache);
    core_->Step();
    ASSERT_TRUE(core_->WaitLearnerNoted(generation, absl::ZeroDuration()));
    model_.clear();
    next_read_ = core_->sampler().released();
  }

  // Reads batch `n` as the learner does (commit line's used_bytes, then
  // that much) and checks it.
  Batch Read(uint64_t n) {
    Batch b;
    const std::vector<uint8_t> slot = ReadStagingSlot(*regions_, n);
    protocol::CommitLine line;
    std::memcpy(&line, slot.data() + protocol::StagingCommitOffset(config()), sizeof(line));
    const absl::StatusOr<uint64_t> bytes = protocol::StagedBatchBytes(config(), line, n);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    b.image.assign(slot.begin(), slot.begin() + bytes.value_or(0));
    const absl::Status s =
        protocol::CheckBatchImage(config(), b.image.data(), b.image.size(), n, core_->epoch());
    EXPECT_TRUE(s.ok()) << "batch " << n << ": " << s;
    std::memcpy(&b.header, slot.data(), sizeof(b.header));
    EXPECT_EQ(b.header.used_bytes, protocol::StagingUsedBytes(config(), b.header.payload_count));
    EXPECT_EQ(line.used_bytes, b.header.used_bytes);
    b.entries.resize(b.header.count);
    std::memcpy(b.entries.data(), slot.data() + protocol::StagingEntriesOffset(config()),
                b.entries.size() * sizeof(protocol::BatchEntry));
    return b;
  }

  // The learner reads every staged batch in order: a reference must name
  // exactly what the learner holds (`model_`); a payload must be the slot of
  // its entry, packed in entry order. Then it answers (empty update).
  void LearnerReadsAndAnswers() {
    for (; next_read_ < core_->sampler().next_batch(); ++next_read_) {
      const Batch b = Read(next_read_);
      uint32_t payload = 0;
      for (const protocol::BatchEntry& e : b.entries) {
        const uint32_t index = protocol::EntryIndex(e);
        if (protocol::EntryCached(e)) {
          auto held = model_.find(index);
          ASSERT_TRUE(held != model_.end()) << "reference to slot " << index << " never sent";
          ASSERT_EQ(held->second, e.slot_sequence) << "stale reference to slot " << index;
          ++references_seen_;
          continue;
        }
        const uint8_t* slot = b.image.data() + protocol::StagingPayloadsOffset(config()) +
                              uint64_t{payload++} * config().slot_size;
        ASSERT_EQ(protocol::VerifySlot(slot, config().slot_size, e.slot_sequence),
                  protocol::SlotCheck::kOk);
        model_[index] = e.slot_sequence;
      }
      ASSERT_EQ(payload, b.header.payload_count);
      WriteUpdate(*regions_, next_read_, core_->epoch(), {});
    }
  }

  FakeClock clock_;
  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<ReplayCore> core_;
  std::map<uint32_t, uint64_t> model_;  // slot index -> sequence the learner holds
  uint64_t next_read_ = 0;
  uint64_t references_seen_ = 0;
};

TEST_F(TransferOnceTest, ARedrawnEntryIsStagedAsAReferenceOnceABatchCarriedIt) {
  ConnectLearner(true);
  for (int k = 0; k < 4; ++k) Insert(*regions_, 1.f);
  core_->Step();
  ASSERT_EQ(core_->sampler().next_batch(), 2u);
  // Nothing was answered yet, but the learner reads batch 0 before batch 1:
  // batch 0 carries the four slots, batch 1 refers to them.
  EXPECT_EQ(Read(0).cached(), 0u);
  EXPECT_EQ(Read(1).cached(), 4u);
  for (int i = 0; i < 20; ++i) {
    LearnerReadsAndAnswers();
    core_->Step();
  }
  // Four slots, all sent and answered long ago: every batch is references.
  EXPECT_EQ(core_->sampler().holdings().CountHeld(), 4u);
  const Batch last = Read(core_->sampler().next_batch() - 1);
  EXPECT_EQ(last.header.payload_count, 0u);
  EXPECT_EQ(last.header.used_bytes, protocol::StagingPayloadsOffset(config()));
  EXPECT_GT(core_->counters().staged_cached, 0u);
  EXPECT_EQ(core_->counters().staged_payloads + core_->counters().staged_cached,
            core_->counters().sampled);
  EXPECT_EQ(LoadAcquire(&regions_->stats()->staged_cached), core_->counters().staged_cached);
}

TEST_F(TransferOnceTest, AnOverwrittenSlotIsNeverServedAsAReference) {
  ConnectLearner(true);
  std::mt19937 random(9);
  std::uniform_int_distribution<int> burst(0, 3);
  for (int round = 0; round < 2000; ++round) {
    for (int k = burst(random); k > 0; --k) Insert(*regions_, 1.f + k);
    core_->Step();
    LearnerReadsAndAnswers();  // checks every reference against model_
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(references_seen_, 1000u);
  EXPECT_GT(core_->counters().staged_payloads, 1000u);
  EXPECT_GT(LoadAcquire(&regions_->lease_line(0)->ingest_cursor), 10 * config().capacity);
}

// A batch released by the update timeout may never have been READ: what it
// carried is forgotten, so every slot still held is one an outstanding batch
// carried or referred to.
TEST_F(TransferOnceTest, UpdatesReleasedByTimeoutForgetWhatTheyCarried) {
  regions_ = ReplayRegions::Create(TinyConfig()).value();
  ReplayCoreOptions options;
  options.sampler.rate_limiter.min_size_to_sample = 4;
  options.update_timeout = absl::Milliseconds(1);
  core_ = ReplayCore::Create(regions_.get(), options, &clock_).value();
  ConnectLearner(true);
  for (int k = 0; k < 4; ++k) Insert(*regions_, 1.f);
  for (int i = 0; i < 20; ++i) {
    core_->Step();
    clock_.Advance(absl::Milliseconds(2));
  }
  EXPECT_GT(core_->counters().updates_timed_out, 10u);
  std::map<uint32_t, uint64_t> outstanding;
  for (uint64_t n = core_->sampler().released(); n < core_->sampler().next_batch(); ++n) {
    for (const protocol::BatchEntry& e : Read(n).entries) {
      outstanding[protocol::EntryIndex(e)] = e.slot_sequence;
    }
  }
  ASSERT_FALSE(outstanding.empty());
  uint64_t held = 0;
  for (const auto& [index, sequence] : outstanding) {
    held += core_->sampler().holdings().Holds(index, sequence) ? 1 : 0;
  }
  EXPECT_EQ(core_->sampler().holdings().CountHeld(), held);
  // Released with no READ and no answer: the four slots are sent again and
  // again, never counted on for good.
  EXPECT_GT(core_->counters().staged_payloads, 10u * 4);
}

TEST_F(TransferOnceTest, ANewLearnerStartsWithNoHoldingsAndNoReferencesOutstanding) {
  ConnectLearner(true);
  for (int k = 0; k < 4; ++k) Insert(*regions_, 1.f);
  for (int i = 0; i < 20; ++i) {
    core_->Step();
    LearnerReadsAndAnswers();
  }
  core_->Step();
  ASSERT_TRUE(core_->sampler().OutstandingReferences());
  const uint64_t resets = core_->counters().learner_cache_resets;
  const uint64_t staged_before = core_->sampler().next_batch();

  ConnectLearner(true);
  EXPECT_EQ(core_->counters().learner_cache_resets, resets + 1);
  // Every batch staged for the old learner was released.
  EXPECT_GE(core_->sampler().released(), staged_before);
  // Batches from the new connection on carry every payload until answered.
  const Batch first = Read(next_read_);
  EXPECT_EQ(first.cached(), 0u);
  for (int i = 0; i < 20; ++i) {
    LearnerReadsAndAnswers();
    core_->Step();
  }
  EXPECT_GT(references_seen_, 0u);
}

TEST_F(TransferOnceTest, ALearnerWithoutTheCacheGetsEveryPayload) {
  ConnectLearner(false);
  for (int k = 0; k < 4; ++k) Insert(*regions_, 1.f);
  for (int i = 0; i < 20; ++i) {
    core_->Step();
    LearnerReadsAndAnswers();
  }
  EXPECT_EQ(core_->counters().staged_cached, 0u);
  EXPECT_GT(core_->counters().staged_payloads, 0u);
  EXPECT_EQ(core_->sampler().holdings().CountHeld(), 0u);
}

TEST_F(TransferOnceTest, ANewEpochForgetsHoldingsAndTheLimiterContinues) {
  ConnectLearner(true);
  for (int k = 0; k < 4; ++k) Insert(*regions_, 1.f);
  for (int i = 0; i < 20; ++i) {
    core_->Step();
    LearnerReadsAndAnswers();
  }
  ASSERT_GT(core_->sampler().holdings().CountHeld(), 0u);
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/transfer_once.ckpt";
  ASSERT_TRUE(core_->SaveCheckpoint(path).ok());
  const ReplayCounters saved = core_->counters();
  ASSERT_TRUE(core_->RestoreCheckpoint(path).ok());
  EXPECT_EQ(core_->epoch(), 2u);
  EXPECT_EQ(core_->sampler().holdings().CountHeld(), 0u);
  EXPECT_EQ(core_->counters().learner_cache_resets, saved.learner_cache_resets + 1);
  EXPECT_EQ(core_->counters().staged_cached, saved.staged_cached);
  EXPECT_EQ(core_->sampler().limiter().inserted(), saved.inserted);
  EXPECT_EQ(core_->sampler().limiter().sampled(), saved.sampled);
}

}  // namespace
}  // namespace dreplay::server
