// Copyright dreplay authors.

#include "replay_server/prometheus_metrics.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/session.h"
#include "common/metrics_http.h"
#include "common/prometheus_text.h"
#include "gtest/gtest.h"
#include "testing/in_process_service.h"
#include "testing/metrics_scrape.h"

namespace dreplay::server {
namespace {

using testing::HttpGet;
using testing::HttpResponse;
using testing::PromtoolCheckMetrics;
using testing::PromtoolResult;
using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::WaitFor;

constexpr char kLoopback[] = "127.0.0.1";

bool HasLine(const std::string& text, const std::string& line) {
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    if (l == line) return true;
  }
  return false;
}

// Every sample follows a "# TYPE" line of its family (histogram samples
// carry a _bucket, _sum or _count suffix), and every family has HELP.
void ExpectEverySampleTyped(const std::string& text) {
  std::set<std::string> typed, helped;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> words = absl::StrSplit(line, ' ');
    if (absl::StartsWith(line, "# TYPE ")) {
      typed.insert(words.at(2));
      continue;
    }
    if (absl::StartsWith(line, "# HELP ")) {
      helped.insert(words.at(2));
      continue;
    }
    std::string name = words.at(0).substr(0, words.at(0).find('{'));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (typed.count(name) == 0 && absl::EndsWith(name, suffix)) {
        name = name.substr(0, name.size() - std::strlen(suffix));
      }
    }
    EXPECT_EQ(typed.count(name), 1u) << "untyped sample: " << line;
  }
  EXPECT_EQ(typed, helped);
}

// Checks the text with promtool; false (and a message) when it is absent.
bool ExpectPromtoolAccepts(const std::string& text) {
  absl::StatusOr<PromtoolResult> lint = PromtoolCheckMetrics(text);
  if (absl::IsNotFound(lint.status())) {
    std::cout << "SKIPPED the promtool check: " << lint.status().message() << std::endl;
    return false;
  }
  EXPECT_TRUE(lint.ok()) << lint.status();
  if (lint.ok()) {
    EXPECT_EQ(lint->exit_status, 0) << lint->output << "\n" << text;
  }
  return true;
}

ServerMetrics SampleMetrics() {
  ServerMetrics m;
  m.stats.epoch = 2;
  m.stats.size = 100;
  m.stats.capacity = 256;
  m.stats.inserted = 200;
  m.stats.sampled = 100;
  m.stats.torn_slots = 3;
  m.stats.transitions_invalid = 4;
  m.stats.priority_updates_stale = 4;
  m.stats.limiter_sample_wait_ns = 1500000000;
  m.stats.ingest_cursor = 200;
  m.connections.actors = 2;
  m.connections.learners_accepted = 5;
  m.insert_to_ingest.upper_bounds = {0.001, 0.01};
  m.insert_to_ingest.bucket_counts = {1, 2, 0};
  m.insert_to_ingest.count = 3;
  m.insert_to_ingest.sum = 0.0125;
  m.samples_per_insert_target = 0.5;
  m.checkpoint_core_pauses.upper_bounds = {0.001, 0.05};
  m.checkpoint_core_pauses.bucket_counts = {40, 1, 0};
  m.checkpoint_core_pauses.count = 41;
  m.checkpoint_core_pauses.sum = 0.03;
  m.checkpoint_core_pause_max_seconds = 0.002;
  m.checkpoint_loop_gap_max_seconds = 0.004;
  m.last_checkpoint_duration_seconds = 2.5;
  m.last_checkpoint_bytes = 1 << 20;
  m.reservation_syncs = 3;
  m.reservation_stalls = 1;
  return m;
}

TEST(RenderServerMetricsTest, ExposesCountersGaugesAndHistogramsWithTheirTypes) {
  const std::string text = RenderServerMetrics(SampleMetrics());
  EXPECT_TRUE(HasLine(text, "# TYPE dreplay_server_inserted_total counter")) << text;
  EXPECT_TRUE(HasLine(text, "dreplay_server_inserted_total 200"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_sampled_total 100"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_dropped_total{cause=\"torn\"} 3"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_dropped_total{cause=\"invalid\"} 4"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_dropped_total{cause=\"overrun\"} 0"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_priorities_bounded_total 0"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_priority_updates_total{result=\"stale\"} 4"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_limiter_sample_wait_seconds_total 1.5"));
  EXPECT_TRUE(HasLine(text, "# TYPE dreplay_server_size gauge"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_size 100"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_epoch 2"));
  EXPECT_FALSE(absl::StrContains(text, "ingest_backlog"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_samples_per_insert 0.5"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_samples_per_insert_target 0.5"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_connections{role=\"actor\"} 2"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_connections_accepted_total{role=\"learner\"} 5"));
  EXPECT_TRUE(HasLine(text, "# TYPE dreplay_server_insert_to_ingest_delay_seconds histogram"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_insert_to_ingest_delay_seconds_bucket{le=\"0.01\"} 3"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_insert_to_ingest_delay_seconds_bucket{le=\"+Inf\"} 3"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_insert_to_ingest_delay_seconds_count 3"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_staging_delay_seconds_count 0"));
  EXPECT_TRUE(HasLine(text, "# TYPE dreplay_server_checkpoint_core_pause_seconds histogram"));
  EXPECT_TRUE(
      HasLine(text, "dreplay_server_checkpoint_core_pause_seconds_bucket{le=\"0.001\"} 40"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_checkpoint_core_pause_seconds_count 41"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_checkpoint_core_pause_max_seconds 0.002"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_checkpoint_loop_gap_max_seconds 0.004"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_last_checkpoint_duration_seconds 2.5"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_last_checkpoint_bytes 1048576"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_reservation_syncs_total 3"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_reservation_stalls_total 1"));
  ExpectEverySampleTyped(text);
}

TEST(RenderServerMetricsTest, AchievedSamplesPerInsertIsZeroBeforeTheFirstInsert) {
  EXPECT_TRUE(HasLine(RenderServerMetrics(ServerMetrics{}), "dreplay_server_samples_per_insert 0"));
}

TEST(RenderServerMetricsTest, PromtoolAcceptsTheText) {
  if (!ExpectPromtoolAccepts(RenderServerMetrics(SampleMetrics()))) {
    GTEST_SKIP() << "promtool is not installed (Debian's package prometheus)";
  }
}

class ServerMetricsScrapeTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(""); }

  void Start(const std::string& checkpoint_dir) {
    http_.reset();
    server_.reset();
    server_host_ = SoftProvider();
    client_host_ = SoftProvider();
    ReplayServerOptions options = SmallServerOptions();
    options.auth_token = "scrape-token-0123456";
    options.checkpoint_dir = checkpoint_dir;
    server_ = StartServer(server_host_.get(), options);
    MetricsHttpOptions http_options;
    http_options.host = kLoopback;
    http_options.port = 0;
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http = MetricsHttpServer::Start(
        http_options, [this] { return RenderServerMetrics(CollectServerMetrics(*server_)); });
    ASSERT_TRUE(http.ok()) << http.status();
    http_ = std::move(http).value();
  }

  std::unique_ptr<client::ClientSession> Connect(protocol::Role role, uint32_t actor_id,
                                                 const std::string& token) {
    absl::StatusOr<std::unique_ptr<client::ClientSession>> session = client::ClientSession::Connect(
        client_host_.get(), SessionOptions(*server_, role, actor_id, token));
    return session.ok() ? std::move(*session) : nullptr;
  }

  std::string Scrape() {
    absl::StatusOr<HttpResponse> r = HttpGet(kLoopback, http_->port(), "/metrics");
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return "";
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->headers["content-type"], kPrometheusContentType);
    return r->body;
  }

  std::unique_ptr<verbs::Provider> server_host_;
  std::unique_ptr<verbs::Provider> client_host_;
  std::unique_ptr<ReplayServer> server_;
  std::unique_ptr<MetricsHttpServer> http_;  // last: stopped before the server it reads
};

TEST_F(ServerMetricsScrapeTest, ALiveServerCountsConnectionsByRoleAndPassesPromtool) {
  auto actor = Connect(protocol::Role::kActor, 1, "scrape-token-0123456");
  auto monitor = Connect(protocol::Role::kMonitor, 0, "scrape-token-0123456");
  ASSERT_TRUE(actor && monitor);
  EXPECT_EQ(Connect(protocol::Role::kMonitor, 0, "wrong-token-01234567"), nullptr);
  ASSERT_TRUE(WaitFor([&] {
    const ConnectionCounts c = server_->connections();
    return c.actors == 1 && c.monitors == 1 && c.rejected >= 1;
  }));
  const std::string text = Scrape();
  EXPECT_TRUE(HasLine(text, "dreplay_server_connections{role=\"actor\"} 1")) << text;
  EXPECT_TRUE(HasLine(text, "dreplay_server_connections{role=\"monitor\"} 1"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_connections{role=\"learner\"} 0"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_connections_accepted_total{role=\"actor\"} 1"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_epoch 1"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_capacity 256"));
  EXPECT_TRUE(HasLine(text, "dreplay_server_inserted_total 0"));
  EXPECT_TRUE(absl::StrContains(text, "dreplay_server_connections_rejected_total "));
  ExpectEverySampleTyped(text);
  ExpectPromtoolAccepts(text);
  EXPECT_EQ(http_->scrapes(), 1u);
}

TEST_F(ServerMetricsScrapeTest, ARequestedCheckpointShowsItsCorePausesDurationAndBytes) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/metrics_checkpoints";
  std::filesystem::remove_all(dir);
  Start(dir);
  ASSERT_TRUE(server_->RequestCheckpoint().ok());
  // The cut's begin, its one chunk, the hand-over and the result's taking.
  ASSERT_TRUE(WaitFor([&] { return server_->checkpoint_pauses().Take().step_time.count() >= 4; }));
  const std::string text = Scrape();
  const CheckpointPauses::Snapshot pauses = server_->checkpoint_pauses().Take();
  EXPECT_EQ(pauses.written, 1u);
  EXPECT_EQ(pauses.step_time.count(), 4u);
  EXPECT_TRUE(HasLine(text, absl::StrCat("dreplay_server_checkpoint_core_pause_seconds_count ",
                                         pauses.steps.count)))
      << text;
  EXPECT_TRUE(
      HasLine(text, absl::StrCat("dreplay_server_last_checkpoint_bytes ", pauses.last_bytes)));
  EXPECT_GT(pauses.last_bytes, 0u);
  EXPECT_GT(pauses.last_duration, absl::ZeroDuration());
  EXPECT_FALSE(HasLine(text, "dreplay_server_reservation_syncs_total 0"))
      << "the start reserves sequences";
  ExpectEverySampleTyped(text);
  ExpectPromtoolAccepts(text);
}

}  // namespace
}  // namespace dreplay::server
