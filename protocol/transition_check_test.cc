// Copyright dreplay authors.

#include "protocol/transition_check.h"

#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "rl/transition.h"

namespace dreplay::protocol {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TransitionSpec CartPoleSpec() { return TransitionSpec{"CartPole-v1", 4, 2, 3, 0.99}; }

rl::Transition GoodTransition() {
  rl::Transition t;
  t.observation = {0.1f, -0.2f, 0.3f, -0.4f};
  t.action = 1;
  t.reward = 2.5f;
  t.discount = 0.99f * 0.99f;
  t.done = false;
  t.steps = 2;
  t.next_observation = {0.5f, 0.6f, -0.7f, 0.8f};
  return t;
}

// The encoding of `t` followed by `pad` bytes of padding.
std::vector<uint8_t> Encode(const rl::Transition& t, size_t pad = 0) {
  std::vector<uint8_t> out(rl::EncodedTransitionSize(t.observation.size()) + pad, 0xab);
  EXPECT_TRUE(rl::EncodeTransition(t, absl::MakeSpan(out)).ok());
  return out;
}

TransitionFault Check(const rl::Transition& t) {
  return CheckTransition(CartPoleSpec(), Encode(t));
}

TEST(TransitionCheckTest, AcceptsWhatTheEncoderWritesWithOrWithoutPadding) {
  EXPECT_EQ(Check(GoodTransition()), TransitionFault::kNone);
  EXPECT_EQ(CheckTransition(CartPoleSpec(), Encode(GoodTransition(), 24)), TransitionFault::kNone);
  EXPECT_TRUE(CheckTransitionStatus(CartPoleSpec(), Encode(GoodTransition())).ok());
}

TEST(TransitionCheckTest, RejectsANonFiniteReward) {
  for (float reward : {kNaN, kInf, -kInf}) {
    rl::Transition t = GoodTransition();
    t.reward = reward;
    EXPECT_EQ(Check(t), TransitionFault::kReward) << reward;
  }
}

TEST(TransitionCheckTest, RejectsANonFiniteObservationFloatInEitherObservation) {
  for (int i = 0; i < 8; ++i) {
    rl::Transition t = GoodTransition();
    (i < 4 ? t.observation[i] : t.next_observation[i - 4]) = i % 2 == 0 ? kNaN : -kInf;
    EXPECT_EQ(Check(t), TransitionFault::kObservation) << i;
  }
}

TEST(TransitionCheckTest, RejectsAnActionAtOrAboveTheSpecsActionCount) {
  rl::Transition t = GoodTransition();
  t.action = 2;
  EXPECT_EQ(Check(t), TransitionFault::kAction);
  t.action = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(Check(t), TransitionFault::kAction);
  std::vector<uint8_t> negative = Encode(GoodTransition());
  const int32_t minus_one = -1;
  std::memcpy(negative.data() + 4, &minus_one, sizeof(minus_one));
  EXPECT_EQ(CheckTransition(CartPoleSpec(), negative), TransitionFault::kAction);
}

TEST(TransitionCheckTest, RejectsADiscountOutsideZeroToOne) {
  for (float discount : {-0.01f, 1.01f, kNaN, kInf}) {
    rl::Transition t = GoodTransition();
    t.discount = discount;
    EXPECT_EQ(Check(t), TransitionFault::kDiscount) << discount;
  }
  for (float discount : {0.0f, 1.0f}) {
    rl::Transition t = GoodTransition();
    t.discount = discount;
    EXPECT_EQ(Check(t), TransitionFault::kNone) << discount;
  }
}

TEST(TransitionCheckTest, RejectsStepsAboveTheSpecsNAndBadFlagBytes) {
  rl::Transition t = GoodTransition();
  t.steps = 4;  // nstep=3
  EXPECT_EQ(Check(t), TransitionFault::kFields);
  std::vector<uint8_t> done = Encode(GoodTransition());
  done[16] = 2;
  EXPECT_EQ(CheckTransition(CartPoleSpec(), done), TransitionFault::kFields);
  std::vector<uint8_t> reserved = Encode(GoodTransition());
  reserved[19] = 1;
  EXPECT_EQ(CheckTransition(CartPoleSpec(), reserved), TransitionFault::kFields);
}

TEST(TransitionCheckTest, RejectsWrongLengths) {
  std::vector<uint8_t> payload = Encode(GoodTransition());
  EXPECT_EQ(CheckTransition(CartPoleSpec(), absl::MakeConstSpan(payload).first(10)),
            TransitionFault::kTooShort);
  EXPECT_EQ(CheckTransition(CartPoleSpec(), absl::MakeConstSpan(payload).first(payload.size() - 1)),
            TransitionFault::kTooShort);
  rl::Transition wide = GoodTransition();
  wide.observation.push_back(0);
  wide.next_observation.push_back(0);
  EXPECT_EQ(Check(wide), TransitionFault::kObservationSize);
  // A header that claims a huge observation is refused before anything is
  // read past the header.
  const uint32_t huge = 0xffffffffu;
  std::memcpy(payload.data(), &huge, sizeof(huge));
  EXPECT_EQ(CheckTransition(CartPoleSpec(), payload), TransitionFault::kObservationSize);
}

TransitionSpec ByteSpec() {
  TransitionSpec spec = CartPoleSpec();
  spec.env = "MinAtar/Breakout";
  spec.observation_type = ObservationType::kUint8;
  return spec;
}

std::vector<uint8_t> EncodeBytes(const rl::Transition& t, size_t pad = 0) {
  std::vector<uint8_t> out(
      rl::EncodedTransitionSize(t.observation.size(), ObservationType::kUint8) + pad, 0xab);
  EXPECT_TRUE(rl::EncodeTransition(t, absl::MakeSpan(out), ObservationType::kUint8).ok());
  return out;
}

rl::Transition ByteTransition() {
  rl::Transition t = GoodTransition();
  t.observation = {0, 1, 255, 7};
  t.next_observation = {1, 0, 0, 128};
  return t;
}

TEST(TransitionCheckTest, AcceptsU8ObservationsUnderAU8SpecAndAnyByteValue) {
  EXPECT_EQ(CheckTransition(ByteSpec(), EncodeBytes(ByteTransition())), TransitionFault::kNone);
  EXPECT_EQ(CheckTransition(ByteSpec(), EncodeBytes(ByteTransition(), 16)), TransitionFault::kNone);
  std::vector<uint8_t> payload = EncodeBytes(ByteTransition());
  for (size_t i = kEncodedTransitionHeaderBytes; i < payload.size(); ++i) payload[i] = 0xff;
  EXPECT_EQ(CheckTransition(ByteSpec(), payload), TransitionFault::kNone);
}

TEST(TransitionCheckTest, RejectsAnObservationTypeOtherThanTheSpecs) {
  EXPECT_EQ(CheckTransition(ByteSpec(), Encode(GoodTransition())),
            TransitionFault::kObservationType);
  EXPECT_EQ(CheckTransition(CartPoleSpec(), EncodeBytes(ByteTransition())),
            TransitionFault::kObservationType);
  std::vector<uint8_t> unknown = EncodeBytes(ByteTransition());
  unknown[18] = 9;
  EXPECT_EQ(CheckTransition(ByteSpec(), unknown), TransitionFault::kObservationType);
  const absl::Status status = CheckTransitionStatus(ByteSpec(), Encode(GoodTransition()));
  EXPECT_NE(status.message().find("observation_type"), absl::string_view::npos) << status;
}

TEST(TransitionCheckTest, RejectsAU8PayloadShorterThanItsObservations) {
  const std::vector<uint8_t> payload = EncodeBytes(ByteTransition());
  EXPECT_EQ(CheckTransition(ByteSpec(), absl::MakeConstSpan(payload).first(payload.size() - 1)),
            TransitionFault::kTooShort);
}

TEST(TransitionCheckTest, TheStatusNamesTheFault) {
  rl::Transition t = GoodTransition();
  t.reward = kNaN;
  const absl::Status status = CheckTransitionStatus(CartPoleSpec(), Encode(t));
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_NE(status.message().find("reward"), absl::string_view::npos) << status;
}

}  // namespace
}  // namespace dreplay::protocol
