// Copyright dreplay authors.
//
// metrics_scrape.h: helpers for tests of metrics endpoints: one HTTP/1.0
// request over loopback, as a scraper sends it, and `promtool check metrics`
// (Debian's package prometheus) on the text that came back.
//
//   absl::StatusOr<HttpResponse> r = HttpGet("127.0.0.1", http->port(), "/metrics");
//   ASSERT_TRUE(r.ok()) << r.status();
//   EXPECT_EQ(r->status, 200);
//   absl::StatusOr<PromtoolResult> lint = PromtoolCheckMetrics(r->body);
//   if (absl::IsNotFound(lint.status())) GTEST_SKIP() << lint.status().message();

#ifndef DREPLAY_TESTING_METRICS_SCRAPE_H_
#define DREPLAY_TESTING_METRICS_SCRAPE_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dreplay::testing {

struct HttpResponse {
  int status = 0;  // e.g. 200
  // Header names in lower case.
  absl::flat_hash_map<std::string, std::string> headers;
  std::string body;
};

// Sends "METHOD path HTTP/1.0" to host:port (an IPv4 literal) and reads the
// answer until the server closes the connection. Unavailable when it cannot
// connect, DeadlineExceeded after `timeout`, DataLoss for a malformed answer.
absl::StatusOr<HttpResponse> HttpGet(const std::string& host, uint16_t port,
                                     const std::string& path, const std::string& method = "GET",
                                     absl::Duration timeout = absl::Seconds(10));

struct PromtoolResult {
  int exit_status = 0;  // 0: the text passed
  std::string output;   // what promtool printed (stdout and stderr)
};

// Runs `promtool check metrics` with `text` on its standard input. NotFound
// (with a message that says which package provides it) when promtool is not
// installed; Internal when it cannot be run.
absl::StatusOr<PromtoolResult> PromtoolCheckMetrics(const std::string& text);

}  // namespace dreplay::testing

#endif  // DREPLAY_TESTING_METRICS_SCRAPE_H_
