// Copyright dreplay authors.

#include "replay/frame_table.h"

#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay::replay {
namespace {

TEST(FrameTableTest, HoldsTheRecordItWasGivenWithOrWithoutAFrame) {
  FrameTable table(4);
  EXPECT_FALSE(table.Holds(0, 0));
  table.Hold(0, 0, /*has_frame=*/true);
  table.Hold(1, 7, /*has_frame=*/false);
  EXPECT_TRUE(table.Holds(0, 0));
  EXPECT_TRUE(table.HoldsFrame(0, 0));
  EXPECT_FALSE(table.HoldsFrame(0, 4));
  EXPECT_TRUE(table.Holds(1, 7));
  EXPECT_FALSE(table.HoldsFrame(1, 7));
  EXPECT_EQ(table.Release(1, [](uint64_t, uint64_t) { FAIL() << "nothing depends on it"; }), 0u);
  EXPECT_FALSE(table.Holds(1, 7));
  table.Clear();
  EXPECT_FALSE(table.Holds(0, 0));
}

TEST(FrameTableTest, KeepsEachSlotsNeedsUntilTheyAreSetAgain) {
  FrameTable table(4, /*max_needs=*/3);
  EXPECT_TRUE(table.Needs(2).empty());
  const uint16_t needs[] = {3, 1, 2};
  table.SetNeeds(2, needs);
  ASSERT_EQ(table.Needs(2).size(), 3u);
  EXPECT_EQ(table.Needs(2)[0], 3);
  EXPECT_EQ(table.Needs(2)[2], 2);
  EXPECT_TRUE(table.Needs(3).empty());
  table.SetNeeds(2, absl::MakeConstSpan(needs, 1));
  EXPECT_EQ(table.Needs(2).size(), 1u);
}

TEST(FrameTableTest, ReleasingARecordReleasesEveryTransitionRegisteredUnderIt) {
  FrameTable table(8);
  table.Hold(2, 10, true);
  table.AddDependent(2, 3, 11);
  table.AddDependent(2, 5, 13);
  table.AddDependent(4, 6, 14);
  std::vector<std::pair<uint64_t, uint64_t>> released;
  EXPECT_EQ(table.Release(2, [&](uint64_t j, uint64_t q) { released.push_back({j, q}); }), 2u);
  EXPECT_EQ(released, (std::vector<std::pair<uint64_t, uint64_t>>{{5, 13}, {3, 11}}));
  EXPECT_EQ(table.Release(2, [](uint64_t, uint64_t) { FAIL(); }), 0u);
  released.clear();
  table.Release(4, [&](uint64_t j, uint64_t q) { released.push_back({j, q}); });
  EXPECT_EQ(released, (std::vector<std::pair<uint64_t, uint64_t>>{{6, 14}}));
}

// Leases of kLease slots written lap after lap in sequence order, in a
// random interleaving. Each record carries a frame (or not) and maybe a
// transition needing records up to kReach back. The memory the table keeps
// must equal, after every record, what a scan of the whole ring says: the
// transitions whose every needed record is still held, with its frame.
TEST(FrameTableTest, TheMemoryAlwaysHoldsExactlyTheTransitionsWhoseRecordsAreHeld) {
  constexpr uint64_t kLeases = 3, kLease = 64, kReach = 12;
  FrameTable table(kLeases * kLease);
  std::mt19937_64 random(5);
  struct Slot {
    uint64_t sequence = 0;
    bool written = false;
    bool has_frame = false;
    std::vector<uint64_t> needs;  // sequences of the same lease; empty: no transition
  };
  std::vector<Slot> ring(kLeases * kLease);
  std::map<uint64_t, uint64_t> memory;  // slot -> sequence of a sampleable transition
  std::vector<uint64_t> next(kLeases, 0);
  const auto slot_of = [&](uint64_t lease, uint64_t q) { return lease * kLease + q % kLease; };
  const auto held_with_frame = [&](uint64_t lease, uint64_t q) {
    const Slot& s = ring[slot_of(lease, q)];
    return s.written && s.sequence == q && s.has_frame;
  };
  uint64_t released = 0;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t lease = random() % kLeases;
    const uint64_t q = next[lease]++;
    const uint64_t i = slot_of(lease, q);
    released += table.Release(i, [&](uint64_t j, uint64_t q_j) {
      auto it = memory.find(j);
      if (it != memory.end() && it->second == q_j) memory.erase(it);
    });
    memory.erase(i);  // the slot's previous transition, if it had one
    Slot& slot = ring[i];
    slot = Slot{q, true, random() % 8 != 0, {}};
    table.Hold(i, q, slot.has_frame);
    if (random() % 4 != 0) {
      const uint64_t reach = 1 + random() % kReach;
      for (int k = 0; k < 4; ++k) slot.needs.push_back(q - std::min(q, random() % (reach + 1)));
      slot.needs.push_back(q - std::min(q, reach));
      bool all = true;
      uint64_t oldest = q;
      for (uint64_t s : slot.needs) {
        all = all && table.HoldsFrame(slot_of(lease, s), s);
        oldest = std::min(oldest, s);
      }
      if (all) {
        memory[i] = q;
        table.AddDependent(slot_of(lease, oldest), i, q);
      }
    }
    // The scan.
    std::map<uint64_t, uint64_t> expected;
    for (uint64_t j = 0; j < ring.size(); ++j) {
      const Slot& s = ring[j];
      if (!s.written || s.needs.empty()) continue;
      bool all = true;
      for (uint64_t n : s.needs) all = all && held_with_frame(j / kLease, n);
      if (all) expected[j] = s.sequence;
    }
    ASSERT_EQ(memory, expected) << "after record " << q << " of lease " << lease;
  }
  EXPECT_GT(released, 1000u);
  EXPECT_GT(memory.size(), kLeases * kLease / 3);
}

}  // namespace
}  // namespace dreplay::replay
