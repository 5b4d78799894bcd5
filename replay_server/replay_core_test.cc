// Copyright dreplay authors.

#include "replay_server/replay_core.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "common/mutex.h"
#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "replay_server/regions.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

using testing::Insert;
using testing::PayloadFor;
using testing::ReadStagingSlot;
using testing::Reserve;
using testing::SmallConfig;
using testing::WriteUpdate;

// Bound on every wait for another thread in this file.
constexpr absl::Duration kWaitTimeout = absl::Seconds(60);

ReplayCoreOptions TestOptions() {
  ReplayCoreOptions options;
  options.memory.alpha = 0.6;
  options.memory.seed = 11;
  options.sampler.rate_limiter.min_size_to_sample = 8;
  options.sampler.beta = replay::BetaSchedule{0.4, 1.0, 1000};
  return options;
}

std::vector<protocol::BatchEntry> EntriesOf(const protocol::LayoutConfig& c,
                                            const std::vector<uint8_t>& image) {
  protocol::BatchHeader header;
  std::memcpy(&header, image.data(), sizeof(header));
  std::vector<protocol::BatchEntry> entries(header.count);
  std::memcpy(entries.data(), image.data() + protocol::StagingEntriesOffset(c),
              entries.size() * sizeof(protocol::BatchEntry));
  return entries;
}

class ReplayCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    regions_ = ReplayRegions::Create(SmallConfig()).value();
    auto core = ReplayCore::Create(regions_.get(), TestOptions(), &clock_);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(core).value();
  }
  const protocol::LayoutConfig& config() const { return regions_->config(); }

  FakeClock clock_;
  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<ReplayCore> core_;
};

TEST_F(ReplayCoreTest, StartsInEpochOneWithTheControlBlockFilledIn) {
  EXPECT_EQ(core_->epoch(), 1u);
  const protocol::ControlBlock* cb = regions_->control();
  EXPECT_TRUE(protocol::CheckControlHeader(cb->header).ok());
  EXPECT_EQ(cb->header.config, config());
  EXPECT_EQ(LoadAcquire(&cb->server.epoch), 1u);
  EXPECT_EQ(LoadAcquire(&regions_->stats()->epoch), 1u);
}

TEST_F(ReplayCoreTest, AStepIngestsAndStagesUpToTheStagingDepth) {
  for (int k = 0; k < 16; ++k) Insert(*regions_, 1.f + k);
  const StepResult r = core_->Step();
  EXPECT_EQ(r.ingested, 16u);
  EXPECT_EQ(r.batches_staged, config().staging_depth);
  EXPECT_TRUE(r.did_work());
  for (uint64_t n = 0; n < config().staging_depth; ++n) {
    const absl::Status s =
        protocol::CheckStagedBatch(config(), ReadStagingSlot(*regions_, n).data(), n, 1);
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_FALSE(core_->Step().did_work());
}

TEST_F(ReplayCoreTest, ReusesAStagingSlotOnlyAfterTheLearnersUpdateForItsBatch) {
  for (int k = 0; k < 16; ++k) Insert(*regions_, 1.f);
  core_->Step();
  const uint32_t depth = config().staging_depth;
  const std::vector<uint8_t> batch0 = ReadStagingSlot(*regions_, 0);
  for (int k = 0; k < 20; ++k) EXPECT_EQ(core_->Step().batches_staged, 0u);
  EXPECT_EQ(ReadStagingSlot(*regions_, 0), batch0);
  EXPECT_EQ(core_->counters().staging_stalls, 1u);

  // The update for batch 1 alone does not free slot 0: updates are consumed
  // in batch order.
  WriteUpdate(*regions_, 1, 1, {});
  EXPECT_EQ(core_->Step().batches_staged, 0u);

  std::vector<protocol::PriorityRecord> records;
  for (const protocol::BatchEntry& e : EntriesOf(config(), batch0)) {
    records.push_back({e.slot_sequence, e.slot_index, 5.f});
  }
  WriteUpdate(*regions_, 0, 1, records);
  const StepResult r = core_->Step();
  EXPECT_EQ(r.batches_released, 2u);
  EXPECT_EQ(r.batches_staged, 2u);  // batches depth and depth + 1
  EXPECT_EQ(core_->counters().priority_updates_applied, records.size());
  EXPECT_DOUBLE_EQ(core_->memory().stored_priority(records[0].slot_index),
                   core_->memory().StoredValue(5.f));
  EXPECT_TRUE(
      protocol::CheckStagedBatch(config(), ReadStagingSlot(*regions_, depth).data(), depth, 1)
          .ok());
  EXPECT_EQ(LoadAcquire(&regions_->control()->server.batches_released), 2u);
}

TEST_F(ReplayCoreTest, UpdateTimeoutReleasesABatchTheLearnerNeverAnswered) {
  ReplayCoreOptions options = TestOptions();
  options.update_timeout = absl::Seconds(2);
  core_ = ReplayCore::Create(regions_.get(), options, &clock_).value();
  for (int k = 0; k < 16; ++k) Insert(*regions_, 1.f);
  core_->Step();
  EXPECT_EQ(core_->Step().batches_released, 0u);
  clock_.Advance(absl::Seconds(2));
  const StepResult r = core_->Step();
  EXPECT_EQ(r.batches_released, config().staging_depth);
  EXPECT_EQ(core_->counters().updates_timed_out, config().staging_depth);
  EXPECT_EQ(r.batches_staged, config().staging_depth);
}

TEST_F(ReplayCoreTest, RecordsTheStagingDelayOfBatchesWhoseUpdateWasConsumed) {
  ReplayCoreOptions options = TestOptions();
  options.update_timeout = absl::Seconds(2);
  core_ = ReplayCore::Create(regions_.get(), options, &clock_).value();
  for (int k = 0; k < 16; ++k) Insert(*regions_, 1.f);
  core_->Step();  // stages batches 0 .. depth-1
  clock_.Advance(absl::Milliseconds(30));
  WriteUpdate(*regions_, 0, 1, {});
  EXPECT_EQ(core_->Step().batches_released, 1u);
  HistogramSnapshot staging = core_->delays().staging.Snapshot();
  EXPECT_EQ(staging.count, 1u);
  EXPECT_NEAR(staging.sum, 0.030, 1e-9);
  // Batches released by the timeout are not staging delays.
  clock_.Advance(absl::Seconds(2));
  EXPECT_GT(core_->Step().batches_released, 0u);
  EXPECT_GT(core_->counters().updates_timed_out, 0u);
  staging = core_->delays().staging.Snapshot();
  EXPECT_EQ(staging.count, 1u);
  // The in-memory actors stamp no insert time, so no insert delay either.
  EXPECT_EQ(core_->delays().insert_to_ingest.Snapshot().count, 0u);
}

TEST_F(ReplayCoreTest, PublishesConsistentStats) {
  for (int k = 0; k < 16; ++k) Insert(*regions_, 2.f);
  core_->Step();
  const protocol::StatsBlock* s = regions_->stats();
  EXPECT_EQ(LoadAcquire(&s->generation_begin), LoadAcquire(&s->generation_end));
  EXPECT_EQ(s->inserted, 16u);
  EXPECT_EQ(s->size, 16u);
  EXPECT_EQ(s->capacity, config().capacity);
  EXPECT_EQ(s->ingest_cursor, 16u);
  EXPECT_EQ(s->batches_staged, config().staging_depth);
  EXPECT_EQ(s->sampled, uint64_t{config().staging_depth} * config().batch_size);
  EXPECT_DOUBLE_EQ(s->priority_sum, core_->memory().total_priority());
  EXPECT_DOUBLE_EQ(s->priority_max, core_->memory().StoredValue(2.f));
  EXPECT_EQ(s->epoch, 1u);
  EXPECT_EQ(s->server_time_ns,
            static_cast<uint64_t>(absl::ToInt64Nanoseconds(clock_.Now() - absl::UnixEpoch())));
}

TEST_F(ReplayCoreTest, RunReturnsWhenStoppedAndBacksOffWhenIdle) {
  std::atomic<bool> stop{false};
  // With the fake clock, sleeping advances time: an idle Run() moves the
  // clock by at most max_sleep per step after spin_steps empty steps.
  const absl::Time start = clock_.Now();
  std::thread loop([&] { core_->Run(stop); });
  const absl::Time deadline = absl::Now() + kWaitTimeout;
  while (clock_.Now() - start < absl::Milliseconds(50) && absl::Now() < deadline) {
    std::this_thread::yield();
  }
  stop.store(true);
  loop.join();
  EXPECT_GE(clock_.Now() - start, absl::Milliseconds(50));
}

// A fake clock that records the longest sleep asked of it.
class SleepRecordingClock : public FakeClock {
 public:
  void SleepFor(absl::Duration d) override {
    {
      MutexLock lock(&mu_);
      longest_ = std::max(longest_, d);
    }
    FakeClock::SleepFor(d);
  }
  absl::Duration longest() {
    MutexLock lock(&mu_);
    return longest_;
  }

 private:
  Mutex mu_;
  absl::Duration longest_ ABSL_GUARDED_BY(mu_);
};

// Runs `core` until `clock` has advanced `span`; returns the longest sleep.
absl::Duration LongestIdleSleep(ReplayCore* core, SleepRecordingClock* clock, absl::Duration span) {
  std::atomic<bool> stop{false};
  const absl::Time start = clock->Now();
  std::thread loop([&] { core->Run(stop); });
  const absl::Time deadline = absl::Now() + kWaitTimeout;
  while (clock->Now() - start < span && absl::Now() < deadline) std::this_thread::yield();
  stop.store(true);
  loop.join();
  EXPECT_GE(clock->Now() - start, span);
  return clock->longest();
}

TEST(ReplayCoreSleepTest, SleepsShortWhileStagedBatchesAwaitTheirUpdates) {
  auto regions = ReplayRegions::Create(SmallConfig()).value();
  ReplayCoreOptions options = TestOptions();
  SleepRecordingClock clock;
  auto core = ReplayCore::Create(regions.get(), options, &clock).value();
  for (int k = 0; k < 16; ++k) Insert(*regions, 1.f);
  ASSERT_GT(core->Step().batches_staged, 0u);  // no update will come
  EXPECT_EQ(LongestIdleSleep(core.get(), &clock, absl::Milliseconds(20)),
            options.max_sleep_awaiting_updates);
}

TEST(ReplayCoreSleepTest, AnIdleCoreWithNothingStagedSleepsUpToMaxSleep) {
  auto regions = ReplayRegions::Create(SmallConfig()).value();
  ReplayCoreOptions options = TestOptions();
  SleepRecordingClock clock;
  auto core = ReplayCore::Create(regions.get(), options, &clock).value();
  EXPECT_EQ(LongestIdleSleep(core.get(), &clock, absl::Milliseconds(20)), options.max_sleep);
}

TEST(ReplayCoreOptionsTest, RejectsBadValuesByName) {
  ReplayCoreOptions options;
  EXPECT_TRUE(options.Validate().ok());
  options.max_batches_per_step = 0;
  EXPECT_NE(options.Validate().message().find("max_batches_per_step"), std::string::npos);
  options = ReplayCoreOptions{};
  options.min_sleep = absl::Milliseconds(2);
  options.max_sleep = absl::Milliseconds(1);
  EXPECT_NE(options.Validate().message().find("min_sleep"), std::string::npos);
  options = ReplayCoreOptions{};
  options.max_sleep_awaiting_updates = absl::Microseconds(5);
  EXPECT_NE(options.Validate().message().find("max_sleep_awaiting_updates=5us"), std::string::npos);
  options = ReplayCoreOptions{};
  options.memory.alpha = -1;
  EXPECT_NE(options.Validate().message().find("alpha"), std::string::npos);
  auto regions = ReplayRegions::Create(SmallConfig()).value();
  options = ReplayCoreOptions{};
  options.memory.capacity = 128;  // differs from the layout
  EXPECT_EQ(ReplayCore::Create(regions.get(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Actors, the replay core and a learner on threads, as over RDMA: actors
// reserve with an atomic fetch-add on tail, write their slots and
// release-store the commit words, and respect ingest_cursor; the learner
// polls staged batches, verifies them and answers every batch through the
// mailbox.
struct EndToEndParams {
  uint64_t capacity;
  uint64_t actor_window;
  int actors;
  int per_actor;
  int reserve_chunk;
};

class ReplayCoreThreadsTest : public ::testing::TestWithParam<EndToEndParams> {};

TEST_P(ReplayCoreThreadsTest, IngestsEveryCommittedTransitionExactlyOnce) {
  const EndToEndParams p = GetParam();
  protocol::LayoutConfig config = SmallConfig();
  config.capacity = p.capacity;
  config.actor_window = p.actor_window;
  config.leases = static_cast<uint32_t>(p.actors);  // one lease per actor thread
  config.batch_size = 16;
  config.staging_depth = 4;
  auto regions = ReplayRegions::Create(config).value();
  ReplayCoreOptions options = TestOptions();
  options.ingest.max_per_step = 256;
  auto core = ReplayCore::Create(regions.get(), options).value();
  const uint64_t total = uint64_t(p.actors) * p.per_actor;

  std::atomic<bool> stop_core{false};
  std::atomic<bool> stop_learner{false};
  std::atomic<bool> failed{false};
  std::thread core_thread([&] { core->Run(stop_core); });

  std::atomic<uint64_t> learner_batches{0};
  std::atomic<uint64_t> learner_records{0};
  std::thread learner([&] {
    uint64_t n = 0;
    std::vector<uint8_t> image(protocol::StagingSlotStride(config));
    while (!stop_learner.load()) {
      CopyFromShared(image.data(), regions->staging_slot(n), image.size());
      const absl::Status s = protocol::CheckStagedBatch(config, image.data(), n, 1);
      if (!s.ok()) {
        if (s.code() != absl::StatusCode::kUnavailable && s.code() != absl::StatusCode::kDataLoss) {
          ADD_FAILURE() << s;
          failed = true;
          return;
        }
        std::this_thread::yield();
        continue;
      }
      std::vector<protocol::PriorityRecord> records;
      for (const protocol::BatchEntry& e : EntriesOf(config, image)) {
        const size_t k = records.size();
        const uint8_t* copy =
            image.data() + protocol::StagingPayloadsOffset(config) + k * config.slot_size;
        const std::vector<uint8_t> expected = PayloadFor(e.slot_sequence, 128);
        if (protocol::VerifySlot(copy, config.slot_size, e.slot_sequence) !=
                protocol::SlotCheck::kOk ||
            std::memcmp(copy + sizeof(protocol::SlotHeader), expected.data(), 128) != 0 ||
            !(e.priority_alpha > 0 && std::isfinite(e.priority_alpha))) {
          ADD_FAILURE() << "batch " << n << " entry " << k << " is wrong";
          failed = true;
          return;
        }
        records.push_back(
            {e.slot_sequence, e.slot_index, static_cast<float>(e.slot_sequence % 13) + 0.5f});
      }
      testing::WriteUpdate(*regions, n, 1, records);
      learner_records += records.size();
      ++learner_batches;
      ++n;
    }
  });

  std::vector<std::thread> actors;
  for (int a = 0; a < p.actors; ++a) {
    actors.emplace_back([&, a] {
      int written = 0;
      while (written < p.per_actor && !failed.load()) {
        const int k = std::min(p.reserve_chunk, p.per_actor - written);
        // The actor's own sequences in its own lease: no shared counter.
        const uint64_t first = written;
        const auto lease = static_cast<uint32_t>(a);
        for (uint64_t q = first; q < first + k; ++q) {
          // Never lap a slot the server has not ingested.
          const absl::Time deadline = absl::Now() + kWaitTimeout;
          while (!protocol::SequenceWritable(
              config, q, LoadAcquire(&regions->lease_line(lease)->ingest_cursor))) {
            if (absl::Now() > deadline) {
              ADD_FAILURE() << "actor " << a << " waited too long for ingest";
              failed = true;
              return;
            }
            std::this_thread::yield();
          }
          testing::WriteLeaseSlot(*regions, lease, q, static_cast<float>(q % 7), 128);
        }
        for (uint64_t q = first; q < first + k; ++q) testing::CommitLease(*regions, lease, q);
        written += k;
      }
    });
  }
  for (std::thread& t : actors) t.join();
  const absl::Time deadline = absl::Now() + kWaitTimeout;
  while (LoadAcquire(&regions->control()->server.ingest_cursor) < total && !failed.load() &&
         absl::Now() < deadline) {
    std::this_thread::yield();
  }
  // Let the learner see a few batches with every transition in memory.
  const uint64_t seen = learner_batches.load();
  while (learner_batches.load() < seen + 2 && !failed.load() && absl::Now() < deadline) {
    std::this_thread::yield();
  }
  stop_learner = true;
  learner.join();
  stop_core = true;
  core_thread.join();
  ASSERT_FALSE(failed.load());

  const ReplayCounters& c = core->counters();
  EXPECT_EQ(core->ingest_cursor(), total);
  EXPECT_EQ(c.inserted, total);
  EXPECT_EQ(c.overrun_slots, 0u);
  EXPECT_EQ(c.torn_slots, 0u);
  // Every index holds the last sequence its lease wrote to it, exactly once.
  const uint64_t per_lease = static_cast<uint64_t>(p.per_actor);
  const uint64_t held = std::min<uint64_t>(per_lease, protocol::LeaseSlots(config));
  EXPECT_EQ(core->memory().size(), held * p.actors);
  for (uint32_t lease = 0; lease < config.leases; ++lease) {
    for (uint64_t q = per_lease - held; q < per_lease; ++q) {
      EXPECT_EQ(core->memory().sequence(protocol::LeaseSlotIndex(config, lease, q)), q);
    }
  }
  EXPECT_GE(learner_batches.load(), 2u);
  EXPECT_GE(c.batches_staged, learner_batches.load());
  EXPECT_LE(c.priority_updates_applied + c.priority_updates_stale, learner_records.load());
  EXPECT_EQ(c.priority_updates_invalid + c.mailbox_rejects, 0u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReplayCoreThreadsTest,
                         ::testing::Values(
                             // Room for everything: no slot is reused.
                             EndToEndParams{1 << 15, 0, 4, 5000, 8},
                             // A small ring: actors wait for ingest and slots are overwritten
                             // under the sampler's feet all the time.
                             EndToEndParams{256, 0, 4, 5000, 4},
                             // Actors may run only a quarter of their lease ahead of ingest.
                             EndToEndParams{256, 16, 4, 5000, 4}));

}  // namespace
}  // namespace dreplay::server
