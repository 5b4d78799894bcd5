// Copyright dreplay authors.

#include "common/metrics_http.h"

#include <atomic>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/prometheus_text.h"
#include "gtest/gtest.h"
#include "testing/metrics_scrape.h"

namespace dreplay {
namespace {

using testing::HttpGet;
using testing::HttpResponse;

constexpr char kLoopback[] = "127.0.0.1";

std::unique_ptr<MetricsHttpServer> StartOnLoopback(MetricsHttpServer::Render render) {
  MetricsHttpOptions options;
  options.host = kLoopback;
  options.port = 0;
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Start(options, std::move(render));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(server).value() : nullptr;
}

TEST(MetricsHttpOptionsTest, ValidateNamesTheBadValue) {
  MetricsHttpOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.host = "localhost";
  EXPECT_TRUE(absl::StrContains(o.Validate().message(), "host=\"localhost\""));
  o.host = "[::1]";
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  o.host = "0.0.0.0";
  EXPECT_TRUE(o.Validate().ok());
  o.path = "metrics";
  EXPECT_TRUE(absl::StrContains(o.Validate().message(), "path=\"metrics\""));
  o.path = "/metrics";
  o.max_connections = 0;
  EXPECT_TRUE(absl::StrContains(o.Validate().message(), "max_connections=0"));
  o.max_connections = 1;
  o.idle_timeout = absl::Milliseconds(10);
  EXPECT_TRUE(absl::StrContains(o.Validate().message(), "idle_timeout=10ms"));
}

TEST(MetricsHttpServerTest, ServesTheRenderedTextOnAnOsChosenPort) {
  std::atomic<int> renders{0};
  auto server = StartOnLoopback(
      [&renders] { return absl::StrCat("# TYPE x_total counter\nx_total ", ++renders, "\n"); });
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->port(), 0);
  EXPECT_EQ(server->address(), absl::StrCat(kLoopback, ":", server->port()));
  EXPECT_EQ(server->url(), absl::StrCat("http://", kLoopback, ":", server->port(), "/metrics"));
  for (int i = 1; i <= 2; ++i) {
    absl::StatusOr<HttpResponse> r = HttpGet(kLoopback, server->port(), "/metrics");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->headers["content-type"], kPrometheusContentType);
    EXPECT_EQ(r->body, absl::StrCat("# TYPE x_total counter\nx_total ", i, "\n"));
  }
  EXPECT_EQ(server->scrapes(), 2u);
}

TEST(MetricsHttpServerTest, AnswersHeadWithoutABody) {
  auto server = StartOnLoopback([] { return std::string("x 1\n"); });
  ASSERT_NE(server, nullptr);
  absl::StatusOr<HttpResponse> r = HttpGet(kLoopback, server->port(), "/metrics", "HEAD");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "");
}

TEST(MetricsHttpServerTest, AnswersOtherPathsWith404AndOtherMethodsWith405) {
  std::atomic<int> renders{0};
  auto server = StartOnLoopback([&renders] {
    ++renders;
    return std::string("x 1\n");
  });
  ASSERT_NE(server, nullptr);
  absl::StatusOr<HttpResponse> r = HttpGet(kLoopback, server->port(), "/other");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(absl::StrContains(r->body, "/metrics"));
  r = HttpGet(kLoopback, server->port(), "/metrics", "POST");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->headers["allow"], "GET, HEAD");
  EXPECT_EQ(renders.load(), 0);
  EXPECT_EQ(server->scrapes(), 0u);
}

TEST(MetricsHttpServerTest, ABusyPortIsUnavailableAndNamed) {
  auto first = StartOnLoopback([] { return std::string(); });
  ASSERT_NE(first, nullptr);
  MetricsHttpOptions options;
  options.host = kLoopback;
  options.port = first->port();
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> second =
      MetricsHttpServer::Start(options, [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), first->address())) << second.status();
}

TEST(MetricsHttpServerTest, RefusesBadOptionsAndAnEmptyRender) {
  MetricsHttpOptions options;
  options.host = "not-an-address";
  EXPECT_TRUE(absl::IsInvalidArgument(
      MetricsHttpServer::Start(options, [] { return std::string(); }).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      MetricsHttpServer::Start(MetricsHttpOptions{}, MetricsHttpServer::Render()).status()));
}

TEST(MetricsHttpServerTest, StopClosesThePortAndIsIdempotent) {
  auto server = StartOnLoopback([] { return std::string("x 1\n"); });
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->port();
  server->Stop();
  server->Stop();
  absl::StatusOr<HttpResponse> r = HttpGet(kLoopback, port, "/metrics");
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
}

}  // namespace
}  // namespace dreplay
