// Copyright dreplay authors.
//
// tools/replay_top against a live replay_server process: the figures it
// prints (--once, text and --json) match what the clients did, and it fails
// with a clear reason and a non-zero status when it cannot get in.

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "actor_client/actor_stats_publisher.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "testing/in_process_service.h"
#include "testing/server_process.h"
#include "testing/stats_monitor.h"

namespace dreplay::tests {
namespace {

using client::ClientSession;
using protocol::Role;
using protocol::StatsBlock;
using testing::SoftProvider;
using testing::TaggedPayload;

constexpr char kReplayTop[] = "tools/replay_top";
constexpr char kToken[] = "monitor-me-0123456789";
constexpr uint32_t kActorId = 3;
constexpr uint64_t kInserted = 500;
constexpr uint32_t kPayloadBytes = 128;

class ReplayTopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTestDir("replay_top");
    testing::ServerProcessOptions options;
    options.flags = {"--capacity=4096",
                     "--slot_size=168",
                     "--batch_size=8",
                     "--staging_depth=4",
                     "--leases=8",
                     "--stats_interval_s=0",
                     "--heartbeat_interval_s=0.1",
                     absl::StrCat("--auth_token=", kToken)};
    absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
        testing::ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    host_ = SoftProvider();

    // An actor inserts and publishes its line.
    auto session = ClientSession::Connect(
        host_.get(), testing::ClientOptions(*server_, Role::kActor, kActorId, kToken));
    ASSERT_TRUE(session.ok()) << session.status();
    actor_ = std::move(*session);
    auto writer = actor::ExperienceWriter::Create(actor_.get(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (uint64_t t = 0; t < kInserted; ++t) {
      ASSERT_TRUE((*writer)->Append(TaggedPayload(t, kPayloadBytes), 1.0f).ok());
    }
    ASSERT_TRUE((*writer)->Flush().ok());
    auto publisher = actor::ActorStatsPublisher::Create(actor_.get());
    ASSERT_TRUE(publisher.ok()) << publisher.status();
    (*publisher)->RecordStep(1234);
    (*publisher)->RecordEpisode(10);
    (*publisher)->RecordEpisode(20);
    ASSERT_TRUE((*publisher)->Publish((*writer)->stats().committed).ok());

    auto monitor = testing::StatsMonitor::Connect(host_.get(), *server_, kToken);
    ASSERT_TRUE(monitor.ok()) << monitor.status();
    absl::StatusOr<StatsBlock> s = (*monitor)->WaitUntil(
        "every transition ingested", [](const StatsBlock& s) { return s.inserted == kInserted; });
    ASSERT_TRUE(s.ok()) << s.status();
  }

  testing::CommandResult RunTop(std::vector<std::string> flags) {
    std::vector<std::string> argv = {kReplayTop, "--provider=soft"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<testing::CommandResult> r = testing::RunCommand(argv);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : testing::CommandResult{};
  }

  std::string ServerFlag() const { return "--server=" + server_->address(); }

  std::string dir_;
  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<verbs::Provider> host_;
  std::unique_ptr<ClientSession> actor_;
};

TEST_F(ReplayTopTest, OnceJsonReportsTheServersFiguresAndTheActorsLine) {
  const testing::CommandResult r = RunTop({ServerFlag(), absl::StrCat("--auth_token=", kToken),
                                           "--once", "--json", "--interval_s=0.2"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  // One JSON object on one line.
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.front(), '{') << r.out;
  EXPECT_TRUE(absl::EndsWith(r.out, "}\n")) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  for (const std::string& expected : {
           absl::StrCat("\"server\":\"", server_->address(), "\""),
           std::string("\"epoch\":1,"),
           absl::StrCat("\"inserted\":", kInserted, ","),
           absl::StrCat("\"size\":", kInserted, ","),
           std::string("\"capacity\":4096,"),
           std::string("\"torn_slots\":0,"),
           std::string("\"overrun_slots\":0,"),
           std::string("\"actors\":1,"),
           std::string("\"rates\":{\"window_s\":"),
           absl::StrCat("\"actor_id\":", kActorId, ","),
           std::string("\"env_steps\":1234,"),
           std::string("\"episodes\":2,"),
           absl::StrCat("\"transitions\":", kInserted, ","),
           std::string("\"mean_return\":15,"),
           std::string("\"last_return\":20,"),
       }) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << " in\n" << r.out;
  }
  // The priority mean is sum / size of the memory, all at the initial 1.0.
  EXPECT_NE(r.out.find("\"priority_mean\":1,"), std::string::npos) << r.out;
}

TEST_F(ReplayTopTest, OnceTextShowsTheSameFiguresWithTheTokenFromAFile) {
  const std::string token_file = dir_ + "/token";
  testing::WriteSecretFile(token_file, std::string(kToken) + "\n");
  const testing::CommandResult r =
      RunTop({ServerFlag(), "--auth_token_file=" + token_file, "--once", "--interval_s=0"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  for (const std::string& expected :
       {absl::StrCat("size ", kInserted, " / 4096"), absl::StrCat("inserted ", kInserted),
        std::string("epoch 1"), std::string("actors 1"), std::string("1234")}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << " in\n" << r.out;
  }
  EXPECT_EQ(r.out.find("\x1b"), std::string::npos) << "--once draws no terminal codes";
}

TEST_F(ReplayTopTest, FailsWithTheReasonWhenRefusedOrUnreachable) {
  testing::CommandResult r = RunTop({ServerFlag(), "--auth_token=not-the-token-0123456", "--once"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.err.find("authentication failed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not-the-token-0123456"), std::string::npos)
      << "the token must not be echoed";
  EXPECT_TRUE(r.out.empty()) << r.out;

  // A port nobody listens on: the server, stopped.
  const std::string address = server_->address();
  absl::StatusOr<int> stopped = server_->Stop(SIGTERM, testing::kServerStopTimeout);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  r = RunTop({"--server=" + address, "--insecure", "--once", "--json", "--connect_timeout_s=1"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.err.find("cannot reach the server"), std::string::npos) << r.err;

  r = RunTop({"--server=no-port", "--once"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.err.find("--server=no-port"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dreplay::tests
