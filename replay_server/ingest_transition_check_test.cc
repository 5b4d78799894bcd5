// Copyright dreplay authors.
//
// Ingest with a transition spec: what fails protocol::CheckTransition is
// dropped and counted, never inserted (so never sampled or checkpointed).

#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "replay_server/ingest.h"
#include "replay_server/regions.h"
#include "testing/in_memory_peers.h"

namespace dreplay::server {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr char kSpec[] = "env=CartPole-v1 obs=4 act=2 nstep=3 gamma=0.99";

// rl/transition.h's encoding of a CartPole transition, by hand (the server
// side knows no rl/).
struct Fields {
  int32_t action = 1;
  float reward = 1.0f;
  float discount = 0.99f;
  float observation0 = 0.25f;
};
std::vector<uint8_t> Encode(const Fields& f) {
  std::vector<uint8_t> out(20 + 2 * 4 * 4, 0);
  const uint32_t observation_size = 4;
  std::memcpy(&out[0], &observation_size, 4);
  std::memcpy(&out[4], &f.action, 4);
  std::memcpy(&out[8], &f.reward, 4);
  std::memcpy(&out[12], &f.discount, 4);
  out[17] = 1;  // steps
  std::memcpy(&out[20], &f.observation0, 4);
  return out;
}

class IngestTransitionCheckTest : public ::testing::Test {
 protected:
  void Make(const char* spec) {
    protocol::LayoutConfig config = testing::SmallConfig();
    config.leases = 2;
    ASSERT_TRUE(config.set_spec(spec).ok());
    regions_ = ReplayRegions::Create(config).value();
    replay::ReplayMemoryOptions mo;
    mo.capacity = config.capacity;
    memory_ = replay::ReplayMemory::Create(mo).value();
    IngestOptions options;
    options.torn_recheck = absl::ZeroDuration();
    ingest_ = std::make_unique<Ingest>(
        regions_->config(), options, regions_->control(),
        static_cast<uint8_t*>(regions_->region(protocol::RegionKind::kLeases)), regions_->slots(),
        regions_->commits(), memory_.get(), &counters_, &clock_);
  }

  // Writes and commits `payload` as the next sequence of `lease`.
  uint64_t Insert(uint32_t lease, const std::vector<uint8_t>& payload) {
    const uint64_t q = testing::ReserveLease(*regions_, lease, 1);
    testing::WriteLeaseSlotPayload(*regions_, lease, q, 1.f, payload);
    testing::CommitLease(*regions_, lease, q);
    return q;
  }
  uint64_t Index(uint32_t lease, uint64_t q) const {
    return protocol::LeaseSlotIndex(regions_->config(), lease, q);
  }

  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<replay::ReplayMemory> memory_;
  ReplayCounters counters_;
  FakeClock clock_;
  std::unique_ptr<Ingest> ingest_;
};

TEST_F(IngestTransitionCheckTest, DropsAndCountsEveryKindOfBadTransitionAndKeepsTheGoodOnes) {
  Make(kSpec);
  ASSERT_TRUE(ingest_->checks_transitions());
  Fields nan_reward, bad_action, nan_observation, bad_discount;
  nan_reward.reward = kNaN;
  bad_action.action = 2;  // act=2: actions 0 and 1
  nan_observation.observation0 = -std::numeric_limits<float>::infinity();
  bad_discount.discount = 1.5f;
  std::vector<uint8_t> short_payload = Encode(Fields{});
  short_payload.resize(30);
  const uint64_t good_first = Insert(1, Encode(Fields{}));
  for (const Fields& f : {nan_reward, bad_action, nan_observation, bad_discount}) {
    Insert(1, Encode(f));
  }
  Insert(1, short_payload);
  const uint64_t good_last = Insert(1, Encode(Fields{}));
  EXPECT_EQ(ingest_->Step(), 7u);
  EXPECT_EQ(counters_.inserted, 2u);
  EXPECT_EQ(ingest_->transitions_invalid(), 5u);
  EXPECT_EQ(counters_.torn_slots, 0u);
  EXPECT_EQ(memory_->size(), 2u);
  EXPECT_TRUE(memory_->valid(Index(1, good_first)));
  EXPECT_TRUE(memory_->valid(Index(1, good_last)));
  for (uint64_t q = good_first + 1; q < good_last; ++q) EXPECT_FALSE(memory_->valid(Index(1, q)));
  EXPECT_EQ(LoadAcquire(&regions_->lease_line(1)->transitions_invalid), 5u);
  EXPECT_EQ(LoadAcquire(&regions_->lease_line(0)->transitions_invalid), 0u);
  EXPECT_EQ(LoadAcquire(&regions_->lease_line(1)->ingest_cursor), good_last + 1);
}

TEST_F(IngestTransitionCheckTest, AnInvalidTransitionEvictsTheSlotsPreviousOccupant) {
  Make(kSpec);
  const uint64_t lease_slots = protocol::LeaseSlots(regions_->config());
  for (uint64_t k = 0; k < lease_slots; ++k) Insert(0, Encode(Fields{}));
  ASSERT_EQ(ingest_->Step(), lease_slots);
  ASSERT_TRUE(memory_->valid(Index(0, 0)));
  Fields bad;
  bad.reward = kNaN;
  const uint64_t q = Insert(0, Encode(bad));  // lands in sequence 0's slot
  ASSERT_EQ(Index(0, q), Index(0, 0));
  EXPECT_EQ(ingest_->Step(), 1u);
  EXPECT_FALSE(memory_->valid(Index(0, 0)));
  EXPECT_EQ(memory_->size(), lease_slots - 1);
}

TEST_F(IngestTransitionCheckTest, WithAFreeFormSpecPayloadsAreNotChecked) {
  Make("test f32");
  EXPECT_FALSE(ingest_->checks_transitions());
  Fields bad;
  bad.reward = kNaN;
  Insert(0, Encode(bad));
  EXPECT_EQ(ingest_->Step(), 1u);
  EXPECT_EQ(counters_.inserted, 1u);
  EXPECT_EQ(ingest_->transitions_invalid(), 0u);
}

}  // namespace
}  // namespace dreplay::server
