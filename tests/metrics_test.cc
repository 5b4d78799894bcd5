// Copyright dreplay authors.
//
// `replay_server --metrics_listen` as Prometheus sees it: a live server
// process that an actor inserts into answers GET /metrics with figures that
// match what the actor did, in text that promtool accepts; bad values of the
// flag are refused with exit status 2 before anything starts.

#include <csignal>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "testing/in_process_service.h"
#include "testing/metrics_scrape.h"
#include "testing/server_process.h"
#include "testing/stats_monitor.h"

namespace dreplay::tests {
namespace {

using client::ClientSession;
using protocol::Role;

constexpr char kReplayServer[] = "replay_server/replay_server";
constexpr char kLoopback[] = "127.0.0.1";
constexpr char kToken[] = "scrape-me-0123456789";
constexpr uint32_t kActorId = 2;
constexpr uint64_t kInserted = 300;
constexpr uint32_t kPayloadBytes = 128;

// The value of the sample line that starts with `series` ("name" or
// "name{labels}"); -1 when there is none.
double SampleValue(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, series + " ")) {
      double value;
      if (absl::SimpleAtod(line, &value)) return value;
    }
  }
  return -1;
}

class MetricsProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTestDir("metrics");
    testing::ServerProcessOptions options;
    options.flags = {"--capacity=4096",
                     "--slot_size=168",
                     "--batch_size=8",
                     "--staging_depth=4",
                     "--leases=8",
                     "--stats_interval_s=0",
                     absl::StrCat("--auth_token=", kToken),
                     absl::StrCat("--metrics_listen=", kLoopback, ":0"),
                     absl::StrCat("--metrics_port_file=", dir_, "/metrics_port")};
    absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
        testing::ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    // Written before the server's own port file, which Start waited for.
    std::ifstream port_file(dir_ + "/metrics_port");
    ASSERT_TRUE(static_cast<bool>(port_file >> metrics_port_)) << "no metrics port file";
    host_ = testing::SoftProvider();
  }

  std::string Scrape() {
    absl::StatusOr<testing::HttpResponse> r =
        testing::HttpGet(kLoopback, metrics_port_, "/metrics");
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return "";
    EXPECT_EQ(r->status, 200) << r->body;
    return r->body;
  }

  std::string dir_;
  std::unique_ptr<testing::ServerProcess> server_;
  uint16_t metrics_port_ = 0;
  std::unique_ptr<verbs::Provider> host_;
};

TEST_F(MetricsProcessTest, AScrapeCountsWhatAnActorInsertedAndPassesPromtool) {
  auto session = ClientSession::Connect(
      host_.get(), testing::ClientOptions(*server_, Role::kActor, kActorId, kToken));
  ASSERT_TRUE(session.ok()) << session.status();
  auto writer = actor::ExperienceWriter::Create(session->get(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (uint64_t t = 0; t < kInserted; ++t) {
    ASSERT_TRUE((*writer)->Append(testing::TaggedPayload(t, kPayloadBytes), 1.0f).ok());
  }
  ASSERT_TRUE((*writer)->Flush().ok());

  std::string text;
  ASSERT_TRUE(testing::WaitFor([&] {
    text = Scrape();
    return SampleValue(text, "dreplay_server_inserted_total") == kInserted;
  })) << text;
  EXPECT_EQ(SampleValue(text, "dreplay_server_size"), kInserted);
  EXPECT_EQ(SampleValue(text, "dreplay_server_capacity"), 4096);
  EXPECT_EQ(SampleValue(text, "dreplay_server_connections{role=\"actor\"}"), 1);
  EXPECT_EQ(SampleValue(text, "dreplay_server_connections_accepted_total{role=\"actor\"}"), 1);
  // Every transition the actor stamped has its insert-to-ingest delay.
  EXPECT_EQ(SampleValue(text, "dreplay_server_insert_to_ingest_delay_seconds_count"), kInserted);
  EXPECT_EQ(SampleValue(text, "dreplay_server_insert_to_ingest_delay_seconds_bucket{le=\"+Inf\"}"),
            kInserted);

  absl::StatusOr<testing::PromtoolResult> lint = testing::PromtoolCheckMetrics(text);
  if (absl::IsNotFound(lint.status())) {
    GTEST_SKIP() << lint.status().message();
  }
  ASSERT_TRUE(lint.ok()) << lint.status();
  EXPECT_EQ(lint->exit_status, 0) << lint->output;

  absl::StatusOr<int> exit_status = server_->Stop(SIGTERM, testing::kServerStopTimeout);
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_EQ(*exit_status, 0) << server_->LogTail();
}

TEST(MetricsFlagTest, BadMetricsListenValuesExitWithStatusTwoAndNameTheFlag) {
  for (const std::string value :
       {"localhost:9464", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", "[::1:9464"}) {
    SCOPED_TRACE(value);
    absl::StatusOr<testing::CommandResult> r =
        testing::RunCommand({kReplayServer, "--provider=soft", "--listen=127.0.0.1:0", "--insecure",
                             "--metrics_listen=" + value});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_status, 2) << r->err;
    EXPECT_TRUE(absl::StrContains(r->err, "--metrics_listen=" + value)) << r->err;
    EXPECT_FALSE(absl::StrContains(r->out, "listening on")) << r->out;
  }
}

TEST(MetricsFlagTest, AMetricsPortFileWithoutMetricsListenIsABadFlag) {
  absl::StatusOr<testing::CommandResult> r =
      testing::RunCommand({kReplayServer, "--provider=soft", "--listen=127.0.0.1:0", "--insecure",
                           "--metrics_port_file=/tmp/x"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_status, 2) << r->err;
  EXPECT_TRUE(absl::StrContains(r->err, "needs --metrics_listen")) << r->err;
}

}  // namespace
}  // namespace dreplay::tests
