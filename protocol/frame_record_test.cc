// Copyright dreplay authors.

#include "protocol/frame_record.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "protocol/transition_encoding.h"

namespace dreplay::protocol {
namespace {

constexpr size_t kFrame = 84 * 84;

std::vector<uint8_t> Frame(uint8_t seed) {
  std::vector<uint8_t> frame(kFrame);
  for (size_t i = 0; i < kFrame; ++i) frame[i] = static_cast<uint8_t>(seed + i * 7);
  return frame;
}

// A record of the 4-frame stacks of a 3-step transition completed by this
// record's frame: s = frames 6, 5, 4, 3 back (the episode's first repeated),
// s' = 3, 2, 1, 0 back.
FrameRecordView Transition(absl::Span<const uint8_t> frame) {
  FrameRecordView r{};
  r.header.flags = kFrameHasFrame | kFrameHasTransition;
  r.header.depth = 4;
  r.header.action = 2;
  r.header.reward = 1.5f;
  r.header.discount = 0.970299f;
  r.header.steps = 3;
  const uint16_t s[] = {6, 5, 4, 3};
  const uint16_t next[] = {3, 2, 1, 0};
  std::memcpy(r.observation_refs, s, sizeof(s));
  std::memcpy(r.next_refs, next, sizeof(next));
  r.frame = frame;
  return r;
}

std::vector<uint8_t> Encode(const FrameRecordView& r) {
  std::vector<uint8_t> out(FrameRecordBytes(kMaxFrameStackDepth, kFrame) + 16, 0xEE);
  absl::StatusOr<size_t> n = EncodeFrameRecord(r, absl::MakeSpan(out));
  EXPECT_TRUE(n.ok()) << n.status();
  out.resize(n.ok() ? *n : 0);
  return out;
}

absl::Status Decode(const std::vector<uint8_t>& bytes) {
  FrameRecordView r;
  return DecodeFrameRecord(bytes, kFrame, &r);
}

TEST(FrameRecordTest, ATransitionRecordRoundTripsWithItsFrameAndReferences) {
  const std::vector<uint8_t> frame = Frame(1);
  const std::vector<uint8_t> bytes = Encode(Transition(frame));
  ASSERT_EQ(bytes.size(), FrameRecordBytes(4, kFrame));
  EXPECT_EQ(bytes.size(), 40 + kFrame);
  FrameRecordView r;
  ASSERT_TRUE(DecodeFrameRecord(bytes, kFrame, &r).ok());
  EXPECT_TRUE(r.has_frame());
  EXPECT_TRUE(r.has_transition());
  EXPECT_FALSE(r.episode_start());
  EXPECT_EQ(r.header.action, 2);
  EXPECT_EQ(r.header.reward, 1.5f);
  EXPECT_EQ(r.header.steps, 3);
  EXPECT_EQ(r.observation_refs[0], 6);
  EXPECT_EQ(r.next_refs[3], 0);
  EXPECT_EQ(std::vector<uint8_t>(r.frame.begin(), r.frame.end()), frame);
  EXPECT_TRUE(IsFrameRecord(bytes));
}

TEST(FrameRecordTest, RecordsWithoutAFrameOrWithoutATransitionRoundTrip) {
  const std::vector<uint8_t> frame = Frame(2);
  FrameRecordView start{};
  start.header.flags = kFrameHasFrame | kFrameEpisodeStart;
  start.header.depth = 4;
  start.frame = frame;
  const std::vector<uint8_t> start_bytes = Encode(start);
  EXPECT_EQ(start_bytes.size(), FrameRecordBytes(4, kFrame));
  FrameRecordView decoded;
  ASSERT_TRUE(DecodeFrameRecord(start_bytes, kFrame, &decoded).ok());
  EXPECT_TRUE(decoded.episode_start());
  EXPECT_FALSE(decoded.has_transition());

  FrameRecordView flushed = Transition({});
  flushed.header.flags = kFrameHasTransition;
  flushed.header.done = 1;
  for (uint16_t& d : flushed.observation_refs) ++d;
  for (uint16_t& d : flushed.next_refs) ++d;
  const std::vector<uint8_t> flushed_bytes = Encode(flushed);
  EXPECT_EQ(flushed_bytes.size(), FrameRecordRefsEnd(4));
  ASSERT_TRUE(DecodeFrameRecord(flushed_bytes, kFrame, &decoded).ok());
  EXPECT_FALSE(decoded.has_frame());
  EXPECT_TRUE(decoded.frame.empty());
  EXPECT_EQ(decoded.next_refs[3], 1);
}

TEST(FrameRecordTest, AnEncodedTransitionIsNotAFrameRecord) {
  std::vector<uint8_t> transition(EncodedTransitionBytes(4, ObservationType::kUint8), 0);
  transition[18] = static_cast<uint8_t>(ObservationType::kUint8);
  EXPECT_FALSE(IsFrameRecord(transition));
  EXPECT_FALSE(Decode(transition).ok());
}

TEST(FrameRecordTest, EncodeRefusesWhatWouldNotDecode) {
  const std::vector<uint8_t> frame = Frame(3);
  std::vector<uint8_t> out(FrameRecordBytes(4, kFrame));
  FrameRecordView unordered = Transition(frame);
  std::swap(unordered.observation_refs[0], unordered.observation_refs[3]);
  EXPECT_TRUE(absl::IsInvalidArgument(EncodeFrameRecord(unordered, absl::MakeSpan(out)).status()));
  FrameRecordView stale = Transition(frame);
  stale.next_refs[3] = 3;  // no newer than the observation's newest frame
  EXPECT_TRUE(absl::IsInvalidArgument(EncodeFrameRecord(stale, absl::MakeSpan(out)).status()));
  FrameRecordView start_with_transition = Transition(frame);
  start_with_transition.header.flags |= kFrameEpisodeStart;
  EXPECT_TRUE(absl::IsInvalidArgument(
      EncodeFrameRecord(start_with_transition, absl::MakeSpan(out)).status()));
  FrameRecordView self_without_frame = Transition({});
  self_without_frame.header.flags = kFrameHasTransition;  // next_refs[3] == 0: itself
  EXPECT_TRUE(
      absl::IsInvalidArgument(EncodeFrameRecord(self_without_frame, absl::MakeSpan(out)).status()));
  std::vector<uint8_t> small(FrameRecordBytes(4, kFrame) - 1);
  EXPECT_TRUE(absl::IsInvalidArgument(
      EncodeFrameRecord(Transition(frame), absl::MakeSpan(small)).status()));
}

// Each case changes one byte of a valid record.
TEST(FrameRecordTest, DecodeRefusesEveryFieldNoEncoderWrites) {
  const std::vector<uint8_t> frame = Frame(4);
  const std::vector<uint8_t> good = Encode(Transition(frame));
  ASSERT_TRUE(Decode(good).ok());
  struct Case {
    const char* what;
    size_t offset;
    uint8_t value;
  };
  const Case cases[] = {
      {"kind", 18, 1},       {"unknown flag", 19, 0x83},
      {"depth 0", 20, 0},    {"depth 17", 20, 17},
      {"reserved", 22, 1},   {"done 2", 16, 2},
      {"steps 0", 17, 0},    {"negative action", 7, 0x80},
      {"frame_bytes", 0, 0}, {"discount above 1", 15, 0x40},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> bad = good;
    bad[c.offset] = c.value;
    EXPECT_TRUE(absl::IsInvalidArgument(Decode(bad))) << c.what;
  }
  std::vector<uint8_t> no_transition = good;
  no_transition[19] = kFrameHasFrame;  // the transition's fields stay set
  EXPECT_TRUE(absl::IsInvalidArgument(Decode(no_transition)));
  std::vector<uint8_t> short_bytes(good.begin(), good.end() - 1);
  EXPECT_TRUE(absl::IsInvalidArgument(Decode(short_bytes)));
  FrameRecordView r;
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeFrameRecord(good, kFrame + 1, &r)));
}

TEST(FrameRecordTest, SequencesListBothStacksOldestFirst) {
  const std::vector<uint8_t> frame = Frame(5);
  const FrameRecordView r = Transition(frame);
  EXPECT_EQ(FrameRecordSequences(r, 100), (std::vector<uint64_t>{94, 95, 96, 97, 97, 98, 99, 100}));
}

TransitionSpec PixelSpec() {
  TransitionSpec spec;
  spec.env = "MinAtar/Breakout";
  spec.observation_size = 4 * kFrame;
  spec.action_count = 6;
  spec.n_step = 3;
  spec.gamma = 0.99;
  spec.observation_type = ObservationType::kUint8;
  return spec;
}

TEST(FrameRecordTest, TheCheckAcceptsRecordsOfTheSpecAndNamesEachFault) {
  const std::vector<uint8_t> frame = Frame(6);
  const TransitionSpec spec = PixelSpec();
  FrameRecordView out;
  EXPECT_EQ(CheckFrameRecord(spec, 4, Encode(Transition(frame)), &out), TransitionFault::kNone);
  EXPECT_EQ(out.header.steps, 3);
  FrameRecordView start{};
  start.header.flags = kFrameHasFrame | kFrameEpisodeStart;
  start.header.depth = 4;
  start.frame = frame;
  EXPECT_EQ(CheckFrameRecord(spec, 4, Encode(start), &out), TransitionFault::kNone);

  TransitionSpec floats = spec;
  floats.observation_type = ObservationType::kFloat32;
  const std::vector<uint8_t> good = Encode(Transition(frame));
  EXPECT_EQ(CheckFrameRecord(floats, 4, good, &out), TransitionFault::kObservationType);
  EXPECT_EQ(CheckFrameRecord(spec, 3, good, &out), TransitionFault::kObservationSize);
  TransitionSpec wider = spec;
  wider.observation_size = 4 * (kFrame + 1);
  EXPECT_EQ(CheckFrameRecord(wider, 4, good, &out), TransitionFault::kObservationSize);
  EXPECT_EQ(CheckFrameRecord(spec, 4, absl::MakeConstSpan(good).first(100), &out),
            TransitionFault::kTooShort);
  FrameRecordView r = Transition(frame);
  r.header.action = 6;
  EXPECT_EQ(CheckFrameRecord(spec, 4, Encode(r), &out), TransitionFault::kAction);
  r = Transition(frame);
  r.header.steps = 4;
  EXPECT_EQ(CheckFrameRecord(spec, 4, Encode(r), &out), TransitionFault::kFields);
  r = Transition(frame);
  r.header.reward = std::numeric_limits<float>::infinity();
  EXPECT_EQ(CheckFrameRecord(spec, 4, Encode(r), &out), TransitionFault::kReward);
  std::vector<uint8_t> bad_discount = good;
  bad_discount[15] = 0x40;  // discount about 3.9
  EXPECT_EQ(CheckFrameRecord(spec, 4, bad_discount, &out), TransitionFault::kDiscount);
  std::vector<uint8_t> bad_flags = good;
  bad_flags[19] = 0x80;
  EXPECT_EQ(CheckFrameRecord(spec, 4, bad_flags, &out), TransitionFault::kFields);
}

}  // namespace
}  // namespace dreplay::protocol
