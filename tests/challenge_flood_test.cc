// Copyright dreplay authors.
//
// The real replay_server under a flood of challenge requests and forged
// hellos from the client's own address: an honest learner still connects
// within its retry window, the server's memory stays bounded (the challenge
// table holds at most 64 nonces per source host and 4,096 in all; consumed
// and expired ones leave no trace), and its log stays bounded (refusals are
// logged at most 10 per 10 s, with a count of those held back). Prints the
// figures: flood rate, honest connect time, server memory before and after,
// refusal lines logged.

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "protocol/handshake.h"
#include "testing/in_process_service.h"
#include "testing/server_process.h"
#include "testing/session_options.h"

namespace dreplay::tests {
namespace {

constexpr char kToken[] = "challenge-flood-test-token-0123";
constexpr int kFlooders = 3;
constexpr absl::Duration kFloodFor = absl::Seconds(4);
// The honest client's retry window (its connect deadline).
constexpr absl::Duration kRetryWindow = absl::Seconds(10);
// More than the server can use for what the flood sends (64 nonces of a few
// hundred bytes, a log line per refusal at most): a leak of one entry per
// request would pass it within the flood.
constexpr int64_t kMaxRssGrowthKb = 32 * 1024;
constexpr int kMaxRefusalLines = 3 * 10;

int64_t RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "VmRSS:")) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t kb = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kb)) return kb;
  }
  return -1;
}

int CountLines(const std::string& log, const std::string& marker) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) n += absl::StrContains(line, marker);
  return n;
}

TEST(ChallengeFloodTest, AnHonestClientConnectsAndMemoryAndLogStayBounded) {
  const std::string dir = testing::MakeTestDir("flood");
  testing::WriteSecretFile(dir + "/token", std::string(kToken) + "\n");
  testing::ServerProcessOptions options;
  options.flags = {"--capacity=4096",
                   "--slot_size=168",
                   "--batch_size=8",
                   "--staging_depth=4",
                   "--leases=8",
                   "--stats_interval_s=0",
                   "--auth_token_file=" + dir + "/token"};
  auto server = testing::ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int64_t rss_before = RssKb((*server)->pid());

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> requests{0};
  std::vector<std::thread> flooders;
  for (int f = 0; f < kFlooders; ++f) {
    flooders.emplace_back([&, f] {
      std::unique_ptr<verbs::Provider> host = testing::SoftProvider();
      verbs::QueuePairOptions qp;
      qp.connect_timeout = absl::Seconds(5);
      protocol::Hello forged;
      forged.role = protocol::Role::kLearner;
      forged.grant = {0x1000, protocol::kGrantRegionBytes, 1, 0};
      const std::string challenge = protocol::EncodeChallengeRequest(protocol::Role::kLearner);
      for (uint64_t i = f; !stop.load(); ++i) {
        // Mostly challenges (each holds a nonce), and hellos with a wrong
        // token naming nonces never issued (each is refused and logged).
        std::string payload = challenge;
        if (i % 4 == 3) {
          forged.server_nonce = *protocol::RandomNonce();
          forged.client_nonce = *protocol::RandomNonce();
          payload = protocol::EncodeHello(forged, "not-the-token-0123456789").value();
        }
        (void)host->Connect((*server)->host(), (*server)->port(), payload, qp);
        requests.fetch_add(1);
      }
    });
  }
  const absl::Time flood_start = absl::Now();
  absl::SleepFor(absl::Milliseconds(500));  // the flood is under way
  std::unique_ptr<verbs::Provider> host = testing::SoftProvider();
  client::ClientSessionOptions o = testing::TestSessionOptions(
      (*server)->host(), (*server)->port(), protocol::Role::kLearner, 0, kToken, kRetryWindow);
  const absl::Time start = absl::Now();
  auto learner = client::ClientSession::Connect(host.get(), o);
  const absl::Duration honest = absl::Now() - start;
  EXPECT_TRUE(learner.ok()) << learner.status() << "\n" << (*server)->LogTail();
  const absl::Duration left = kFloodFor - (absl::Now() - flood_start);
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
  stop.store(true);
  for (std::thread& t : flooders) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - flood_start);
  const int64_t rss_after = RssKb((*server)->pid());
  const std::string log = (*server)->LogTail(64 << 20);
  const int refusal_lines = CountLines(log, "refused connection from");

  std::printf(
      "{\"flood_requests\": %llu, \"flood_per_s\": %.0f, \"honest_connect_ms\": %.1f, "
      "\"server_rss_kb_before\": %lld, \"server_rss_kb_after\": %lld, "
      "\"refusal_lines_logged\": %d}\n",
      static_cast<unsigned long long>(requests.load()), requests.load() / seconds,
      absl::ToDoubleMilliseconds(honest), static_cast<long long>(rss_before),
      static_cast<long long>(rss_after), refusal_lines);
  EXPECT_GT(requests.load(), 1000u) << "the flood did not flood";
  EXPECT_LT(honest, kRetryWindow);
  EXPECT_LT(rss_after - rss_before, kMaxRssGrowthKb);
  EXPECT_LE(refusal_lines, kMaxRefusalLines) << log.substr(0, 4000);
  EXPECT_GT(requests.load() / 4, static_cast<uint64_t>(kMaxRefusalLines))
      << "the flood sent fewer refusals than the log may hold: the bound was not tested";
  EXPECT_TRUE((*server)->Running()) << (*server)->LogTail();
}

}  // namespace
}  // namespace dreplay::tests
