// Copyright dreplay authors.

#include "protocol/transition_spec.h"

#include "gtest/gtest.h"
#include "protocol/layout.h"
#include "rl/make_environment.h"

namespace dreplay::protocol {
namespace {

TransitionSpec SpecOf(const rl::EnvironmentSpec& env, int n_step, double gamma) {
  return TransitionSpec{env.name, env.observation_size, env.action_count, n_step,
                        gamma,    env.observation_type};
}

TransitionSpec CartPoleSpec() {
  TransitionSpec spec;
  spec.env = "CartPole-v1";
  spec.observation_size = 4;
  spec.action_count = 2;
  spec.n_step = 3;
  spec.gamma = 0.99;
  return spec;
}

TEST(TransitionSpecTest, WritesTheDocumentedForm) {
  EXPECT_EQ(CartPoleSpec().ToString(), "env=CartPole-v1 obs=4 act=2 nstep=3 gamma=0.99");
}

TEST(TransitionSpecTest, ParsesWhatItWrites) {
  for (double gamma : {0.99, 0.997, 1.0, 0.0, 0.1 + 0.2}) {
    TransitionSpec spec = CartPoleSpec();
    spec.gamma = gamma;
    absl::StatusOr<TransitionSpec> back = TransitionSpec::Parse(spec.ToString());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->env, spec.env);
    EXPECT_EQ(back->observation_size, 4);
    EXPECT_EQ(back->action_count, 2);
    EXPECT_EQ(back->n_step, 3);
    EXPECT_EQ(back->gamma, gamma);
    EXPECT_TRUE(spec.CheckMatches(*back).ok());
  }
}

TEST(TransitionSpecTest, WritesAndParsesTheU8ObservationType) {
  TransitionSpec spec = CartPoleSpec();
  spec.env = "MinAtar/Breakout";
  spec.observation_size = 28224;
  spec.action_count = 6;
  spec.observation_type = ObservationType::kUint8;
  EXPECT_EQ(spec.ToString(), "env=MinAtar/Breakout obs=28224u8 act=6 nstep=3 gamma=0.99");
  absl::StatusOr<TransitionSpec> back = TransitionSpec::Parse(spec.ToString());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->observation_type, ObservationType::kUint8);
  EXPECT_EQ(back->action_count, 6);
  absl::StatusOr<TransitionSpec> f32 =
      TransitionSpec::Parse("env=CartPole-v1 obs=4f32 act=2 nstep=3 gamma=0.99");
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ(f32->observation_type, ObservationType::kFloat32);
  const absl::Status differs = CartPoleSpec().CheckMatches(*back);
  EXPECT_TRUE(absl::IsFailedPrecondition(differs));
  spec.observation_type = ObservationType::kFloat32;
  EXPECT_NE(spec.CheckMatches(*back).message().find("type=u8"), absl::string_view::npos);
}

TEST(TransitionSpecTest, TypicalSpecsOfTheKnownEnvironmentsFitTheLayoutField) {
  for (const std::string& name : rl::EnvironmentNames()) {
    for (rl::ObservationMode mode :
         {rl::ObservationMode::kNative, rl::ObservationMode::kPixels84}) {
      auto env = rl::MakeEnvironment(name, mode);
      if (!env.ok()) continue;  // pixels84 is MinAtar's only
      // The longest, MinAtar/SpaceInvaders rendered, has room for n up to 9.
      const std::string text = SpecOf((*env)->spec(), 9, 0.99).ToString();
      EXPECT_LT(text.size(), protocol::kTransitionSpecBytes) << text;
    }
    if (name.rfind("MinAtar/", 0) != 0) {
      const std::string text = SpecOf((*rl::MakeEnvironment(name))->spec(), 255, 0.9999).ToString();
      EXPECT_LT(text.size(), protocol::kTransitionSpecBytes) << text;
    }
  }
}

TEST(TransitionSpecTest, RejectsMalformedText) {
  for (const char* text : {"", "cartpole-v1 f32 nstep=3", "env=CartPole-v1 obs=4 act=2 nstep=3",
                           "env=CartPole-v1 obs=x act=2 nstep=3 gamma=0.99",
                           "env=CartPole-v1 obs=4 act=2 nstep=0 gamma=0.99",
                           "env=CartPole-v1 obs=4 act=2 nstep=3 gamma=1.5",
                           "obs=4 env=CartPole-v1 act=2 nstep=3 gamma=0.99",
                           "env=CartPole-v1 obs=4f16 act=2 nstep=3 gamma=0.99",
                           "env=CartPole-v1 obs=u8 act=2 nstep=3 gamma=0.99",
                           "env=CartPole-v1 obs=4 u8 act=2 nstep=3 gamma=0.99"}) {
    absl::Status s = TransitionSpec::Parse(text).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << text;
  }
}

TEST(TransitionSpecTest, MismatchNamesTheFieldAndBothValues) {
  TransitionSpec published = CartPoleSpec();
  published.n_step = 5;
  const absl::Status s = CartPoleSpec().CheckMatches(published);
  EXPECT_TRUE(absl::IsFailedPrecondition(s));
  EXPECT_NE(s.message().find("nstep=5"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("nstep=3"), absl::string_view::npos) << s;

  published = CartPoleSpec();
  published.env = "Acrobot-v1";
  EXPECT_TRUE(absl::IsFailedPrecondition(CartPoleSpec().CheckMatches(published)));
  published = CartPoleSpec();
  published.gamma = 0.98;
  EXPECT_TRUE(absl::IsFailedPrecondition(CartPoleSpec().CheckMatches(published)));
}

}  // namespace
}  // namespace dreplay::protocol
