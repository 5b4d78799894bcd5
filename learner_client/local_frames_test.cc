// Copyright dreplay authors.
//
// LocalFrameStore: records of two leases arrive interleaved, in each
// lease's order, into a local ring much smaller than the stream, as the
// learner placement's forward reader delivers them. After every arrival
// the memory holds exactly the transitions whose records (their own and
// every one their stacks refer to) are still in the ring, and each one's
// assembled stacks are, byte for byte, the ones the actor built. Records a
// restarted server writes under sequences the store already holds are
// never mixed with the earlier ones.

#include "learner_client/local_frames.h"

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "learner_client/frame_stream_testing.h"
#include "protocol/frame_record.h"
#include "replay/replay_memory.h"
#include "rl/transition.h"

namespace dreplay::learner {
namespace {

using frame_stream_testing::kDepth;
using frame_stream_testing::kFrameBytes;
using frame_stream_testing::kStackBytes;
using frame_stream_testing::MakeStream;
using frame_stream_testing::Stream;

constexpr uint64_t kCapacity = 128;
constexpr uint32_t kLeases = 2;

// The back distances of a record's references (its own 0 included).
std::set<uint16_t> References(const std::vector<uint8_t>& record) {
  protocol::FrameRecordView view;
  EXPECT_TRUE(protocol::DecodeFrameRecord(record, kFrameBytes, &view).ok());
  std::set<uint16_t> out;
  if (!view.has_transition()) return out;
  for (int k = 0; k < kDepth; ++k) {
    out.insert(view.observation_refs[k]);
    out.insert(view.next_refs[k]);
  }
  return out;
}

TEST(LocalFrameStoreTest, HoldsExactlyTheTransitionsWhoseRecordsAreInTheRingWithTheActorsStacks) {
  std::vector<Stream> streams;
  for (uint32_t l = 0; l < kLeases; ++l) streams.push_back(MakeStream(21 + l, 1500));
  replay::ReplayMemoryOptions mo;
  mo.capacity = kCapacity;
  std::unique_ptr<replay::ReplayMemory> memory = replay::ReplayMemory::Create(mo).value();
  LocalFrameStore store(kCapacity, kDepth, kFrameBytes);
  std::mt19937 random(3);
  // Arrival number (the memory's sequence) of each (lease, lease sequence).
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> arrival;
  std::vector<std::pair<uint32_t, uint64_t>> at(kCapacity);  // what each local slot holds
  std::vector<uint64_t> next(kLeases, 0);
  uint64_t sequence = 0, checked = 0, inserted = 0;
  rl::TransitionBatch batch(kStackBytes, rl::ObservationType::kUint8);
  while (next[0] < streams[0].records.size() && next[1] < streams[1].records.size()) {
    const uint32_t l = random() % kLeases;
    const uint64_t q = next[l]++;
    const uint64_t index = sequence % kCapacity;
    bool insert = false;
    ASSERT_TRUE(
        store.Accept(index, sequence, 0, l, q, streams[l].records[q], memory.get(), &insert).ok());
    if (insert) {
      memory->Insert(index, sequence, 1.0f);
      ++inserted;
    }
    arrival[{l, q}] = sequence;
    at[index] = {l, q};
    ++sequence;
    // The model: a transition is held while its own arrival and every
    // record it refers to are among the last kCapacity arrivals, and all
    // of them arrived before it was (they did: each lease is in order).
    for (uint64_t i = 0; i < std::min(sequence, kCapacity); ++i) {
      const auto [lease, q_i] = at[i];
      const Stream& s = streams[lease];
      bool held = s.transitions.count(q_i) > 0;
      for (const uint16_t d : References(s.records[q_i])) {
        const auto it = arrival.find({lease, q_i - d});
        held = held && d <= q_i && it != arrival.end() && it->second + kCapacity >= sequence;
      }
      ASSERT_EQ(memory->valid(i), held) << "lease " << lease << " record " << q_i;
      if (!held) continue;
      batch.Clear();
      ASSERT_TRUE(store.Assemble(i, &batch).ok());
      const rl::Transition& t = s.transitions.at(q_i);
      ASSERT_EQ(batch.observations(), t.observation) << "record " << q_i;
      ASSERT_EQ(batch.next_observations(), t.next_observation) << "record " << q_i;
      ASSERT_EQ(batch.actions()[0], t.action);
      ASSERT_FLOAT_EQ(batch.rewards()[0], t.reward);
      ASSERT_FLOAT_EQ(batch.discounts()[0], t.discount);
      ASSERT_EQ(batch.dones()[0], t.done ? 1.0f : 0.0f);
      ++checked;
    }
  }
  EXPECT_GT(checked, 10000u);
  EXPECT_GT(inserted, 1000u);
  EXPECT_GT(store.evicted(), 100u);  // transitions left as their oldest records were overwritten
  EXPECT_GT(store.missing(), 0u);    // and some arrived after a record they need was gone
}

TEST(LocalFrameStoreTest, AfterARestartStacksAreAssembledOnlyFromRecordsOfTheNewGeneration) {
  // Generation 0 delivers records 0-59 of lease 0; the server restarts from
  // an older checkpoint and, in generation 1, delivers records 40-99 of the
  // same lease with other contents (another actor's stream). Every record
  // fits the ring, so the first 40-59 are still held when the second come.
  const Stream before = MakeStream(21, 100);
  const Stream after = MakeStream(77, 100);
  replay::ReplayMemoryOptions mo;
  mo.capacity = kCapacity;
  std::unique_ptr<replay::ReplayMemory> memory = replay::ReplayMemory::Create(mo).value();
  LocalFrameStore store(kCapacity, kDepth, kFrameBytes);
  uint64_t sequence = 0;
  std::map<uint64_t, uint64_t> slot_of;  // lease sequence (generation 1) -> local slot
  for (uint64_t q = 0; q < 60; ++q, ++sequence) {
    bool insert = false;
    ASSERT_TRUE(
        store.Accept(sequence, sequence, 0, 0, q, before.records[q], memory.get(), &insert).ok());
    if (insert) memory->Insert(sequence, sequence, 1.0f);
  }
  const uint64_t missing_before = store.missing();
  uint64_t inserted = 0, refused = 0;
  for (uint64_t q = 40; q < 100; ++q, ++sequence) {
    bool insert = false;
    ASSERT_TRUE(
        store.Accept(sequence, sequence, 1, 0, q, after.records[q], memory.get(), &insert).ok());
    if (insert) {
      memory->Insert(sequence, sequence, 1.0f);
      slot_of[q] = sequence;
    }
    // A transition referring below 40 needs a record generation 1 never
    // delivered: it is left out, not assembled from generation 0's.
    bool reaches_before_restart = false;
    for (const uint16_t d : References(after.records[q])) reaches_before_restart |= q - d < 40;
    if (after.transitions.count(q) == 0) continue;
    EXPECT_EQ(insert, !reaches_before_restart) << "record " << q;
    insert ? ++inserted : ++refused;
  }
  EXPECT_GT(inserted, 20u);
  EXPECT_GT(refused, 0u);
  EXPECT_EQ(store.missing() - missing_before, refused);
  rl::TransitionBatch batch(kStackBytes, rl::ObservationType::kUint8);
  for (const auto& [q, slot] : slot_of) {
    ASSERT_TRUE(memory->valid(slot));
    batch.Clear();
    ASSERT_TRUE(store.Assemble(slot, &batch).ok());
    EXPECT_EQ(batch.observations(), after.transitions.at(q).observation) << "record " << q;
    EXPECT_EQ(batch.next_observations(), after.transitions.at(q).next_observation);
  }
}

TEST(LocalFrameStoreTest, ARecordThatDoesNotDecodeIsRefusedAndTheSlotHoldsNothing) {
  replay::ReplayMemoryOptions mo;
  mo.capacity = 8;
  std::unique_ptr<replay::ReplayMemory> memory = replay::ReplayMemory::Create(mo).value();
  LocalFrameStore store(8, kDepth, kFrameBytes);
  bool insert = true;
  const std::vector<uint8_t> garbage(40, 0xAB);
  EXPECT_FALSE(store.Accept(0, 0, 0, 0, 0, garbage, memory.get(), &insert).ok());
  EXPECT_FALSE(insert);
  rl::TransitionBatch batch(kStackBytes, rl::ObservationType::kUint8);
  EXPECT_TRUE(absl::IsNotFound(store.Assemble(0, &batch)));
}

}  // namespace
}  // namespace dreplay::learner
