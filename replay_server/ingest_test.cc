// Copyright dreplay authors.

#include "replay_server/ingest.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "replay_server/checkpoint/sequence_reservations.h"
#include "replay_server/regions.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

using testing::Commit;
using testing::Insert;
using testing::Reserve;
using testing::SmallConfig;
using testing::WriteSlot;

constexpr absl::Duration kTornRecheck = absl::Milliseconds(2);

class IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto regions = ReplayRegions::Create(SmallConfig());
    ASSERT_TRUE(regions.ok()) << regions.status();
    regions_ = std::move(regions).value();
    replay::ReplayMemoryOptions mo;
    mo.capacity = SmallConfig().capacity;
    mo.alpha = 1.0;
    mo.priority_epsilon = 0.5;
    memory_ = replay::ReplayMemory::Create(mo).value();
    IngestOptions options;
    options.torn_recheck = kTornRecheck;
    options.max_per_step = 1000;
    MakeIngest(options);
  }

  void MakeIngest(const IngestOptions& options) {
    ingest_ = std::make_unique<Ingest>(
        regions_->config(), options, regions_->control(),
        static_cast<uint8_t*>(regions_->region(protocol::RegionKind::kLeases)), regions_->slots(),
        regions_->commits(), memory_.get(), &counters_, &clock_, &insert_delays_);
  }

  uint64_t published_cursor() const {
    return LoadAcquire(&regions_->control()->server.ingest_cursor);
  }
  uint64_t capacity() const { return regions_->config().capacity; }

  // A committed slot that fails its check: ingest reads it again until the
  // re-check window has passed, then counts it torn. Returns what the step
  // after the window handled.
  uint64_t StepPastTheRecheck() {
    EXPECT_EQ(ingest_->Step(), 0u);
    EXPECT_EQ(counters_.torn_slots, 0u);
    clock_.Advance(kTornRecheck);
    return ingest_->Step();
  }

  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<replay::ReplayMemory> memory_;
  ReplayCounters counters_;
  FakeClock clock_;
  BucketHistogram insert_delays_{BucketHistogram::DelayBoundsSeconds()};
  std::unique_ptr<Ingest> ingest_;
};

TEST_F(IngestTest, InsertsCommittedSlotsWithTheirPrioritiesAndPublishesTheCursor) {
  for (int k = 0; k < 5; ++k) Insert(*regions_, 1.5f + k);
  EXPECT_EQ(ingest_->Step(), 5u);
  EXPECT_EQ(counters_.inserted, 5u);
  EXPECT_EQ(memory_->size(), 5u);
  EXPECT_EQ(ingest_->cursor(), 5u);
  EXPECT_EQ(published_cursor(), 5u);
  EXPECT_EQ(memory_->sequence(3), 3u);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(3), 1.5 + 3 + 0.5);
  EXPECT_EQ(ingest_->Step(), 0u);  // nothing new
}

TEST_F(IngestTest, AnUncommittedSequenceMakesItsLeaseWaitWithoutATimeout) {
  const uint64_t q = Reserve(*regions_, 1);  // written, never committed
  Insert(*regions_, 1.f);
  EXPECT_EQ(ingest_->Step(), 0u);
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(ingest_->Step(), 0u);
  EXPECT_EQ(ingest_->cursor(), q);
  WriteSlot(*regions_, q, 2.f, 128);
  Commit(*regions_, q);
  EXPECT_EQ(ingest_->Step(), 2u);
  EXPECT_EQ(counters_.inserted, 2u);
  EXPECT_EQ(counters_.torn_slots + counters_.overrun_slots, 0u);  // waited, lost nothing
}

TEST_F(IngestTest, RejectsASlotWithABadChecksum) {
  const uint64_t q = Reserve(*regions_, 1);
  WriteSlot(*regions_, q, 1.f, 128);
  regions_->slot(q)[sizeof(protocol::SlotHeader) + 40] ^= 0x01;
  Commit(*regions_, q);
  EXPECT_EQ(StepPastTheRecheck(), 1u);
  EXPECT_EQ(counters_.torn_slots, 1u);
  EXPECT_EQ(counters_.inserted, 0u);
  EXPECT_EQ(memory_->size(), 0u);
}

TEST_F(IngestTest, RejectsASlotWhoseHeaderNamesAnotherSequence) {
  const uint64_t q = Reserve(*regions_, 1);
  WriteSlot(*regions_, q + 1, 1.f, 128);  // a well-formed slot, wrong sequence
  std::memmove(regions_->slot(q), regions_->slot(q + 1), regions_->config().slot_size);
  Commit(*regions_, q);
  EXPECT_EQ(StepPastTheRecheck(), 1u);
  EXPECT_EQ(counters_.torn_slots, 1u);
  EXPECT_EQ(memory_->size(), 0u);
}

TEST_F(IngestTest, RejectsACommitWithoutItsSlot) {
  const uint64_t q = Reserve(*regions_, 1);
  Commit(*regions_, q);  // slot never written: all zeros
  EXPECT_EQ(StepPastTheRecheck(), 1u);
  EXPECT_EQ(counters_.torn_slots, 1u);
  EXPECT_EQ(memory_->size(), 0u);
}

TEST_F(IngestTest, RejectsAPartiallyWrittenPayload) {
  // The previous occupant's bytes remain in the second half of the payload.
  const uint64_t old_q = Insert(*regions_, 1.f);
  ASSERT_EQ(ingest_->Step(), 1u);
  for (uint64_t k = 1; k < capacity(); ++k) Insert(*regions_, 1.f);
  ASSERT_EQ(ingest_->Step(), capacity() - 1);
  const uint64_t q = Reserve(*regions_, 1);
  ASSERT_EQ(testing::SlotOf(regions_->config(), q), testing::SlotOf(regions_->config(), old_q));
  uint8_t* slot = regions_->slot(testing::SlotOf(regions_->config(), q));
  std::vector<uint8_t> before(slot, slot + regions_->config().slot_size);
  WriteSlot(*regions_, q, 1.f, 128);
  std::memcpy(slot + 96, before.data() + 96, regions_->config().slot_size - 96);
  Commit(*regions_, q);
  EXPECT_EQ(StepPastTheRecheck(), 1u);
  EXPECT_EQ(counters_.torn_slots, 1u);
  EXPECT_EQ(counters_.inserted, capacity());
  // The previous occupant was evicted with its slot.
  EXPECT_FALSE(memory_->valid(testing::SlotOf(regions_->config(), q)));
}

TEST_F(IngestTest, ASlotWhoseCommitIsSeenBeforeItsDataIsIngestedWhenTheDataArrives) {
  const uint64_t q = Reserve(*regions_, 1);
  Commit(*regions_, q);  // the commit WRITE placed before the slot's
  EXPECT_EQ(ingest_->Step(), 0u);
  EXPECT_EQ(ingest_->cursor(), q);
  WriteSlot(*regions_, q, 2.f, 128);
  clock_.Advance(kTornRecheck / 2);
  EXPECT_EQ(ingest_->Step(), 1u);
  EXPECT_EQ(counters_.inserted, 1u);
  EXPECT_EQ(counters_.torn_slots, 0u);
  EXPECT_EQ(memory_->sequence(testing::SlotOf(regions_->config(), q)), q);
}

TEST_F(IngestTest, OneRecheckWindowCoversABatchOfBadCommits) {
  const uint64_t first = Reserve(*regions_, 3);
  for (uint64_t q = first; q < first + 3; ++q) Commit(*regions_, q);  // no slots
  EXPECT_EQ(StepPastTheRecheck(), 3u);
  EXPECT_EQ(counters_.torn_slots, 3u);
  EXPECT_EQ(counters_.inserted, 0u);
}

TEST_F(IngestTest, WithoutARecheckABadSlotIsTornAtOnce) {
  IngestOptions options;
  options.torn_recheck = absl::ZeroDuration();
  MakeIngest(options);
  const uint64_t q = Reserve(*regions_, 1);
  Commit(*regions_, q);
  EXPECT_EQ(ingest_->Step(), 1u);
  EXPECT_EQ(counters_.torn_slots, 1u);
}

TEST_F(IngestTest, RunsAroundATornSlotAMissingPriorityAndTheWrapKeepEveryEntry) {
  IngestOptions options;
  options.torn_recheck = absl::ZeroDuration();
  options.max_per_step = 1000;
  MakeIngest(options);
  for (uint64_t k = 0; k + 4 < capacity(); ++k) Insert(*regions_, 1.f);
  ASSERT_EQ(ingest_->Step(), capacity() - 4);
  // Eight more: they wrap from index capacity - 4 to index 3; the third is
  // torn, the fourth has no estimate (the memory's max at its turn: 3.5).
  const float priorities[8] = {2, 3, 0, std::numeric_limits<float>::quiet_NaN(), 5, 6, 7, 8};
  const uint64_t first = Reserve(*regions_, 8);
  for (uint64_t k = 0; k < 8; ++k) {
    if (k != 2) WriteSlot(*regions_, first + k, priorities[k], 64);
    Commit(*regions_, first + k);
  }
  EXPECT_EQ(ingest_->Step(), 8u);
  EXPECT_EQ(counters_.torn_slots, 1u);
  EXPECT_EQ(counters_.priorities_bounded, 1u);
  const double expected[8] = {2.5, 3.5, 0, 3.5, 5.5, 6.5, 7.5, 8.5};
  for (uint64_t k = 0; k < 8; ++k) {
    const uint64_t index = (first + k) % capacity();
    EXPECT_EQ(memory_->valid(index), k != 2) << k;
    if (k != 2) {
      EXPECT_EQ(memory_->sequence(index), first + k) << k;
    }
    EXPECT_DOUBLE_EQ(memory_->stored_priority(index), expected[k]) << k;
  }
  EXPECT_EQ(memory_->size(), capacity() - 1);
  EXPECT_DOUBLE_EQ(memory_->total_priority(),
                   (capacity() - 8) * 1.5 + 2.5 + 3.5 + 3.5 + 5.5 + 6.5 + 7.5 + 8.5);
}

TEST_F(IngestTest, RejectsALengthThatDoesNotFitTheSlot) {
  const uint64_t q = Reserve(*regions_, 1);
  WriteSlot(*regions_, q, 1.f, 128);
  protocol::SlotHeader h;
  std::memcpy(&h, regions_->slot(q), sizeof(h));
  h.payload_length = regions_->config().slot_size;  // would read past the slot
  std::memcpy(regions_->slot(q), &h, sizeof(h));
  Commit(*regions_, q);
  EXPECT_EQ(StepPastTheRecheck(), 1u);
  EXPECT_EQ(counters_.torn_slots, 1u);
}

TEST_F(IngestTest, CountsALappedSlotAsOverrunAndIngestsTheLaterSequence) {
  // Actors reserve more than a ring's worth before ingest runs; a
  // misbehaving one writes sequence capacity (slot 0) over sequence 0.
  Reserve(*regions_, capacity() + 1);
  for (uint64_t q = 1; q < capacity(); ++q) {
    WriteSlot(*regions_, q, 1.f, 64);
    Commit(*regions_, q);
  }
  WriteSlot(*regions_, capacity(), 1.f, 64);
  Commit(*regions_, capacity());
  EXPECT_EQ(ingest_->Step(), capacity() + 1);
  EXPECT_EQ(counters_.overrun_slots, 1u);
  EXPECT_EQ(counters_.inserted, capacity());
  EXPECT_EQ(memory_->sequence(0), capacity());
  EXPECT_EQ(counters_.torn_slots, 0u);
}

TEST_F(IngestTest, InsertingASlotEvictsItsPreviousOccupant) {
  for (uint64_t k = 0; k < capacity(); ++k) Insert(*regions_, 1.f);
  EXPECT_EQ(ingest_->Step(), capacity());
  for (uint64_t k = 0; k < 3; ++k) Insert(*regions_, 1.f);
  EXPECT_EQ(ingest_->Step(), 3u);
  EXPECT_EQ(memory_->size(), capacity());
  EXPECT_EQ(memory_->sequence(2), capacity() + 2);
  EXPECT_EQ(memory_->sequence(3), 3u);
}

TEST_F(IngestTest, EvictsTheOccupantsOfSlotsActorsMayBeRewriting) {
  for (uint64_t k = 0; k < capacity(); ++k) Insert(*regions_, 1.f);
  ASSERT_EQ(ingest_->Step(), capacity());
  ASSERT_EQ(memory_->size(), capacity());
  // Three sequences of the next lap are reserved: slots 0..2 are about to be
  // rewritten, so their occupants (sequences 0..2) leave the memory at once.
  Reserve(*regions_, 3);
  EXPECT_EQ(ingest_->Step(), 0u);
  EXPECT_EQ(memory_->size(), capacity() - 3);
  EXPECT_FALSE(memory_->valid(0));
  EXPECT_FALSE(memory_->valid(2));
  EXPECT_TRUE(memory_->valid(3));
}

TEST_F(IngestTest, EvictsAheadOnlyWithinTheActorWindow) {
  protocol::LayoutConfig config = SmallConfig();
  config.actor_window = 8;
  regions_ = ReplayRegions::Create(config).value();
  MakeIngest(IngestOptions{});
  for (uint64_t k = 0; k < capacity(); ++k) Insert(*regions_, 1.f);
  ASSERT_EQ(ingest_->Step(), capacity());
  Reserve(*regions_, 20);  // only 8 of them may be written yet
  EXPECT_EQ(ingest_->Step(), 0u);
  EXPECT_EQ(memory_->size(), capacity() - 8);
  EXPECT_FALSE(memory_->valid(7));
  EXPECT_TRUE(memory_->valid(8));
}

TEST_F(IngestTest, HandlesAtMostMaxPerStep) {
  IngestOptions options;
  options.max_per_step = 4;
  MakeIngest(options);
  for (int k = 0; k < 10; ++k) Insert(*regions_, 1.f);
  EXPECT_EQ(ingest_->Step(), 4u);
  EXPECT_EQ(published_cursor(), 4u);
  EXPECT_EQ(ingest_->Step(), 4u);
  EXPECT_EQ(ingest_->Step(), 2u);
}

TEST_F(IngestTest, ARestartContinuesEachLeaseFromItsCursor) {
  for (int k = 0; k < 6; ++k) Insert(*regions_, 1.f);
  ingest_->Restart(std::vector<uint64_t>{4}, 9);
  EXPECT_EQ(published_cursor(), 4u);
  EXPECT_EQ(LoadAcquire(&regions_->lease_line(0)->ingest_cursor), 4u);
  EXPECT_EQ(ingest_->Step(), 2u);  // sequences 4 and 5 only
  EXPECT_EQ(counters_.inserted, 2u);
  EXPECT_EQ(ingest_->journal_end(), 10u);
}

TEST_F(IngestTest, RecordsTheInsertToIngestDelayOfStampedSlots) {
  const int64_t now_ns = absl::ToUnixNanos(clock_.WallNow());
  auto insert_stamped = [&](int64_t stamp_ns) {
    const uint64_t q = Reserve(*regions_, 1);
    WriteSlot(*regions_, q, 1.f, 128, /*actor_id=*/0, static_cast<uint64_t>(stamp_ns));
    Commit(*regions_, q);
  };
  insert_stamped(now_ns - 3000000);    // 3 ms ago
  insert_stamped(now_ns - 200000000);  // 200 ms ago
  insert_stamped(now_ns + 1000000);    // "in the future": clock skew, counts as 0
  insert_stamped(0);                   // no stamp: not counted
  EXPECT_EQ(ingest_->Step(), 4u);
  const HistogramSnapshot s = insert_delays_.Snapshot();
  EXPECT_EQ(s.count, 3u);
  EXPECT_NEAR(s.sum, 0.203, 1e-9);
  const std::vector<double>& bounds = s.upper_bounds;
  auto bucket_of = [&](double bound) {
    return s.bucket_counts[std::find(bounds.begin(), bounds.end(), bound) - bounds.begin()];
  };
  EXPECT_EQ(bucket_of(1e-5), 1u);  // the skewed one, as 0
  EXPECT_EQ(bucket_of(5e-3), 1u);  // 3 ms in (2.5 ms, 5 ms]
  EXPECT_EQ(bucket_of(0.25), 1u);  // 200 ms in (100 ms, 250 ms]
}

TEST_F(IngestTest, CountsEveryInsertOfABatchStampedAlike) {
  const int64_t now_ns = absl::ToUnixNanos(clock_.WallNow());
  auto insert_stamped = [&](int64_t stamp_ns, int n) {
    for (int k = 0; k < n; ++k) {
      const uint64_t q = Reserve(*regions_, 1);
      WriteSlot(*regions_, q, 1.f, 128, /*actor_id=*/0, static_cast<uint64_t>(stamp_ns));
      Commit(*regions_, q);
    }
  };
  insert_stamped(now_ns - 2000000, 5);    // a batch 2 ms ago
  insert_stamped(now_ns - 200000000, 1);  // 200 ms ago
  insert_stamped(now_ns - 2000000, 2);    // the first stamp again
  EXPECT_EQ(ingest_->Step(), 8u);
  insert_stamped(now_ns - 2000000, 3);  // and in the next step
  EXPECT_EQ(ingest_->Step(), 3u);
  const HistogramSnapshot s = insert_delays_.Snapshot();
  EXPECT_EQ(s.count, 11u);
  EXPECT_NEAR(s.sum, 10 * 0.002 + 0.2, 1e-9);
  const std::vector<double>& bounds = s.upper_bounds;
  const auto at = [&](double bound) {
    return s.bucket_counts[std::find(bounds.begin(), bounds.end(), bound) - bounds.begin()];
  };
  EXPECT_EQ(at(2.5e-3), 10u);
  EXPECT_EQ(at(0.25), 1u);
}

// Four leases of 16 slots each.
class LeasedIngestTest : public IngestTest {
 protected:
  void SetUp() override {
    IngestTest::SetUp();
    protocol::LayoutConfig config = SmallConfig();
    config.leases = 4;
    regions_ = ReplayRegions::Create(config).value();
    IngestOptions options;
    options.torn_recheck = kTornRecheck;
    options.max_priority = 100.f;
    MakeIngest(options);
  }
  uint64_t lease_cursor(uint32_t lease) const {
    return LoadAcquire(&regions_->lease_line(lease)->ingest_cursor);
  }
};

TEST_F(LeasedIngestTest, AStalledLeaseDoesNotStopIngestOfTheOthers) {
  // Lease 1's actor wrote its slot but stopped before the commit, forever.
  const uint64_t stalled = testing::ReserveLease(*regions_, 1, 1);
  testing::WriteLeaseSlot(*regions_, 1, stalled, 1.f);
  for (int round = 0; round < 5; ++round) {
    for (uint32_t lease : {0u, 2u, 3u}) {
      for (int k = 0; k < 3; ++k) testing::InsertLease(*regions_, lease, 1.f);
    }
    EXPECT_EQ(ingest_->Step(), 9u) << "round " << round;
    clock_.Advance(absl::Seconds(10));
  }
  for (uint32_t lease : {0u, 2u, 3u}) EXPECT_EQ(lease_cursor(lease), 15u);
  EXPECT_EQ(lease_cursor(1), 0u);
  EXPECT_EQ(counters_.inserted, 45u);
  // The stalled slot is not sampleable, and its lease resumes when it commits.
  EXPECT_FALSE(memory_->valid(protocol::LeaseSlotIndex(regions_->config(), 1, stalled)));
  testing::CommitLease(*regions_, 1, stalled);
  EXPECT_EQ(ingest_->Step(), 1u);
  EXPECT_EQ(lease_cursor(1), 1u);
}

TEST_F(LeasedIngestTest, ForgedCommitWordsCorruptOnlyTheirOwnLease) {
  for (uint32_t lease = 0; lease < 4; ++lease) testing::InsertLease(*regions_, lease, 1.f);
  // Lease 2's actor forges commit words for sequences it never wrote and
  // one far ahead; all within its own lease (its keys cover nothing else).
  for (uint64_t q = 1; q < 4; ++q) testing::CommitLease(*regions_, 2, q);
  StoreRelease(&regions_->commits()[protocol::LeaseSlotIndex(regions_->config(), 2, 4)],
               uint64_t{1} << 62);
  for (uint32_t lease : {0u, 1u, 3u}) testing::InsertLease(*regions_, lease, 1.f);
  EXPECT_EQ(ingest_->Step(), 7u);  // the honest ones; lease 2 re-checks its bad slots
  clock_.Advance(kTornRecheck);
  EXPECT_EQ(ingest_->Step(), 4u);  // three torn, one overrun
  EXPECT_EQ(counters_.torn_slots, 3u);
  EXPECT_EQ(counters_.overrun_slots, 1u);
  EXPECT_EQ(counters_.inserted, 7u);
  EXPECT_EQ(LoadAcquire(&regions_->lease_line(2)->torn), 3u);
  EXPECT_EQ(LoadAcquire(&regions_->lease_line(0)->torn), 0u);
  for (uint32_t lease : {0u, 1u, 3u}) EXPECT_EQ(lease_cursor(lease), 2u);
  for (uint64_t q = 1; q < 5; ++q) {
    EXPECT_FALSE(memory_->valid(protocol::LeaseSlotIndex(regions_->config(), 2, q)));
  }
}

TEST_F(LeasedIngestTest, AbsurdPrioritiesAreBoundedAndCounted) {
  const float raw[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(), -5.f, 1e30f, 7.f};
  for (float p : raw) testing::InsertLease(*regions_, 3, p);
  EXPECT_EQ(ingest_->Step(), 5u);
  EXPECT_EQ(counters_.priorities_bounded, 4u);
  EXPECT_EQ(LoadAcquire(&regions_->lease_line(3)->priorities_bounded), 4u);
  // (p + epsilon)^alpha with alpha 1, epsilon 0.5: 1e30 was clamped to 100.
  const protocol::LayoutConfig& c = regions_->config();
  EXPECT_DOUBLE_EQ(memory_->stored_priority(protocol::LeaseSlotIndex(c, 3, 3)), 100.5);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(protocol::LeaseSlotIndex(c, 3, 4)), 7.5);
  EXPECT_LE(memory_->max_priority(), 100.5);
}

TEST_F(LeasedIngestTest, ZeroNegativeZeroAndDenormalInitialPrioritiesHaveTheirDefinedOutcomes) {
  // Memory empty: "no estimate" is initial_max_priority (1), stored as
  // (1 + 0.5)^1. 0 and -0.0 are "no estimate" without being bounded; a
  // denormal is a real (tiny) priority.
  const float raw[] = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min()};
  for (float p : raw) testing::InsertLease(*regions_, 1, p);
  EXPECT_EQ(ingest_->Step(), 3u);
  EXPECT_EQ(counters_.priorities_bounded, 0u);
  const protocol::LayoutConfig& c = regions_->config();
  EXPECT_DOUBLE_EQ(memory_->stored_priority(protocol::LeaseSlotIndex(c, 1, 0)),
                   memory_->stored_priority(protocol::LeaseSlotIndex(c, 1, 1)));
  EXPECT_GT(memory_->stored_priority(protocol::LeaseSlotIndex(c, 1, 0)), 0.5);
  EXPECT_DOUBLE_EQ(memory_->stored_priority(protocol::LeaseSlotIndex(c, 1, 2)), 0.5);
}

TEST_F(LeasedIngestTest, EveryCommittedSequenceIsIngestedOnceAndJournalledInOrder) {
  // Interleaved inserts across leases, ingested over several bounded steps
  // and around each lease's wrap.
  IngestOptions options;
  options.max_per_step = 5;
  options.max_per_lease = 2;
  MakeIngest(options);
  std::vector<uint64_t> inserted(4, 0);
  uint64_t handled = 0;
  for (int round = 0; round < 40; ++round) {
    const uint32_t lease = static_cast<uint32_t>((round * 7) % 4);
    if (inserted[lease] < lease_cursor(lease) + 16) {
      testing::InsertLease(*regions_, lease, 1.f);
      ++inserted[lease];
    }
    handled += ingest_->Step();
  }
  while (uint64_t n = ingest_->Step()) handled += n;
  uint64_t total = 0;
  for (uint32_t lease = 0; lease < 4; ++lease) {
    EXPECT_EQ(lease_cursor(lease), inserted[lease]);
    total += inserted[lease];
  }
  EXPECT_EQ(handled, total);
  EXPECT_EQ(counters_.inserted, total);
  // The journal names every sequence exactly once, each lease in order.
  std::vector<uint64_t> next(4, 0);
  uint64_t journalled = 0;
  for (uint64_t n = 0; n < ingest_->journal_end(); ++n) {
    const protocol::JournalEntry* e = regions_->journal_entry(n);
    ASSERT_EQ(e->number, n);
    ASSERT_LT(e->lease, 4u);
    EXPECT_EQ(e->first_sequence, next[e->lease]);
    next[e->lease] += e->count;
    journalled += e->count;
  }
  EXPECT_EQ(journalled, total);
  EXPECT_EQ(LoadAcquire(&regions_->control()->server.journal_end), ingest_->journal_end());
}

TEST(IngestOptionsTest, RejectsBadValues) {
  IngestOptions options;
  EXPECT_TRUE(options.Validate().ok());
  options.max_per_step = 0;
  EXPECT_FALSE(options.Validate().ok());
  options.max_per_step = 1;
  options.torn_recheck = -absl::Seconds(1);
  EXPECT_FALSE(options.Validate().ok());
  options.torn_recheck = absl::ZeroDuration();
  options.max_priority = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(options.Validate().ok());
  options.max_priority = 0;
  EXPECT_FALSE(options.Validate().ok());
  options.max_priority = 1;
  options.max_per_lease = 0;
  EXPECT_FALSE(options.Validate().ok());
  options.max_per_lease = options.max_per_step + 1;
  const absl::Status s = options.Validate();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("max_per_lease="), std::string::npos) << s;
  options.max_per_lease = options.max_per_step;
  EXPECT_TRUE(options.Validate().ok());
}

// With reservations, a restart ingests the committed prefix the restore kept,
// then moves the lease up whole laps past the file's mark, and from then on a
// cursor is published only while the persisted mark covers a lease beyond it.
TEST_F(IngestTest, WithReservationsALeaseSkipsWholeLapsPastTheMarkAndStaysUnderIt) {
  const protocol::LayoutConfig& c = regions_->config();
  const uint64_t lease_slots = protocol::LeaseSlots(c);
  const char* tmp = std::getenv("TEST_TMPDIR");
  SequenceReservationsOptions ro;
  ro.path = std::string(tmp != nullptr ? tmp : "/tmp") + "/ingest_reservations";
  std::remove(ro.path.c_str());
  ro.leases = c.leases;
  ro.lease_slots = lease_slots;
  ro.step_leases = 1;
  {
    // What a killed server left: lease 0 handed out up to 2 laps and 3.
    auto previous = SequenceReservations::Open(ro);
    ASSERT_TRUE(previous.ok()) << previous.status();
    std::vector<uint64_t> marks(c.leases, 0);
    marks[0] = 2 * lease_slots + 3;
    ASSERT_TRUE((*previous)->WriteExact(marks).ok());
  }
  auto reservations = SequenceReservations::Open(ro);
  ASSERT_TRUE(reservations.ok()) << reservations.status();

  // The restore kept 5 committed, not yet ingested sequences.
  for (int k = 0; k < 5; ++k) Insert(*regions_, 1.0f);
  ASSERT_TRUE(ingest_->UseReservations(reservations->get()).ok());
  EXPECT_EQ(counters_.inserted, 5u) << "the committed prefix is ingested first";
  EXPECT_EQ(ingest_->skipped_laps(0), 2u);
  EXPECT_EQ(ingest_->lease_cursor(0), 5 + 2 * lease_slots) << "same ring position, 2 laps on";
  EXPECT_EQ(ingest_->sequences_skipped(), 2 * lease_slots);
  const auto lease_cursor = [&] { return LoadAcquire(&regions_->lease_line(0)->ingest_cursor); };
  EXPECT_EQ(lease_cursor(), 5 + 2 * lease_slots);
  EXPECT_GE((*reservations)->reserved(0), lease_cursor() + lease_slots);

  // New inserts go on above the mark; the persisted mark always covers a
  // whole lease beyond the published cursor, growing a lap at a time (by
  // the reservations' thread: the published cursor waits for each sync).
  const uint64_t syncs = (*reservations)->syncs();
  for (uint64_t k = 0; k < 3 * lease_slots; ++k) {
    EXPECT_GE(Insert(*regions_, 1.0f), 5 + 2 * lease_slots);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    do {
      ingest_->Step();
      ASSERT_GE((*reservations)->reserved(0), lease_cursor() + lease_slots) << k;
      if (lease_cursor() == 5 + 2 * lease_slots + k + 1) break;
      absl::SleepFor(absl::Microseconds(100));
    } while (absl::Now() < deadline);
    ASSERT_EQ(lease_cursor(), 5 + 2 * lease_slots + k + 1) << "no sync in 30 s";
  }
  EXPECT_EQ(lease_cursor(), 5 + 5 * lease_slots);
  EXPECT_GE((*reservations)->syncs(), syncs + 2);
  EXPECT_EQ(counters_.torn_slots + counters_.overrun_slots, 0u);

  // A reopened file gives the next restart a floor above all of it.
  auto next = SequenceReservations::Open(ro);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_GE((*next)->floor(0), lease_cursor() + lease_slots);
}

}  // namespace
}  // namespace dreplay::server
