// Copyright dreplay authors.
//
// ForwardedFrameIndex: transitions of two leases are forwarded in random
// order from each lease's newest window, with the records their stacks
// need, into a store keyed by the server's slot (as the forwarded batch
// reader's learner cache keeps them), where a newer record replaces the
// one in its slot. After every arrival, every local slot's transition is
// assembled, byte for byte, with the stacks the actor built, though the
// store replaced records it needs, and the index keeps exactly the records
// its transitions need.

#include "learner_client/forwarded_frames.h"

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "learner_client/frame_stream_testing.h"
#include "protocol/frame_record.h"
#include "rl/transition.h"

namespace dreplay::learner {
namespace {

using frame_stream_testing::kDepth;
using frame_stream_testing::kFrameBytes;
using frame_stream_testing::kStackBytes;
using frame_stream_testing::MakeStream;
using frame_stream_testing::Stream;

constexpr uint64_t kLeaseSlots = 64;
constexpr uint32_t kLeases = 2;
constexpr uint64_t kLocalCapacity = 96;

// The back distances of the records a transition record's assembly reads:
// its own (0) and those its references name.
std::set<uint16_t> References(const std::vector<uint8_t>& record) {
  protocol::FrameRecordView view;
  EXPECT_TRUE(protocol::DecodeFrameRecord(record, kFrameBytes, &view).ok());
  std::set<uint16_t> out = {0};
  if (!view.has_transition()) return out;
  for (int k = 0; k < kDepth; ++k) {
    out.insert(view.observation_refs[k]);
    out.insert(view.next_refs[k]);
  }
  return out;
}

// The records a learner holds, by server slot: (sequence, record).
class Store {
 public:
  void Put(uint32_t lease, uint64_t q, const std::vector<uint8_t>& record) {
    slots_[Index(lease, q)] = {q, record};
  }
  absl::Span<const uint8_t> Get(uint32_t lease, uint64_t q) const {
    const auto it = slots_.find(Index(lease, q));
    if (it == slots_.end() || it->second.first != q) return {};
    return absl::MakeConstSpan(it->second.second);
  }

 private:
  static uint64_t Index(uint32_t lease, uint64_t q) {
    return lease * kLeaseSlots + q % kLeaseSlots;
  }
  std::map<uint64_t, std::pair<uint64_t, std::vector<uint8_t>>> slots_;
};

// Asserts that the batch's only row is transition `t`.
void ExpectRow(const rl::TransitionBatch& batch, const rl::Transition& t, uint64_t q) {
  ASSERT_EQ(batch.size(), 1);
  ASSERT_EQ(batch.observations(), t.observation) << "record " << q;
  ASSERT_EQ(batch.next_observations(), t.next_observation) << "record " << q;
  ASSERT_EQ(batch.actions()[0], t.action);
  ASSERT_FLOAT_EQ(batch.rewards()[0], t.reward);
  ASSERT_FLOAT_EQ(batch.discounts()[0], t.discount);
  ASSERT_EQ(batch.dones()[0], t.done ? 1.0f : 0.0f);
}

TEST(ForwardedFrameIndexTest, KeepsEveryRecordItsTransitionsNeedWhateverTheStoreReplaces) {
  std::vector<Stream> streams;
  for (uint32_t l = 0; l < kLeases; ++l) streams.push_back(MakeStream(31 + l, 3000));
  Store store;
  ForwardedFrameIndex index(kLocalCapacity, kDepth, kFrameBytes,
                            [&](uint32_t l, uint64_t q) { return store.Get(l, q); });
  std::mt19937 random(5);
  std::vector<uint64_t> written(kLeases, 0);  // each lease's next sequence
  std::set<std::pair<uint32_t, uint64_t>> forwarded;
  std::vector<std::pair<uint32_t, uint64_t>> at(kLocalCapacity);  // a local slot's transition
  std::vector<bool> inserted(kLocalCapacity, false);
  uint64_t arrivals = 0, assembled = 0, replaced = 0, copies = 0;
  std::map<std::pair<uint32_t, uint64_t>, int> users;
  rl::TransitionBatch batch(kStackBytes, rl::ObservationType::kUint8);
  while (written[0] + 8 < streams[0].records.size() && written[1] + 8 < streams[1].records.size()) {
    const uint32_t l = random() % kLeases;
    written[l] += random() % 6;
    // A transition of the lease's window, not forwarded yet, whose
    // records are all in the window: the server's memory holds it.
    const uint64_t tail = written[l] > kLeaseSlots ? written[l] - kLeaseSlots : 0;
    if (written[l] == tail) continue;
    const uint64_t q = tail + random() % (written[l] - tail);
    const Stream& s = streams[l];
    if (s.transitions.count(q) == 0 || forwarded.count({l, q}) > 0) continue;
    bool valid = true;
    for (const uint16_t d : References(s.records[q])) valid = valid && d <= q && q - d >= tail;
    if (!valid) continue;
    forwarded.insert({l, q});
    // What the batch carries (the learner's store keeps all of it, by
    // slot, replacing what was there), then the transition.
    for (const uint16_t d : References(s.records[q])) store.Put(l, q - d, s.records[q - d]);
    const uint64_t local = arrivals++ % kLocalCapacity;
    // The model of what the index keeps: the records the local transitions
    // need, each copied in when the first of them arrives.
    if (inserted[local]) {
      const auto [old_lease, old_q] = at[local];
      for (const uint16_t d : References(streams[old_lease].records[old_q])) {
        if (--users[{old_lease, old_q - d}] == 0) users.erase({old_lease, old_q - d});
      }
    }
    for (const uint16_t d : References(s.records[q])) {
      if (users[{l, q - d}]++ == 0) ++copies;
    }
    bool insert = false;
    ASSERT_TRUE(index.Accept(local, /*generation=*/0, l, q, s.records[q], &insert).ok());
    ASSERT_TRUE(insert) << "lease " << l << " transition " << q;
    at[local] = {l, q};
    inserted[local] = true;

    // Every local transition assembles, with the actor's stacks, though
    // the store replaced records it needs since it arrived.
    uint64_t needed_now = 0;
    for (uint64_t i = 0; i < kLocalCapacity; ++i) {
      if (!inserted[i]) continue;
      const auto [lease, q_i] = at[i];
      const Stream& si = streams[lease];
      for (const uint16_t d : References(si.records[q_i])) {
        if (store.Get(lease, q_i - d).empty()) ++needed_now;
      }
      batch.Clear();
      ASSERT_TRUE(index.Assemble(i, &batch).ok()) << "lease " << lease << " record " << q_i;
      ExpectRow(batch, si.transitions.at(q_i), q_i);
      ++assembled;
    }
    replaced += needed_now > 0 ? 1 : 0;
  }
  EXPECT_GT(arrivals, 500u);
  EXPECT_GT(assembled, 10000u);
  EXPECT_GT(replaced, 100u);  // steps at which the store no longer had a record still needed
  EXPECT_EQ(index.missing(), 0u);
  // Only the records the local transitions need are kept, each copied in
  // once while kept.
  EXPECT_EQ(index.records_kept(), users.size());
  EXPECT_EQ(index.records_copied(), copies);
}

TEST(ForwardedFrameIndexTest, AfterTheStreamForgetsATransitionNeverUsesARecordOfBefore) {
  const Stream s = MakeStream(9, 200);
  Store store;
  ForwardedFrameIndex index(4, kDepth, kFrameBytes,
                            [&](uint32_t l, uint64_t q) { return store.Get(l, q); });
  // Two transitions that share a record they refer back to.
  uint64_t q = 1;
  auto shares = [&](uint64_t a) {
    if (s.transitions.count(a) == 0 || s.transitions.count(a + 1) == 0) return false;
    std::set<uint64_t> first;
    for (const uint16_t d : References(s.records[a])) first.insert(a - d);
    for (const uint16_t d : References(s.records[a + 1])) {
      if (d >= 2 && first.count(a + 1 - d) > 0) return true;
    }
    return false;
  };
  while (q + 1 < s.records.size() && !shares(q)) ++q;
  ASSERT_LT(q + 1, s.records.size());
  for (const uint16_t d : References(s.records[q])) store.Put(0, q - d, s.records[q - d]);
  bool insert = false;
  ASSERT_TRUE(index.Accept(0, /*generation=*/1, 0, q, s.records[q], &insert).ok());
  ASSERT_TRUE(insert);
  // A restarted server wrote other frames under the same sequences.
  Store restored;
  std::map<uint64_t, std::vector<uint8_t>> changed;
  for (const uint16_t d : References(s.records[q + 1])) {
    std::vector<uint8_t> record = s.records[q + 1 - d];
    protocol::FrameRecordView view;
    ASSERT_TRUE(protocol::DecodeFrameRecord(record, kFrameBytes, &view).ok());
    ASSERT_TRUE(view.has_frame());
    record[record.size() - 1] ^= 0xFF;  // the frame's last byte
    restored.Put(0, q + 1 - d, record);
    changed[q + 1 - d] = record;
  }
  store = restored;
  ASSERT_TRUE(index.Accept(1, /*generation=*/2, 0, q + 1, changed[q + 1], &insert).ok());
  ASSERT_TRUE(insert);
  rl::TransitionBatch batch(kStackBytes, rl::ObservationType::kUint8);
  // The first keeps its own records; the second has the new ones.
  ASSERT_TRUE(index.Assemble(0, &batch).ok());
  ExpectRow(batch, s.transitions.at(q), q);
  batch.Clear();
  ASSERT_TRUE(index.Assemble(1, &batch).ok());
  const rl::Transition& original = s.transitions.at(q + 1);
  EXPECT_EQ(batch.actions()[0], original.action);
  EXPECT_NE(batch.next_observations(), original.next_observation);  // its last frame changed
}

TEST(ForwardedFrameIndexTest, ATransitionWhoseRecordIsNotHeldIsNotInserted) {
  const Stream s = MakeStream(7, 200);
  Store store;
  ForwardedFrameIndex index(8, kDepth, kFrameBytes,
                            [&](uint32_t l, uint64_t q) { return store.Get(l, q); });
  // The first transition that refers back to another record.
  uint64_t q = 0;
  while (q < s.records.size() &&
         (s.transitions.count(q) == 0 || *References(s.records[q]).rbegin() == 0)) {
    ++q;
  }
  ASSERT_LT(q, s.records.size());
  bool insert = true;
  ASSERT_TRUE(index.Accept(0, 0, 0, q, s.records[q], &insert).ok());
  EXPECT_FALSE(insert);
  EXPECT_EQ(index.missing(), 1u);
  rl::TransitionBatch batch(kStackBytes, rl::ObservationType::kUint8);
  EXPECT_TRUE(absl::IsNotFound(index.Assemble(0, &batch)));
  // With its records held it is.
  for (const uint16_t d : References(s.records[q])) store.Put(0, q - d, s.records[q - d]);
  ASSERT_TRUE(index.Accept(0, 0, 0, q, s.records[q], &insert).ok());
  EXPECT_TRUE(insert);
  EXPECT_TRUE(index.Assemble(0, &batch).ok());
}

TEST(ForwardedFrameIndexTest, ARecordThatDoesNotDecodeOrCarriesNoTransitionIsRefused) {
  const Stream s = MakeStream(8, 50);
  Store store;
  ForwardedFrameIndex index(4, kDepth, kFrameBytes,
                            [&](uint32_t l, uint64_t q) { return store.Get(l, q); });
  bool insert = true;
  const std::vector<uint8_t> garbage(40, 0xAB);
  EXPECT_TRUE(absl::IsInvalidArgument(index.Accept(0, 0, 0, 0, garbage, &insert)));
  EXPECT_FALSE(insert);
  uint64_t q = 0;
  while (s.transitions.count(q) > 0) ++q;  // a frame-only record
  EXPECT_TRUE(absl::IsInvalidArgument(index.Accept(1, 0, 0, q, s.records[q], &insert)));
  EXPECT_FALSE(insert);
}

}  // namespace
}  // namespace dreplay::learner
