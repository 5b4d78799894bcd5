// Copyright dreplay authors.

#include "protocol/layout.h"

#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "xxhash.h"

namespace dreplay::protocol {
namespace {

LayoutConfig TestConfig() {
  LayoutConfig c;
  c.capacity = 1024;
  c.slot_size = 160;
  c.batch_size = 32;
  c.staging_depth = 4;
  c.param_bytes = 1000;
  c.observation_size = 4;
  c.num_actions = 2;
  EXPECT_TRUE(c.set_spec("cartpole-v1 f32").ok());
  return c;
}

TEST(LayoutConfigTest, AcceptsAValidConfig) {
  EXPECT_TRUE(TestConfig().Validate().ok());
  EXPECT_EQ(TestConfig().max_payload(), 120u);
  EXPECT_EQ(TestConfig().spec(), "cartpole-v1 f32");
}

TEST(LayoutConfigTest, RejectsCapacityThatIsNotAPowerOfTwoAndNamesIt) {
  LayoutConfig c = TestConfig();
  c.capacity = 1000;
  const absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("capacity=1000"), std::string::npos) << s;
}

TEST(LayoutConfigTest, RejectsBadSlotSizeBatchSizeDepthAndSpec) {
  LayoutConfig c = TestConfig();
  c.slot_size = 161;
  EXPECT_NE(c.Validate().message().find("slot_size=161"), std::string::npos);
  c = TestConfig();
  c.slot_size = sizeof(SlotHeader);
  EXPECT_FALSE(c.Validate().ok());
  c = TestConfig();
  c.batch_size = 0;
  EXPECT_NE(c.Validate().message().find("batch_size=0"), std::string::npos);
  c = TestConfig();
  c.batch_size = 2048;  // more than capacity
  EXPECT_FALSE(c.Validate().ok());
  c = TestConfig();
  c.staging_depth = 0;
  EXPECT_NE(c.Validate().message().find("staging_depth=0"), std::string::npos);
  c = TestConfig();
  std::memset(c.transition_spec, 'x', kTransitionSpecBytes);
  EXPECT_FALSE(c.Validate().ok());
  EXPECT_FALSE(c.set_spec(std::string(kTransitionSpecBytes, 'y')).ok());
}

TEST(LayoutConfigTest, ActorWindowDefaultsToTheCapacityAndMayNotExceedIt) {
  LayoutConfig c = TestConfig();
  EXPECT_EQ(ActorWindow(c), 1024u);
  EXPECT_TRUE(SequenceWritable(c, 1023 + 10, 10));
  EXPECT_FALSE(SequenceWritable(c, 1024 + 10, 10));
  c.actor_window = 256;
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(ActorWindow(c), 256u);
  EXPECT_TRUE(SequenceWritable(c, 255 + 10, 10));
  EXPECT_FALSE(SequenceWritable(c, 256 + 10, 10));
  c.actor_window = 1025;
  EXPECT_NE(c.Validate().message().find("actor_window=1025"), std::string::npos);
}

TEST(LayoutConfigTest, FrameStackDividesTheObservationAndSizesTheStagedEntries) {
  LayoutConfig c = TestConfig();
  EXPECT_EQ(StagingEntryCapacity(c), c.batch_size);
  c.frame_stack = 2;  // observation_size 4: two frames of 2 elements
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(StagingEntryCapacity(c), c.batch_size * 5);
  EXPECT_EQ(StagingCommitOffset(c),
            StagingPayloadsOffset(c) + RoundUp(uint64_t{c.batch_size} * 5 * c.slot_size, 64));
  c.frame_stack = 3;
  EXPECT_NE(c.Validate().message().find("frame_stack=3"), std::string::npos);
  c.frame_stack = kMaxFrameStack + 1;
  EXPECT_FALSE(c.Validate().ok());
  LayoutConfig d = TestConfig();
  d.frame_stack = 4;
  EXPECT_EQ(TestConfig().FirstDifference(d), "frame_stack: 0 vs 4");
}

TEST(LayoutConfigTest, FirstDifferenceNamesTheField) {
  LayoutConfig a = TestConfig();
  LayoutConfig b = TestConfig();
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.FirstDifference(b), "");
  b.batch_size = 64;
  EXPECT_NE(a, b);
  EXPECT_EQ(a.FirstDifference(b), "batch_size: 32 vs 64");
  b = TestConfig();
  ASSERT_TRUE(b.set_spec("acrobot").ok());
  EXPECT_NE(a.FirstDifference(b).find("transition_spec"), std::string::npos);
}

TEST(LayoutTest, ControlBlockWordsSitOnTheirOwnCacheLines) {
  EXPECT_EQ(kIngestCursorOffset, 192u);
  EXPECT_EQ(offsetof(ControlBlock, header) + sizeof(ControlHeader), kIngestCursorOffset);
  EXPECT_EQ(sizeof(LeaseLine), kCacheLine);
  EXPECT_EQ(LeaseLineOffset(3) % kCacheLine, 0u);
}

TEST(LayoutTest, CheckControlHeaderRejectsWrongMagicVersionAndConfig) {
  ControlHeader h;
  h.magic = kMagic;
  h.layout_version = kLayoutVersion;
  h.control_block_size = sizeof(ControlBlock);
  h.config = TestConfig();
  EXPECT_TRUE(CheckControlHeader(h).ok());
  ControlHeader bad = h;
  bad.magic = 1;
  EXPECT_EQ(CheckControlHeader(bad).code(), absl::StatusCode::kFailedPrecondition);
  bad = h;
  bad.layout_version = kLayoutVersion + 1;
  EXPECT_EQ(CheckControlHeader(bad).code(), absl::StatusCode::kFailedPrecondition);
  bad = h;
  bad.config.capacity = 3;
  EXPECT_EQ(CheckControlHeader(bad).code(), absl::StatusCode::kInvalidArgument);
}

TEST(LayoutTest, StagingOffsetsFollowFromTheConfig) {
  const LayoutConfig c = TestConfig();
  EXPECT_EQ(StagingEntriesOffset(c), 64u);
  EXPECT_EQ(StagingPayloadsOffset(c), 64u + 32 * 16);
  EXPECT_EQ(StagingCommitOffset(c), 64u + 32 * 16 + 32 * 160);
  EXPECT_EQ(StagingSlotStride(c), StagingCommitOffset(c) + 64);
  EXPECT_EQ(StagingSlotStride(c) % kCacheLine, 0u);
  EXPECT_EQ(StagingSlotOffset(c, 5), 1 * StagingSlotStride(c));
  EXPECT_EQ(StagingRingBytes(c), 4 * StagingSlotStride(c));

  LayoutConfig odd = c;
  odd.batch_size = 3;
  odd.slot_size = 40;
  EXPECT_EQ(StagingPayloadsOffset(odd), 64u + 64);  // 48 rounded up
  EXPECT_EQ(StagingCommitOffset(odd), 128u + 128);  // 120 rounded up
}

TEST(LayoutTest, MailboxAndParamsOffsetsFollowFromTheConfig) {
  const LayoutConfig c = TestConfig();
  EXPECT_EQ(MailboxRecordsOffset(c), 64u);
  EXPECT_EQ(MailboxCommitOffset(c), 64u + 32 * 16);
  EXPECT_EQ(MailboxEntryStride(c), 64u + 32 * 16 + 64);
  EXPECT_EQ(MailboxEntryOffset(c, 6), 2 * MailboxEntryStride(c));
  EXPECT_EQ(MailboxBytes(c), 4 * MailboxEntryStride(c));
  EXPECT_EQ(ParamsHalfStride(c), 64u + 1024);
  EXPECT_EQ(ParamsHalfOffset(c, 0), 64u);
  EXPECT_EQ(ParamsHalfOffset(c, 1), 64u + 64 + 1024);
  EXPECT_EQ(ParamsRegionBytes(c), 64u + 2 * (64 + 1024));
  EXPECT_EQ(ParamsHalfOf(1), 1u);
  EXPECT_EQ(ParamsHalfOf(2), 0u);
  EXPECT_EQ(SlotRingBytes(c), 1024u * 160);
  EXPECT_EQ(CommitWordsBytes(c), 1024u * 8);
}

TEST(LayoutTest, CommitValuesReserveZeroForNeverCommitted) {
  EXPECT_EQ(CommitValue(0), 1u);
  EXPECT_NE(CommitValue(0), kNeverCommitted);
  EXPECT_EQ(BatchCommitValue(0), 1u);
  LayoutConfig c = TestConfig();
  EXPECT_EQ(LeaseSlotIndex(c, 0, c.capacity + 7), 7u);
  c.leases = 4;
  const uint64_t lease_slots = c.capacity / 4;
  EXPECT_EQ(LeaseSlots(c), lease_slots);
  EXPECT_EQ(LeaseSlotIndex(c, 2, lease_slots + 5), 2 * lease_slots + 5);
  EXPECT_EQ(ActorWindow(c), lease_slots);
  c.actor_window = 3;
  EXPECT_EQ(ActorWindow(c), 3u);
  EXPECT_TRUE(SequenceWritable(c, 12, 10));
  EXPECT_FALSE(SequenceWritable(c, 13, 10));
}

TEST(SlotTest, SlotSizeForHoldsTheHeaderAndPayloadRoundedToTheAlignment) {
  EXPECT_EQ(SlotSizeFor(0), sizeof(SlotHeader));
  EXPECT_EQ(SlotSizeFor(1), sizeof(SlotHeader) + kSlotAlignment);
  EXPECT_EQ(SlotSizeFor(128), 168u);
  LayoutConfig c = TestConfig();
  c.slot_size = static_cast<uint32_t>(SlotSizeFor(52));
  EXPECT_TRUE(c.Validate().ok()) << c.Validate();
  EXPECT_GE(c.max_payload(), 52u);
}

TEST(SlotTest, SealedSlotVerifies) {
  const LayoutConfig c = TestConfig();
  std::vector<uint8_t> slot(c.slot_size, 0xAB);
  const char payload[] = "hello transition";
  ASSERT_TRUE(
      SealSlot(slot.data(), c.slot_size, 77, 3, 0.5f, 1234567890123, payload, sizeof(payload))
          .ok());
  SlotHeader h;
  std::memcpy(&h, slot.data(), sizeof(h));
  EXPECT_EQ(h.sequence, 77u);
  EXPECT_EQ(h.actor_id, 3u);
  EXPECT_EQ(h.payload_length, sizeof(payload));
  EXPECT_EQ(h.initial_priority, 0.5f);
  EXPECT_EQ(h.params_version, 0u) << "unknown unless given";
  EXPECT_EQ(h.insert_time_ns, 1234567890123u);
  EXPECT_EQ(h.checksum, SlotChecksum(slot.data(), h.payload_length));
  EXPECT_EQ(VerifySlot(slot.data(), c.slot_size, 77), SlotCheck::kOk);
  // The parameters' version is sealed with the rest: covered by the checksum.
  ASSERT_TRUE(
      SealSlot(slot.data(), c.slot_size, 78, 3, 0.5f, 1, payload, sizeof(payload), 41).ok());
  std::memcpy(&h, slot.data(), sizeof(h));
  EXPECT_EQ(h.params_version, 41u);
  EXPECT_EQ(VerifySlot(slot.data(), c.slot_size, 78), SlotCheck::kOk);
  slot[offsetof(SlotHeader, params_version)] ^= 1;
  EXPECT_NE(VerifySlot(slot.data(), c.slot_size, 78), SlotCheck::kOk);
  ASSERT_TRUE(
      SealSlot(slot.data(), c.slot_size, 77, 3, 0.5f, 1234567890123, payload, sizeof(payload))
          .ok());
  // Bytes after the payload are not covered.
  slot[c.slot_size - 1] ^= 1;
  EXPECT_EQ(VerifySlot(slot.data(), c.slot_size, 77), SlotCheck::kOk);
}

TEST(SlotTest, VerifyRejectsWrongSequenceFlippedBitsAndBadLength) {
  const LayoutConfig c = TestConfig();
  std::vector<uint8_t> slot(c.slot_size, 0);
  std::vector<uint8_t> payload(c.max_payload(), 9);
  ASSERT_TRUE(SealSlot(slot.data(), c.slot_size, 5, 1, 1.f, 0, payload.data(),
                       static_cast<uint32_t>(payload.size()))
                  .ok());
  EXPECT_EQ(VerifySlot(slot.data(), c.slot_size, 6), SlotCheck::kWrongSequence);
  for (size_t byte :
       {size_t{8}, size_t{16}, size_t{24}, size_t{28}, size_t{32}, size_t{c.slot_size - 1}}) {
    std::vector<uint8_t> bad = slot;
    bad[byte] ^= 0x10;
    const SlotCheck check = VerifySlot(bad.data(), c.slot_size, 5);
    EXPECT_NE(check, SlotCheck::kOk) << "byte " << byte;
  }
  std::vector<uint8_t> bad = slot;
  bad[0] ^= 1;  // the checksum itself
  EXPECT_EQ(VerifySlot(bad.data(), c.slot_size, 5), SlotCheck::kBadChecksum);
  SlotHeader h;
  std::memcpy(&h, slot.data(), sizeof(h));
  h.payload_length = c.max_payload() + 1;
  bad = slot;
  std::memcpy(bad.data(), &h, sizeof(h));
  EXPECT_EQ(VerifySlot(bad.data(), c.slot_size, 5), SlotCheck::kBadLength);
  EXPECT_FALSE(
      SealSlot(slot.data(), c.slot_size, 5, 1, 1.f, 0, payload.data(), c.max_payload() + 1).ok());
}

TEST(ChecksumTest, BatchChecksumCoversHeaderEntriesAndCountedSlotsOnly) {
  const LayoutConfig c = TestConfig();
  std::vector<uint8_t> stage(StagingSlotStride(c));
  for (size_t i = 0; i < stage.size(); ++i) stage[i] = static_cast<uint8_t>(i * 7);
  // Three entries, two of them with their copied slot staged.
  const uint64_t sum = BatchChecksum(c, stage.data(), 3, 2);
  auto flip_changes = [&](uint64_t offset) {
    std::vector<uint8_t> s = stage;
    s[offset] ^= 1;
    return BatchChecksum(c, s.data(), 3, 2) != sum;
  };
  EXPECT_FALSE(flip_changes(0));  // the checksum field
  EXPECT_TRUE(flip_changes(8));
  EXPECT_TRUE(flip_changes(63));
  EXPECT_TRUE(flip_changes(StagingEntriesOffset(c) + 3 * 16 - 1));
  EXPECT_FALSE(flip_changes(StagingEntriesOffset(c) + 3 * 16));
  EXPECT_TRUE(flip_changes(StagingPayloadsOffset(c) + 2 * c.slot_size - 1));
  EXPECT_FALSE(flip_changes(StagingPayloadsOffset(c) + 2 * c.slot_size));
  EXPECT_FALSE(flip_changes(StagingCommitOffset(c)));
  // Counts above batch_size are clamped rather than read out of bounds.
  EXPECT_EQ(BatchChecksum(c, stage.data(), 1u << 30, 1u << 30),
            BatchChecksum(c, stage.data(), c.batch_size, c.batch_size));
}

TEST(ChecksumTest, BatchChecksumEqualsAOneShotHashOfTheCoveredBytes) {
  const LayoutConfig c = TestConfig();
  std::vector<uint8_t> stage(StagingSlotStride(c));
  for (size_t i = 0; i < stage.size(); ++i) stage[i] = static_cast<uint8_t>(i * 11 + 5);
  const uint32_t count = 3;
  const uint32_t payload_count = 1;
  std::vector<uint8_t> covered(stage.begin() + 8, stage.begin() + 64);
  covered.insert(covered.end(), stage.begin() + StagingEntriesOffset(c),
                 stage.begin() + StagingEntriesOffset(c) + count * sizeof(BatchEntry));
  covered.insert(covered.end(), stage.begin() + StagingPayloadsOffset(c),
                 stage.begin() + StagingPayloadsOffset(c) + payload_count * c.slot_size);
  const uint64_t expected = XXH3_64bits_withSeed(covered.data(), covered.size(), kChecksumSeed);
  EXPECT_EQ(BatchChecksum(c, stage.data(), count, payload_count), expected);
}

// A staged batch as the sampler writes it: `count` entries of which the
// first `payload_count` carry a copied slot, committed for `batch_number`.
std::vector<uint8_t> StagedImage(const LayoutConfig& c, uint64_t batch_number, uint32_t count,
                                 uint32_t payload_count, uint32_t record_count = 0) {
  std::vector<uint8_t> stage(StagingSlotStride(c), 0x5A);
  BatchHeader h{};
  h.batch_number = batch_number;
  h.epoch = 3;
  h.count = count;
  h.record_count = record_count;
  h.payload_count = payload_count;
  h.used_bytes = StagingUsedBytes(c, payload_count);
  std::memcpy(stage.data(), &h, sizeof(h));
  h.checksum = BatchChecksum(c, stage.data(), count + record_count, payload_count);
  std::memcpy(stage.data(), &h, sizeof(h));
  CommitLine line{};
  line.commit = BatchCommitValue(batch_number);
  line.used_bytes = h.used_bytes;
  std::memcpy(stage.data() + StagingCommitOffset(c), &line, sizeof(line));
  return stage;
}

TEST(StagingTest, TheCommitLineSaysHowMuchToReadAndThatPrefixVerifies) {
  const LayoutConfig c = TestConfig();
  const std::vector<uint8_t> stage = StagedImage(c, 7, 5, 2);
  CommitLine line;
  std::memcpy(&line, stage.data() + StagingCommitOffset(c), sizeof(line));
  const absl::StatusOr<uint64_t> bytes = StagedBatchBytes(c, line, 7);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, StagingPayloadsOffset(c) + 2 * c.slot_size);
  EXPECT_TRUE(CheckBatchImage(c, stage.data(), *bytes, 7, 3).ok());
  EXPECT_TRUE(CheckStagedBatch(c, stage.data(), 7, 3).ok());
  // Not staged yet, another epoch, a short image, a torn byte.
  EXPECT_EQ(StagedBatchBytes(c, line, 8).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CheckBatchImage(c, stage.data(), *bytes, 8, 3).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CheckBatchImage(c, stage.data(), *bytes, 7, 4).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CheckBatchImage(c, stage.data(), *bytes - 1, 7, 3).code(), absl::StatusCode::kDataLoss);
  std::vector<uint8_t> torn = stage;
  torn[*bytes - 1] ^= 1;
  EXPECT_EQ(CheckBatchImage(c, torn.data(), *bytes, 7, 3).code(), absl::StatusCode::kDataLoss);
  // Sizes no batch of the layout has: used_bytes past the slot, entry
  // bytes that are not whole entries or more than the entry area holds.
  CommitLine bad = line;
  bad.used_bytes = StagingUsedBytes(c, StagingEntryCapacity(c)) + 1;
  EXPECT_EQ(StagedBatchBytes(c, bad, 7).status().code(), absl::StatusCode::kDataLoss);
  bad = line;
  bad.entry_bytes = sizeof(BatchEntry) + 1;
  EXPECT_EQ(StagedBatchBytes(c, bad, 7).status().code(), absl::StatusCode::kDataLoss);
  bad.entry_bytes = (uint64_t{StagingEntryCapacity(c)} + 1) * sizeof(BatchEntry);
  const absl::Status too_many = StagedBatchBytes(c, bad, 7).status();
  EXPECT_EQ(too_many.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(too_many.message().find("no batch of this layout"), absl::string_view::npos)
      << too_many;
  bad.entry_bytes = uint64_t{StagingEntryCapacity(c)} * sizeof(BatchEntry);
  EXPECT_TRUE(StagedBatchBytes(c, bad, 7).ok());
}

// A batch whose payload_count copied slots went into one packed block of
// packed_bytes bytes (link compression).
std::vector<uint8_t> PackedImage(const LayoutConfig& c, uint64_t batch_number, uint32_t count,
                                 uint32_t payload_count, uint32_t packed_bytes) {
  std::vector<uint8_t> stage(StagingSlotStride(c), 0x5A);
  BatchHeader h{};
  h.batch_number = batch_number;
  h.epoch = 3;
  h.count = count;
  h.payload_count = payload_count;
  h.packed_bytes = packed_bytes;
  h.used_bytes = StagingPayloadsOffset(c) + packed_bytes;
  std::memcpy(stage.data(), &h, sizeof(h));
  h.checksum = BatchChecksumBytes(c, stage.data(), count, packed_bytes);
  std::memcpy(stage.data(), &h, sizeof(h));
  return stage;
}

TEST(StagingTest, APackedBatchIsReadAndCheckedUpToItsBlockAndMustBeSmaller) {
  const LayoutConfig c = TestConfig();
  EXPECT_EQ(StagedPayloadBytes(c, 3, 0), 3 * c.slot_size);
  EXPECT_EQ(StagedPayloadBytes(c, 3, 17), 17u);
  const uint32_t packed = c.slot_size + 3;  // two slots packed, odd size
  const std::vector<uint8_t> stage = PackedImage(c, 4, 5, 2, packed);
  const uint64_t bytes = StagingPayloadsOffset(c) + packed;
  EXPECT_TRUE(CheckBatchImage(c, stage.data(), bytes, 4, 3).ok());
  // The block's last byte is covered; the byte after it is not.
  std::vector<uint8_t> torn = stage;
  torn[bytes - 1] ^= 1;
  EXPECT_EQ(CheckBatchImage(c, torn.data(), bytes, 4, 3).code(), absl::StatusCode::kDataLoss);
  torn = stage;
  torn[bytes] ^= 1;
  EXPECT_TRUE(CheckBatchImage(c, torn.data(), bytes + 1, 4, 3).ok());
  // A block no smaller than the slots it packs, or a used_bytes that does
  // not end at the block, is a torn or forged header.
  const std::vector<uint8_t> not_smaller = PackedImage(c, 4, 5, 2, 2 * c.slot_size);
  EXPECT_EQ(CheckBatchImage(c, not_smaller.data(), StagingSlotStride(c), 4, 3).code(),
            absl::StatusCode::kDataLoss);
  std::vector<uint8_t> wrong_end = stage;
  BatchHeader h;
  std::memcpy(&h, wrong_end.data(), sizeof(h));
  h.used_bytes += 1;
  h.checksum = BatchChecksumBytes(c, wrong_end.data(), h.count, packed + 1);
  std::memcpy(wrong_end.data(), &h, sizeof(h));
  EXPECT_EQ(CheckBatchImage(c, wrong_end.data(), StagingSlotStride(c), 4, 3).code(),
            absl::StatusCode::kDataLoss);
}

TEST(StagingTest, FrameRecordEntriesFollowTheTransitionsOnlyWithAFrameStack) {
  LayoutConfig c = TestConfig();
  c.frame_stack = 2;
  // 32 transitions and 100 records, 120 of them copied: more than
  // batch_size, within batch_size * 5.
  std::vector<uint8_t> stage = StagedImage(c, 2, 32, 120, 100);
  EXPECT_TRUE(CheckStagedBatch(c, stage.data(), 2, 3).ok());
  // The records' entries are covered by the checksum.
  stage[StagingEntriesOffset(c) + 131 * sizeof(BatchEntry)] ^= 1;
  EXPECT_EQ(CheckStagedBatch(c, stage.data(), 2, 3).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(CheckStagedBatch(c, StagedImage(c, 2, 32, 120, 129).data(), 2, 3).code(),
            absl::StatusCode::kDataLoss);  // more entries than the capacity
  const LayoutConfig plain = TestConfig();
  EXPECT_EQ(CheckStagedBatch(plain, StagedImage(plain, 2, 3, 3, 1).data(), 2, 3).code(),
            absl::StatusCode::kDataLoss);  // records without a frame stack
}

TEST(StagingTest, CachedEntriesKeepTheirIndexBehindTheFlag) {
  BatchEntry e{42, 17u | kEntryCachedBit, 0.5f};
  EXPECT_TRUE(EntryCached(e));
  EXPECT_EQ(EntryIndex(e), 17u);
  e.slot_index = 17;
  EXPECT_FALSE(EntryCached(e));
  EXPECT_EQ(EntryIndex(e), 17u);
}

TEST(StagingTest, StagedWeightsAreTheRatioToTheBatchMinimumToTheBeta) {
  const std::vector<BatchEntry> entries = {{1, 0, 2.0f}, {2, 1, 8.0f}, {3, 2, 0.5f}};
  std::vector<float> w(3);
  StagedWeights(entries, 0.5f, absl::MakeSpan(w));
  EXPECT_FLOAT_EQ(w[0], 0.5f);   // (0.5 / 2)^0.5
  EXPECT_FLOAT_EQ(w[1], 0.25f);  // (0.5 / 8)^0.5
  EXPECT_EQ(w[2], 1.0f);         // the smallest p^alpha: the largest weight
  StagedWeights(entries, 1.0f, absl::MakeSpan(w));
  EXPECT_FLOAT_EQ(w[1], 0.0625f);
  StagedWeights(entries, 0.0f, absl::MakeSpan(w));  // beta 0: no correction
  EXPECT_EQ(w, std::vector<float>(3, 1.0f));
  StagedWeights({}, 0.5f, {});  // an empty batch
}

TEST(StagingTest, StagedWeightsGiveOneToAnEntryWithoutAUsablePriorityAlpha) {
  // 0 (a record's, or a lost value), negative, NaN and infinite p^alpha
  // weigh 1 and do not count towards the minimum.
  const std::vector<BatchEntry> entries = {{1, 0, 0.0f},
                                           {2, 1, 4.0f},
                                           {3, 2, -1.0f},
                                           {4, 3, std::numeric_limits<float>::quiet_NaN()},
                                           {5, 4, std::numeric_limits<float>::infinity()},
                                           {6, 5, 1.0f}};
  std::vector<float> w(entries.size());
  StagedWeights(entries, 1.0f, absl::MakeSpan(w));
  EXPECT_EQ(w, (std::vector<float>{1.0f, 0.25f, 1.0f, 1.0f, 1.0f, 1.0f}));
  // A beta that is not > 0 and finite weighs every entry 1.
  for (const float beta :
       {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    StagedWeights(entries, beta, absl::MakeSpan(w));
    EXPECT_EQ(w, std::vector<float>(entries.size(), 1.0f)) << beta;
  }
  // Far apart p^alpha do not overflow or lose the ratio.
  const std::vector<BatchEntry> wide = {{1, 0, 1e-30f}, {2, 1, 1e30f}};
  std::vector<float> w2(2);
  StagedWeights(wide, 0.5f, absl::MakeSpan(w2));
  EXPECT_EQ(w2[0], 1.0f);
  EXPECT_FLOAT_EQ(w2[1], 1e-30f);
}

TEST(ChecksumTest, MailboxAndParamsChecksumsCoverTheirCountedBytes) {
  const LayoutConfig c = TestConfig();
  std::vector<uint8_t> entry(MailboxEntryStride(c), 3);
  const uint64_t sum = MailboxChecksum(c, entry.data(), 4);
  entry[64 + 4 * 16 - 1] ^= 1;
  EXPECT_NE(MailboxChecksum(c, entry.data(), 4), sum);
  entry[64 + 4 * 16 - 1] ^= 1;
  entry[64 + 4 * 16] ^= 1;
  EXPECT_EQ(MailboxChecksum(c, entry.data(), 4), sum);

  std::vector<uint8_t> half(ParamsHalfStride(c), 5);
  const uint64_t psum = ParamsChecksum(c, half.data(), 100);
  half[8] ^= 1;  // version
  EXPECT_NE(ParamsChecksum(c, half.data(), 100), psum);
  half[8] ^= 1;
  half[64 + 100] ^= 1;
  EXPECT_EQ(ParamsChecksum(c, half.data(), 100), psum);
}

TEST(RegionDirectoryTest, HoldsOnlyTheRegionsItWasGiven) {
  RegionDirectory d;
  EXPECT_TRUE(d.Validate().ok());
  d.Set(RegionKind::kLeases, WireRegion{0x1000, 64, 42, 0});
  d.Set(RegionKind::kSlots, WireRegion{0x2000, 4096, 43, 0});
  EXPECT_TRUE(d.Has(RegionKind::kLeases));
  EXPECT_TRUE(d.Has(RegionKind::kSlots));
  EXPECT_FALSE(d.Has(RegionKind::kStaging));
  EXPECT_EQ(d.Get(RegionKind::kSlots).rkey, 43u);
  EXPECT_EQ(d.Get(RegionKind::kStaging).length, 0u);
  EXPECT_TRUE(d.Validate().ok());
  d.Set(RegionKind::kStats, WireRegion{0x3000, 0, 1, 0});
  EXPECT_EQ(d.Validate().code(), absl::StatusCode::kInvalidArgument);
  RegionDirectory wrong;
  wrong.layout_version = kLayoutVersion + 1;
  EXPECT_EQ(wrong.Validate().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dreplay::protocol

namespace dreplay::protocol {
namespace {

TEST(ParamsTest, EncodedHalfVerifiesAndATornOrOtherVersionDoesNot) {
  const LayoutConfig c = TestConfig();
  std::vector<uint8_t> data(700);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13);
  std::vector<uint8_t> half(ParamsHalfStride(c));
  ASSERT_TRUE(EncodeParamsHalf(c, 5, data, absl::MakeSpan(half)).ok());
  EXPECT_TRUE(CheckParamsHalf(c, half.data(), 5).ok());
  EXPECT_EQ(CheckParamsHalf(c, half.data(), 7).code(), absl::StatusCode::kUnavailable);
  half[sizeof(ParamsHalfHeader) + 699] ^= 1;
  EXPECT_EQ(CheckParamsHalf(c, half.data(), 5).code(), absl::StatusCode::kDataLoss);
  std::vector<uint8_t> too_big(c.param_bytes + 1);
  EXPECT_FALSE(EncodeParamsHalf(c, 6, too_big, absl::MakeSpan(half)).ok());
  std::vector<uint8_t> small(sizeof(ParamsHalfHeader) + 10);
  EXPECT_FALSE(EncodeParamsHalf(c, 6, data, absl::MakeSpan(small)).ok());
}

TEST(RegionKindNameTest, NamesEveryKindAndOnlyThose) {
  EXPECT_STREQ(RegionKindName(RegionKind::kControl), "control");
  EXPECT_STREQ(RegionKindName(RegionKind::kCommits), "commits");
  EXPECT_STREQ(RegionKindName(RegionKind::kActors), "actors");
  for (uint32_t k = 0; k < kNumRegionKinds; ++k) {
    EXPECT_STRNE(RegionKindName(static_cast<RegionKind>(k)), "unknown") << k;
  }
  EXPECT_STREQ(RegionKindName(static_cast<RegionKind>(kNumRegionKinds)), "unknown");
}

}  // namespace
}  // namespace dreplay::protocol
