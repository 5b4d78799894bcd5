// Copyright dreplay authors.

#include "actor_client/actor_layout.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "protocol/layout.h"
#include "protocol/transition_spec.h"
#include "rl/params_format.h"
#include "rl/qnet.h"
#include "rl/transition.h"

#include "protocol/frame_record.h"

namespace dreplay::actor {
namespace {

// The size a real CartPole transition encodes to.
size_t EncodedCartPoleTransition() {
  rl::Transition t;
  t.observation = {0.1f, 0.2f, 0.3f, 0.4f};
  t.next_observation = {0.5f, 0.6f, 0.7f, 0.8f};
  t.action = 1;
  t.steps = 3;
  std::vector<uint8_t> out(1024);
  const absl::StatusOr<size_t> n = rl::EncodeTransition(t, absl::MakeSpan(out));
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : 0;
}

protocol::LayoutConfig ConfigFor(const ActorLayout& layout) {
  protocol::LayoutConfig c;
  c.capacity = 1024;
  c.slot_size = static_cast<uint32_t>(layout.slot_size);
  c.batch_size = 32;
  c.staging_depth = 4;
  c.param_bytes = layout.params_bytes;
  c.observation_size = static_cast<uint32_t>(layout.spec.observation_size);
  c.num_actions = static_cast<uint32_t>(layout.spec.action_count);
  c.max_actors = 4;
  EXPECT_TRUE(c.set_spec(layout.spec.ToString()).ok());
  EXPECT_TRUE(c.Validate().ok()) << c.Validate();
  return c;
}

ActorLayout CartPole() {
  const absl::StatusOr<ActorLayout> layout =
      ActorLayout::Compute("CartPole-v1", rl::ObservationMode::kNative, 3, 0.99, {64, 64});
  EXPECT_TRUE(layout.ok()) << layout.status();
  return layout.ok() ? *layout : ActorLayout();
}

TEST(ActorLayoutTest, SizesAreThoseOfARealTransitionSlotAndNetwork) {
  const ActorLayout layout = CartPole();
  EXPECT_EQ(layout.spec.ToString(), "env=CartPole-v1 obs=4 act=2 nstep=3 gamma=0.99");
  EXPECT_EQ(layout.payload_bytes, EncodedCartPoleTransition());
  EXPECT_GE(layout.slot_size, sizeof(protocol::SlotHeader) + layout.payload_bytes);
  EXPECT_LT(layout.slot_size,
            sizeof(protocol::SlotHeader) + layout.payload_bytes + protocol::kSlotAlignment);
  EXPECT_EQ(layout.slot_size % protocol::kSlotAlignment, 0u);
  rl::QNetworkOptions network;
  network.observation_size = 4;
  network.action_count = 2;
  network.hidden_sizes = {64, 64};
  const std::unique_ptr<rl::QNetwork> q = *rl::QNetwork::Create(network, 1);
  EXPECT_EQ(layout.params_bytes, q->SerializedSize());
  EXPECT_EQ(layout.params_bytes, rl::ParamsBufferSize(q->parameter_count()));
}

TEST(ActorLayoutTest, JsonHoldsEveryFieldOnOneLine) {
  const ActorLayout layout = CartPole();
  EXPECT_EQ(layout.ToJson(),
            "{\"env\":\"CartPole-v1\",\"observation\":\"native\","
            "\"transition_spec\":\"env=CartPole-v1 obs=4 act=2 nstep=3 gamma=0.99\","
            "\"observation_size\":4,\"num_actions\":2,\"payload_bytes\":" +
                std::to_string(layout.payload_bytes) +
                ",\"slot_size\":" + std::to_string(layout.slot_size) +
                ",\"params_bytes\":" + std::to_string(layout.params_bytes) +
                ",\"payload_pad_bytes\":0,\"frame_stack\":0}");
}

TEST(ActorLayoutTest, AFrameStackMakesThePayloadOneFrameRecord) {
  const absl::StatusOr<ActorLayout> frames = ActorLayout::Compute(
      "MinAtar/Breakout", rl::ObservationMode::kPixels84, 3, 0.99, {64}, 0, /*frame_stack=*/4);
  ASSERT_TRUE(frames.ok()) << frames.status();
  EXPECT_EQ(frames->payload_bytes, protocol::FrameRecordBytes(4, 84 * 84));
  EXPECT_EQ(frames->slot_size, protocol::SlotSizeFor(frames->payload_bytes));
  EXPECT_NE(frames->ToJson().find("\"frame_stack\":4"), std::string::npos);
  // The server must store frames once too, with the same depth.
  protocol::LayoutConfig c;
  c.capacity = 1024;
  c.slot_size = static_cast<uint32_t>(frames->slot_size);
  c.observation_size = static_cast<uint32_t>(frames->spec.observation_size);
  c.num_actions = static_cast<uint32_t>(frames->spec.action_count);
  ASSERT_TRUE(c.set_spec(frames->spec.ToString()).ok());
  const absl::Status plain_server = CheckServerConfig(c, *frames, 0);
  EXPECT_EQ(plain_server.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(plain_server.message().find("frame_stack"), std::string::npos) << plain_server;
  c.frame_stack = 4;
  EXPECT_TRUE(CheckServerConfig(c, *frames, 0).ok());
  // Native observations have no frames.
  EXPECT_FALSE(
      ActorLayout::Compute("MinAtar/Breakout", rl::ObservationMode::kNative, 3, 0.99, {64}, 0, 4)
          .ok());
}

TEST(ActorLayoutTest, PaddingIsPartOfThePayloadAndTheSlot) {
  const absl::StatusOr<ActorLayout> padded =
      ActorLayout::Compute("CartPole-v1", rl::ObservationMode::kNative, 3, 0.99, {64, 64}, 1000);
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ(padded->payload_pad_bytes, 1000u);
  EXPECT_EQ(padded->payload_bytes, EncodedCartPoleTransition() + 1000);
  EXPECT_EQ(padded->slot_size, protocol::SlotSizeFor(padded->payload_bytes));
  EXPECT_NE(padded->ToJson().find("\"payload_pad_bytes\":1000"), std::string::npos);
}

TEST(ActorLayoutTest, AnUnknownEnvironmentIsRefused) {
  EXPECT_FALSE(ActorLayout::Compute("Pong-v5", rl::ObservationMode::kNative, 3, 0.99, {64}).ok());
}

TEST(ActorLayoutTest, MinAtarTransitionsAreBytesAndPixels84OnesWeighWhatAtarisDo) {
  const absl::StatusOr<ActorLayout> native =
      ActorLayout::Compute("MinAtar/Breakout", rl::ObservationMode::kNative, 3, 0.99, {128});
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_EQ(native->spec.ToString(), "env=MinAtar/Breakout obs=400u8 act=6 nstep=3 gamma=0.99");
  EXPECT_EQ(native->payload_bytes, 20u + 2 * 400);
  const absl::StatusOr<ActorLayout> pixels =
      ActorLayout::Compute("MinAtar/Breakout", rl::ObservationMode::kPixels84, 3, 0.99, {512});
  ASSERT_TRUE(pixels.ok()) << pixels.status();
  EXPECT_EQ(pixels->payload_bytes, 20u + 56448u);
  EXPECT_NE(pixels->ToJson().find("\"observation\":\"pixels84\""), std::string::npos);
  EXPECT_GT(pixels->params_bytes, native->params_bytes);
  EXPECT_EQ(ActorLayout::Compute("CartPole-v1", rl::ObservationMode::kPixels84, 3, 0.99, {64})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CheckServerConfigTest, AcceptsAServerSizedFromTheLayout) {
  const ActorLayout layout = CartPole();
  EXPECT_TRUE(CheckServerConfig(ConfigFor(layout), layout, 3).ok());
  protocol::LayoutConfig unchecked = ConfigFor(layout);
  ASSERT_TRUE(unchecked.set_spec("").ok());
  unchecked.observation_size = 0;
  unchecked.num_actions = 0;
  EXPECT_TRUE(CheckServerConfig(unchecked, layout, 3).ok());
}

TEST(CheckServerConfigTest, SaysWhatDiffers) {
  const ActorLayout layout = CartPole();
  const auto message = [&](const protocol::LayoutConfig& config, int actor_index) {
    const absl::Status s = CheckServerConfig(config, layout, actor_index);
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    return std::string(s.message());
  };
  protocol::LayoutConfig c = ConfigFor(layout);
  ASSERT_TRUE(c.set_spec("env=CartPole-v1 obs=4 act=2 nstep=5 gamma=0.99").ok());
  EXPECT_NE(message(c, 0).find("5"), std::string::npos);

  c = ConfigFor(layout);
  c.slot_size -= protocol::kSlotAlignment;
  EXPECT_NE(message(c, 0).find("--slot_size >= " + std::to_string(layout.slot_size)),
            std::string::npos);

  c = ConfigFor(layout);
  c.observation_size = 6;
  EXPECT_NE(message(c, 0).find("observations of 6 values"), std::string::npos);
  c = ConfigFor(layout);
  c.num_actions = 3;
  EXPECT_NE(message(c, 0).find("expects 3 actions"), std::string::npos);
  EXPECT_NE(message(ConfigFor(layout), 4).find("--actor_index=4"), std::string::npos);
}

}  // namespace
}  // namespace dreplay::actor
