// Copyright dreplay authors.
//
// `actor --print_layout`, which launchers (tools/launch/run_local.py) size the
// server from, against the C++ it stands for: the payload is the size a
// real transition encodes to, the slot holds it with its header, the params
// are the size of a serialized network, the spec parses back to the flags.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "actor_client/actor_layout.h"
#include "gtest/gtest.h"
#include "protocol/layout.h"
#include "protocol/transition_spec.h"
#include "rl/make_environment.h"
#include "rl/qnet.h"
#include "rl/transition.h"
#include "testing/server_process.h"

namespace dreplay::tests {
namespace {

constexpr char kActor[] = "actor_client/actor";

testing::CommandResult RunActor(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {kActor};
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<testing::CommandResult> r = testing::RunCommand(argv);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : testing::CommandResult{};
}

// The text of field `key` of a flat JSON object (a number, or a string
// without escapes, quotes stripped); "" when absent.
std::string Field(const std::string& json, const std::string& key) {
  const std::string tag = "\"" + key + "\":";
  const size_t at = json.find(tag);
  if (at == std::string::npos) return "";
  size_t begin = at + tag.size();
  size_t end;
  if (json[begin] == '"') {
    ++begin;
    end = json.find('"', begin);
  } else {
    end = json.find_first_of(",}", begin);
  }
  return json.substr(begin, end - begin);
}

uint64_t Number(const std::string& json, const std::string& key) {
  uint64_t n = 0;
  EXPECT_TRUE(absl::SimpleAtoi(Field(json, key), &n)) << key << " in " << json;
  return n;
}

// The size a real transition of `observation_size` values of `type` encodes
// to.
size_t EncodedSize(int observation_size, rl::ObservationType type) {
  rl::Transition t;
  t.observation.assign(observation_size, 1.0f);
  t.next_observation.assign(observation_size, 0.0f);
  std::vector<uint8_t> out(4096 + 8 * observation_size);  // room for both observations
  const absl::StatusOr<size_t> n = rl::EncodeTransition(t, absl::MakeSpan(out), type);
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : 0;
}

TEST(PrintLayoutTest, EveryEnvironmentsLayoutMatchesTheCodeItStandsFor) {
  for (const std::string& env : rl::EnvironmentNames()) {
    SCOPED_TRACE(env);
    const testing::CommandResult r =
        RunActor({"--print_layout", "--env=" + env, "--n_step=5", "--gamma=0.9", "--hidden=32,16"});
    ASSERT_EQ(r.exit_status, 0) << r.err;
    const std::string& json = r.out;
    ASSERT_EQ(json.find('\n'), json.size() - 1) << "one line: " << json;
    EXPECT_EQ(
        json,
        actor::ActorLayout::Compute(env, rl::ObservationMode::kNative, 5, 0.9, {32, 16})->ToJson() +
            "\n");

    const std::unique_ptr<rl::Environment> environment = *rl::MakeEnvironment(env);
    const rl::EnvironmentSpec& spec = environment->spec();
    const absl::StatusOr<protocol::TransitionSpec> printed =
        protocol::TransitionSpec::Parse(Field(json, "transition_spec"));
    ASSERT_TRUE(printed.ok()) << printed.status();
    EXPECT_TRUE(printed
                    ->CheckMatches({env, spec.observation_size, spec.action_count, 5, 0.9,
                                    spec.observation_type})
                    .ok());
    EXPECT_EQ(Field(json, "env"), env);
    EXPECT_EQ(Number(json, "observation_size"), static_cast<uint64_t>(spec.observation_size));
    EXPECT_EQ(Number(json, "num_actions"), static_cast<uint64_t>(spec.action_count));

    const uint64_t payload = Number(json, "payload_bytes");
    EXPECT_EQ(payload, EncodedSize(spec.observation_size, spec.observation_type));
    const uint64_t slot = Number(json, "slot_size");
    EXPECT_EQ(slot % protocol::kSlotAlignment, 0u);
    EXPECT_GE(slot, sizeof(protocol::SlotHeader) + payload);
    EXPECT_LT(slot, sizeof(protocol::SlotHeader) + payload + protocol::kSlotAlignment);

    const rl::QNetworkOptions network = rl::NetworkOptionsFor(spec, {32, 16});
    EXPECT_EQ(Number(json, "params_bytes"), (*rl::QNetwork::Create(network, 1))->SerializedSize());
  }
}

TEST(PrintLayoutTest, ASlotOfThePrintedSizeIsAcceptedByAServer) {
  const testing::CommandResult r = RunActor({"--print_layout"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  protocol::LayoutConfig c;
  c.capacity = 1024;
  c.slot_size = static_cast<uint32_t>(Number(r.out, "slot_size"));
  c.batch_size = 32;
  c.staging_depth = 4;
  c.param_bytes = Number(r.out, "params_bytes");
  ASSERT_TRUE(c.set_spec(Field(r.out, "transition_spec")).ok());
  EXPECT_TRUE(c.Validate().ok()) << c.Validate();
  EXPECT_GE(c.max_payload(), Number(r.out, "payload_bytes"));
}

TEST(PrintLayoutTest, ABadFlagIsNamedWithExitStatusTwo) {
  const testing::CommandResult r = RunActor({"--print_layout", "--env=Pong-v5"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.err.find("--env=Pong-v5"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(PrintLayoutTest, ABadObservationAndPixelsOnCartPoleAreRefusedClearly) {
  const testing::CommandResult bad =
      RunActor({"--print_layout", "--env=MinAtar/Breakout", "--observation=rgb"});
  EXPECT_EQ(bad.exit_status, 2);
  EXPECT_NE(bad.err.find("--observation=rgb"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("native or pixels84"), std::string::npos) << bad.err;
  const testing::CommandResult cartpole =
      RunActor({"--print_layout", "--env=CartPole-v1", "--observation=pixels84"});
  EXPECT_EQ(cartpole.exit_status, 2);
  EXPECT_NE(cartpole.err.find("MinAtar environments only"), std::string::npos) << cartpole.err;
}

TEST(PrintLayoutTest, Pixels84TransitionsAreStoredAsBytes) {
  const testing::CommandResult r =
      RunActor({"--print_layout", "--env=MinAtar/Breakout", "--observation=pixels84"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(Field(r.out, "observation"), "pixels84");
  EXPECT_EQ(Number(r.out, "payload_bytes"), 20u + 8u * 84 * 84);
  EXPECT_NE(Field(r.out, "transition_spec").find("obs=28224u8"), std::string::npos);
}

}  // namespace
}  // namespace dreplay::tests
