// Copyright dreplay authors.
//
// A live replay_server process with a transition spec drops what an actor
// sends that cannot be trained on, and says so in its metrics: invalid
// transitions are counted (dropped_total{cause="invalid"}), never inserted.

#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "rl/transition.h"
#include "testing/in_process_service.h"
#include "testing/metrics_scrape.h"
#include "testing/server_process.h"
#include "testing/stats_monitor.h"

namespace dreplay::tests {
namespace {

using client::ClientSession;
using protocol::Role;

constexpr char kLoopback[] = "127.0.0.1";
constexpr char kToken[] = "bad-data-test-token-0123";
constexpr char kSpec[] = "env=CartPole-v1 obs=4 act=2 nstep=3 gamma=0.99";
constexpr uint32_t kActorId = 2;
constexpr int kGood = 60;

// The value of the sample line that starts with `series`; -1 when none.
double SampleValue(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, series + " ")) {
      double value;
      if (absl::SimpleAtod(line, &value)) return value;
    }
  }
  return -1;
}

std::vector<uint8_t> Encode(int32_t action, float reward, float observation0) {
  rl::Transition t;
  t.observation = {observation0, 0.1f, 0.2f, 0.3f};
  t.next_observation = {0.4f, 0.5f, 0.6f, 0.7f};
  t.action = action;
  t.reward = reward;
  t.discount = 0.99f;
  t.steps = 1;
  std::vector<uint8_t> out(rl::EncodedTransitionSize(4));
  EXPECT_TRUE(rl::EncodeTransition(t, absl::MakeSpan(out)).ok());
  return out;
}

TEST(BadDataProcessTest, TheServerDropsAndCountsTransitionsThatFailItsSpec) {
  const std::string dir = testing::MakeTestDir("bad_data");
  testing::ServerProcessOptions options;
  options.flags = {"--capacity=1024",
                   "--slot_size=128",
                   "--batch_size=8",
                   "--leases=4",
                   "--stats_interval_s=0",
                   absl::StrCat("--transition_spec=", kSpec),
                   absl::StrCat("--auth_token=", kToken),
                   absl::StrCat("--metrics_listen=", kLoopback, ":0"),
                   absl::StrCat("--metrics_port_file=", dir, "/metrics_port")};
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
      testing::ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  uint16_t metrics_port = 0;
  std::ifstream port_file(dir + "/metrics_port");
  ASSERT_TRUE(static_cast<bool>(port_file >> metrics_port)) << "no metrics port file";

  std::unique_ptr<verbs::Provider> host = testing::SoftProvider();
  auto session = ClientSession::Connect(
      host.get(), testing::ClientOptions(**server, Role::kActor, kActorId, kToken));
  ASSERT_TRUE(session.ok()) << session.status();
  auto writer = actor::ExperienceWriter::Create(session->get(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<uint8_t>> bad = {Encode(1, nan, 0.f), Encode(2, 1.f, 0.f),
                                                 Encode(0, 1.f, inf), Encode(7, inf, nan)};
  for (int k = 0; k < kGood; ++k) {
    ASSERT_TRUE((*writer)->Append(Encode(k % 2, 1.f, 0.01f * k), 1.0f).ok());
    ASSERT_TRUE((*writer)->Append(bad[k % bad.size()], 1.0f).ok());
  }
  ASSERT_TRUE((*writer)->Flush().ok());

  std::string text;
  ASSERT_TRUE(testing::WaitFor([&] {
    absl::StatusOr<testing::HttpResponse> r = testing::HttpGet(kLoopback, metrics_port, "/metrics");
    text = r.ok() ? r->body : "";
    return SampleValue(text, "dreplay_server_inserted_total") +
               SampleValue(text, "dreplay_server_dropped_total{cause=\"invalid\"}") ==
           2 * kGood;
  })) << text;
  EXPECT_EQ(SampleValue(text, "dreplay_server_inserted_total"), kGood);
  EXPECT_EQ(SampleValue(text, "dreplay_server_dropped_total{cause=\"invalid\"}"), kGood);
  EXPECT_EQ(SampleValue(text, "dreplay_server_size"), kGood);
  EXPECT_EQ(SampleValue(text, "dreplay_server_dropped_total{cause=\"torn\"}"), 0);
}

}  // namespace
}  // namespace dreplay::tests
