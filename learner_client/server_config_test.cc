// Copyright dreplay authors.

#include "learner_client/server_config.h"

#include <string>

#include "gtest/gtest.h"
#include "learner_client/learner_loop.h"
#include "protocol/layout.h"

namespace dreplay::learner {
namespace {

// A CartPole server: 4 floats per observation, 2 actions, 3-step
// transitions with gamma 0.99; slots of 96 bytes hold a 52-byte payload.
protocol::LayoutConfig CartPoleServer() {
  protocol::LayoutConfig c;
  c.capacity = 4096;
  c.slot_size = 96;
  c.batch_size = 64;
  c.staging_depth = 8;
  c.param_bytes = 1 << 20;
  c.observation_size = 4;
  c.num_actions = 2;
  EXPECT_TRUE(c.set_spec("env=CartPole-v1 obs=4 act=2 nstep=3 gamma=0.99").ok());
  return c;
}

TEST(ApplyServerConfigTest, TakesTheBatchSizeAndCapacityFromTheServer) {
  LearnerLoopOptions options;
  options.env = "CartPole-v1";
  ASSERT_TRUE(ApplyServerConfig(CartPoleServer(), {}, &options).ok());
  EXPECT_EQ(options.batch_size, 64u);
  EXPECT_EQ(options.memory.capacity, 4096u);
}

TEST(ApplyServerConfigTest, NAndGammaFollowTheServerUnlessGiven) {
  protocol::LayoutConfig config = CartPoleServer();
  ASSERT_TRUE(config.set_spec("env=CartPole-v1 obs=4 act=2 nstep=5 gamma=0.9").ok());
  LearnerLoopOptions options;
  options.env = "CartPole-v1";
  ExpectedTransitions expected;  // n 3, gamma 0.99, neither given
  EXPECT_TRUE(ApplyServerConfig(config, expected, &options).ok());
  // The probe set is built with the actors' n and gamma.
  EXPECT_EQ(options.nstep.n, 5);
  EXPECT_DOUBLE_EQ(options.nstep.discount, 0.9);
  expected.n_step_given = true;
  const absl::Status n = ApplyServerConfig(config, expected, &options);
  EXPECT_TRUE(absl::IsFailedPrecondition(n)) << n;
  expected = ExpectedTransitions();
  expected.gamma_given = true;
  EXPECT_TRUE(absl::IsFailedPrecondition(ApplyServerConfig(config, expected, &options)));
}

TEST(ApplyServerConfigTest, AServerWithoutASpecIsNotChecked) {
  protocol::LayoutConfig config = CartPoleServer();
  ASSERT_TRUE(config.set_spec("").ok());
  config.observation_size = 0;
  LearnerLoopOptions options;
  options.env = "Acrobot-v1";
  config.slot_size = 128;
  EXPECT_TRUE(ApplyServerConfig(config, {}, &options).ok());
}

TEST(ApplyServerConfigTest, SaysWhatDoesNotFit) {
  LearnerLoopOptions options;
  options.env = "Acrobot-v1";
  protocol::LayoutConfig config = CartPoleServer();
  EXPECT_TRUE(absl::IsFailedPrecondition(ApplyServerConfig(config, {}, &options)));
  ASSERT_TRUE(config.set_spec("").ok());
  absl::Status s = ApplyServerConfig(config, {}, &options);
  EXPECT_NE(s.message().find("observations of 4 values"), std::string::npos) << s;
  config.observation_size = 0;
  s = ApplyServerConfig(config, {}, &options);
  EXPECT_NE(s.message().find("transition takes 68 bytes; the server's slots hold 56"),
            std::string::npos)
      << s;
  options.env = "Pong-v5";
  EXPECT_FALSE(ApplyServerConfig(CartPoleServer(), {}, &options).ok());
}

TEST(ApplyServerConfigTest, AFrameStackServersSlotsHoldOneFrameNotATransition) {
  LearnerLoopOptions options;
  options.env = "MinAtar/Breakout";
  options.observation = rl::ObservationMode::kPixels84;
  protocol::LayoutConfig config = CartPoleServer();
  config.observation_size = 4 * 84 * 84;
  config.num_actions = 6;
  config.slot_size = 7096 + 40;  // a record: 40 bytes, then one 84x84 frame
  ASSERT_TRUE(config.set_spec("env=MinAtar/Breakout obs=28224u8 act=6 nstep=3 gamma=0.99").ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(ApplyServerConfig(config, {}, &options)));
  config.frame_stack = 4;
  const absl::Status s = ApplyServerConfig(config, {}, &options);
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace dreplay::learner
