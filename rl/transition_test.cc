// Copyright dreplay authors.

#include "rl/transition.h"

#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay::rl {
namespace {

Transition MakeTransition() {
  Transition t;
  t.observation = {0.5f, -1.25f, 3.0f, 1e-7f};
  t.action = 1;
  t.reward = 2.9701f;
  t.discount = 0.970299f;
  t.done = false;
  t.steps = 3;
  t.next_observation = {0.25f, 2.0f, -0.125f, -7.5f};
  return t;
}

TEST(TransitionTest, EncodedSizeIsHeaderPlusTwoObservations) {
  EXPECT_EQ(EncodedTransitionSize(4), 20u + 32u);
  EXPECT_EQ(EncodedTransitionSize(6), 20u + 48u);
}

TEST(TransitionTest, EncodeThenDecodeGivesTheSameTransition) {
  for (bool done : {false, true}) {
    Transition t = MakeTransition();
    t.done = done;
    std::vector<uint8_t> buffer(EncodedTransitionSize(4));
    absl::StatusOr<size_t> written = EncodeTransition(t, absl::MakeSpan(buffer));
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(*written, buffer.size());
    absl::StatusOr<Transition> decoded = DecodeTransition(buffer, 4);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, t);
  }
}

TEST(TransitionTest, EncodedPrefixDropsThePaddingAfterTheEncoding) {
  const Transition t = MakeTransition();
  std::vector<uint8_t> padded(EncodedTransitionSize(4) + 100, 0x5a);
  ASSERT_TRUE(EncodeTransition(t, absl::MakeSpan(padded)).ok());
  absl::StatusOr<absl::Span<const uint8_t>> prefix = EncodedTransitionPrefix(padded);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(prefix->size(), EncodedTransitionSize(4));
  EXPECT_EQ(*DecodeTransition(*prefix, 4), t);
  // Without padding the prefix is the whole payload.
  EXPECT_EQ(EncodedTransitionPrefix(prefix->first(EncodedTransitionSize(4)))->size(),
            EncodedTransitionSize(4));
}

TEST(TransitionTest, EncodedPrefixRefusesAPayloadShorterThanItsEncoding) {
  std::vector<uint8_t> buffer(EncodedTransitionSize(4));
  ASSERT_TRUE(EncodeTransition(MakeTransition(), absl::MakeSpan(buffer)).ok());
  EXPECT_FALSE(EncodedTransitionPrefix(absl::MakeConstSpan(buffer).first(buffer.size() - 1)).ok());
  EXPECT_FALSE(EncodedTransitionPrefix(absl::MakeConstSpan(buffer).first(10)).ok());
}

TEST(TransitionTest, EncodingHasTheDocumentedLayout) {
  const Transition t = MakeTransition();
  std::vector<uint8_t> buffer(EncodedTransitionSize(4));
  ASSERT_TRUE(EncodeTransition(t, absl::MakeSpan(buffer)).ok());
  uint32_t observation_size;
  int32_t action;
  float reward, discount, next_last;
  std::memcpy(&observation_size, &buffer[0], 4);
  std::memcpy(&action, &buffer[4], 4);
  std::memcpy(&reward, &buffer[8], 4);
  std::memcpy(&discount, &buffer[12], 4);
  std::memcpy(&next_last, &buffer[20 + 16 + 12], 4);
  EXPECT_EQ(observation_size, 4u);
  EXPECT_EQ(action, 1);
  EXPECT_EQ(reward, t.reward);
  EXPECT_EQ(discount, t.discount);
  EXPECT_EQ(buffer[16], 0);  // done
  EXPECT_EQ(buffer[17], 3);  // steps
  EXPECT_EQ(next_last, -7.5f);
}

TEST(TransitionTest, EncodesIntoTheStartOfALargerBuffer) {
  std::vector<uint8_t> buffer(100, 0xAB);
  absl::StatusOr<size_t> written = EncodeTransition(MakeTransition(), absl::MakeSpan(buffer));
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, 52u);
  EXPECT_EQ(buffer[52], 0xAB);
  absl::StatusOr<Transition> decoded =
      DecodeTransition(absl::MakeConstSpan(buffer.data(), *written), 4);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, MakeTransition());
}

TEST(TransitionTest, EncodeRejectsABufferThatIsTooSmall) {
  std::vector<uint8_t> buffer(EncodedTransitionSize(4) - 1);
  EXPECT_EQ(EncodeTransition(MakeTransition(), absl::MakeSpan(buffer)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TransitionTest, EncodeRejectsObservationsOfDifferentSizes) {
  Transition t = MakeTransition();
  t.next_observation.pop_back();
  std::vector<uint8_t> buffer(100);
  EXPECT_EQ(EncodeTransition(t, absl::MakeSpan(buffer)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TransitionTest, DecodeRejectsWrongSizes) {
  std::vector<uint8_t> buffer(EncodedTransitionSize(4));
  ASSERT_TRUE(EncodeTransition(MakeTransition(), absl::MakeSpan(buffer)).ok());
  // Truncated payload, shorter than the header, trailing bytes.
  EXPECT_EQ(DecodeTransition(absl::MakeConstSpan(buffer.data(), 51), 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeTransition(absl::MakeConstSpan(buffer.data(), 10), 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> longer = buffer;
  longer.push_back(0);
  EXPECT_EQ(DecodeTransition(longer, 4).status().code(), absl::StatusCode::kInvalidArgument);
  // Another environment's observation size.
  EXPECT_EQ(DecodeTransition(buffer, 6).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TransitionTest, DecodeRejectsFieldValuesNoEncoderWrites) {
  std::vector<uint8_t> good(EncodedTransitionSize(4));
  ASSERT_TRUE(EncodeTransition(MakeTransition(), absl::MakeSpan(good)).ok());
  auto decode_with = [&](size_t offset, uint8_t value) {
    std::vector<uint8_t> bad = good;
    bad[offset] = value;
    return DecodeTransition(bad, 4).status().code();
  };
  EXPECT_EQ(decode_with(16, 2), absl::StatusCode::kInvalidArgument);     // done
  EXPECT_EQ(decode_with(17, 0), absl::StatusCode::kInvalidArgument);     // steps
  EXPECT_EQ(decode_with(18, 1), absl::StatusCode::kInvalidArgument);     // observation_type
  EXPECT_EQ(decode_with(19, 1), absl::StatusCode::kInvalidArgument);     // reserved
  EXPECT_EQ(decode_with(7, 0x80), absl::StatusCode::kInvalidArgument);   // action < 0
  EXPECT_EQ(decode_with(15, 0x40), absl::StatusCode::kInvalidArgument);  // discount 2+
}

// A transition whose observations are bytes (a MinAtar grid or frame).
Transition ByteTransition() {
  Transition t = MakeTransition();
  t.observation = {0.0f, 1.0f, 255.0f, 63.0f};
  t.next_observation = {1.0f, 0.0f, 191.0f, 127.0f};
  return t;
}

TEST(TransitionTest, U8ObservationsTakeOneByteEachAndRoundTripExactly) {
  EXPECT_EQ(EncodedTransitionSize(4, ObservationType::kUint8), 20u + 8u);
  // pixels84: s and s' are 8 frames of 84x84 bytes.
  EXPECT_EQ(EncodedTransitionSize(4 * 84 * 84, ObservationType::kUint8), 20u + 56448u);
  const Transition t = ByteTransition();
  std::vector<uint8_t> buffer(EncodedTransitionSize(4, ObservationType::kUint8) + 8, 0xab);
  absl::StatusOr<size_t> written =
      EncodeTransition(t, absl::MakeSpan(buffer), ObservationType::kUint8);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, 28u);
  EXPECT_EQ(buffer[18], 1);  // observation_type u8
  EXPECT_EQ(buffer[20 + 2], 255);
  EXPECT_EQ(buffer[24 + 2], 191);
  absl::StatusOr<absl::Span<const uint8_t>> prefix = EncodedTransitionPrefix(buffer);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(prefix->size(), 28u);
  absl::StatusOr<Transition> decoded = DecodeTransition(*prefix, 4, ObservationType::kUint8);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, t);
  TransitionBatch batch(4, ObservationType::kUint8);
  ASSERT_TRUE(batch.AddEncoded(*prefix).ok());
  EXPECT_EQ(batch.observations(), t.observation);
}

TEST(TransitionTest, U8EncodingRefusesValuesThatAreNotWholeBytes) {
  for (float bad : {-1.0f, 256.0f, 0.5f, std::numeric_limits<float>::quiet_NaN()}) {
    for (bool next : {false, true}) {
      Transition t = ByteTransition();
      (next ? t.next_observation : t.observation)[1] = bad;
      std::vector<uint8_t> buffer(EncodedTransitionSize(4, ObservationType::kUint8));
      EXPECT_EQ(
          EncodeTransition(t, absl::MakeSpan(buffer), ObservationType::kUint8).status().code(),
          absl::StatusCode::kInvalidArgument)
          << bad;
    }
  }
}

TEST(TransitionTest, DecodeRefusesAnotherObservationType) {
  std::vector<uint8_t> bytes(EncodedTransitionSize(4, ObservationType::kUint8));
  ASSERT_TRUE(
      EncodeTransition(ByteTransition(), absl::MakeSpan(bytes), ObservationType::kUint8).ok());
  EXPECT_EQ(DecodeTransition(bytes, 4).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> floats(EncodedTransitionSize(4));
  ASSERT_TRUE(EncodeTransition(ByteTransition(), absl::MakeSpan(floats)).ok());
  EXPECT_EQ(DecodeTransition(floats, 4, ObservationType::kUint8).status().code(),
            absl::StatusCode::kInvalidArgument);
  floats[18] = 7;  // no such type: the prefix cannot be known
  EXPECT_EQ(EncodedTransitionPrefix(floats).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TransitionBatchTest, LaysTransitionsOutAsRows) {
  TransitionBatch batch(4);
  Transition a = MakeTransition();
  Transition b = MakeTransition();
  b.action = 0;
  b.done = true;
  b.observation[0] = 9.0f;
  b.next_observation[3] = -9.0f;
  ASSERT_TRUE(batch.Add(a).ok());
  std::vector<uint8_t> encoded(EncodedTransitionSize(4));
  ASSERT_TRUE(EncodeTransition(b, absl::MakeSpan(encoded)).ok());
  ASSERT_TRUE(batch.AddEncoded(encoded).ok());
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch.observations().size(), 8u);
  EXPECT_EQ(batch.observations()[4], 9.0f);
  EXPECT_EQ(batch.next_observations()[7], -9.0f);
  EXPECT_EQ(batch.actions(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(batch.dones(), (std::vector<float>{0.0f, 1.0f}));
  EXPECT_EQ(batch.rewards()[1], b.reward);
  EXPECT_EQ(batch.discounts()[0], a.discount);
  batch.Clear();
  EXPECT_EQ(batch.size(), 0u);
  EXPECT_TRUE(batch.observations().empty());
}

TEST(TransitionBatchTest, AddsRowsOfBytesAsTheirValues) {
  TransitionBatch batch(3, ObservationType::kUint8);
  const uint8_t obs[] = {0, 7, 255};
  const uint8_t next[] = {1, 2, 3};
  ASSERT_TRUE(batch.AddBytes(2, 0.5f, 0.25f, true, obs, next).ok());
  EXPECT_EQ(batch.observations(), (std::vector<float>{0, 7, 255}));
  EXPECT_EQ(batch.next_observations(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(batch.actions(), (std::vector<int64_t>{2}));
  EXPECT_EQ(batch.rewards(), (std::vector<float>{0.5f}));
  EXPECT_EQ(batch.discounts(), (std::vector<float>{0.25f}));
  EXPECT_EQ(batch.dones(), (std::vector<float>{1.0f}));
  const uint8_t short_obs[] = {1, 2};
  EXPECT_EQ(batch.AddBytes(0, 0, 1, false, short_obs, next).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batch.size(), 1u);
}

TEST(TransitionBatchTest, RejectsOtherObservationSizesAndStaysUnchanged) {
  TransitionBatch batch(6);
  EXPECT_EQ(batch.Add(MakeTransition()).code(), absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> encoded(EncodedTransitionSize(4));
  ASSERT_TRUE(EncodeTransition(MakeTransition(), absl::MakeSpan(encoded)).ok());
  EXPECT_EQ(batch.AddEncoded(encoded).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batch.size(), 0u);
  EXPECT_TRUE(batch.observations().empty());
}

TEST(TransitionTest, CheckTrainableRefusesWhatWouldPoisonTraining) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(CheckTrainable(MakeTransition(), 2).ok());
  Transition t = MakeTransition();
  t.action = 2;  // two actions: 0 and 1
  EXPECT_TRUE(absl::IsInvalidArgument(CheckTrainable(t, 2)));
  t = MakeTransition();
  t.reward = nan;
  EXPECT_TRUE(absl::IsInvalidArgument(CheckTrainable(t, 2)));
  t = MakeTransition();
  t.observation[2] = inf;
  EXPECT_TRUE(absl::IsInvalidArgument(CheckTrainable(t, 2)));
  t = MakeTransition();
  t.next_observation[0] = -inf;
  EXPECT_TRUE(absl::IsInvalidArgument(CheckTrainable(t, 2)));
  t = MakeTransition();
  t.discount = nan;
  EXPECT_TRUE(absl::IsInvalidArgument(CheckTrainable(t, 2)));
}

TEST(TransitionBatchTest, ChecksRowsAndKeepsOnlyTheNamedOnes) {
  TransitionBatch batch(4);
  for (int k = 0; k < 4; ++k) {
    Transition t = MakeTransition();
    t.reward = static_cast<float>(k);
    t.observation[0] = static_cast<float>(10 * k);
    if (k == 1) t.reward = std::numeric_limits<float>::quiet_NaN();
    if (k == 2) t.action = 7;
    ASSERT_TRUE(batch.Add(t).ok());
  }
  std::vector<uint32_t> keep;
  for (uint32_t i = 0; i < batch.size(); ++i) {
    if (batch.CheckRow(i, 2).ok()) keep.push_back(i);
  }
  EXPECT_EQ(keep, (std::vector<uint32_t>{0, 3}));
  batch.KeepRows(keep);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch.rewards(), (std::vector<float>{0.0f, 3.0f}));
  EXPECT_EQ(batch.observations()[4], 30.0f);
  EXPECT_EQ(batch.observations().size(), 8u);
  EXPECT_EQ(batch.next_observations().size(), 8u);
  EXPECT_EQ(batch.actions(), (std::vector<int64_t>{1, 1}));
  batch.KeepRows({});
  EXPECT_EQ(batch.size(), 0u);
}

TEST(TransitionBatchTest, AppendsACopyOfAnotherBatchsRow) {
  TransitionBatch from(4);
  for (int k = 0; k < 3; ++k) {
    Transition t = MakeTransition();
    t.reward = static_cast<float>(k);
    t.action = k % 2;
    t.done = k == 2;
    t.observation[3] = static_cast<float>(100 + k);
    t.next_observation[0] = static_cast<float>(200 + k);
    ASSERT_TRUE(from.Add(t).ok());
  }
  TransitionBatch to(4);
  to.AppendRow(from, 2);
  to.AppendRow(from, 0);
  ASSERT_EQ(to.size(), 2u);
  EXPECT_EQ(to.rewards(), (std::vector<float>{2.0f, 0.0f}));
  EXPECT_EQ(to.actions(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(to.dones(), (std::vector<float>{1.0f, 0.0f}));
  EXPECT_EQ(to.discounts(), (std::vector<float>{from.discounts()[2], from.discounts()[0]}));
  EXPECT_EQ(to.observations()[3], 102.0f);
  EXPECT_EQ(to.observations()[7], 100.0f);
  EXPECT_EQ(to.next_observations()[0], 202.0f);
  EXPECT_EQ(to.next_observations()[4], 200.0f);
  EXPECT_EQ(to.observations().size(), 8u);
}

}  // namespace
}  // namespace dreplay::rl
