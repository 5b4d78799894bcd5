// Copyright dreplay authors.

#include "client/retry.h"

#include <atomic>
#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "replay_server/server.h"
#include "testing/in_process_service.h"

namespace dreplay::client {
namespace {

using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;

// A policy that retries quickly, for up to kRetryFor.
constexpr absl::Duration kRetryFor = absl::Seconds(20);
// How long the server stays away in the tests that wait for it.
constexpr absl::Duration kServerAway = absl::Milliseconds(300);

RetryPolicy QuickPolicy() {
  RetryPolicy policy;
  policy.connect_timeout = kRetryFor;
  policy.reconnect_timeout = kRetryFor;
  policy.attempt_deadline = absl::Milliseconds(100);
  policy.backoff_initial = absl::Milliseconds(1);
  policy.backoff_max = absl::Milliseconds(20);
  return policy;
}

TEST(RetryPolicyTest, ValidateNamesTheBadField) {
  EXPECT_TRUE(RetryPolicy().Validate().ok());
  RetryPolicy policy;
  policy.reconnect_timeout = absl::ZeroDuration();
  EXPECT_NE(policy.Validate().message().find("reconnect_timeout"), std::string::npos);
  policy = RetryPolicy();
  policy.backoff_max = absl::Milliseconds(1);
  EXPECT_NE(policy.Validate().message().find("backoff_max"), std::string::npos);
}

TEST(RetryWhileDisconnectedTest, RetriesAConnectionFailureUntilTheOperationSucceeds) {
  int calls = 0;
  const absl::Status s = RetryWhileDisconnected(QuickPolicy(), [&] {
    return ++calls < 3 ? absl::UnavailableError("link down") : absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls, 3);
}

TEST(RetryWhileDisconnectedTest, ReturnsOtherErrorsAtOnce) {
  int calls = 0;
  const absl::Status s = RetryWhileDisconnected(QuickPolicy(), [&] {
    ++calls;
    return absl::InvalidArgumentError("misuse");
  });
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_EQ(calls, 1);
}

TEST(RetryWhileDisconnectedTest, PassesTheValueOfAStatusOrThrough) {
  int calls = 0;
  const absl::StatusOr<int> v = RetryWhileDisconnected(QuickPolicy(), [&]() -> absl::StatusOr<int> {
    if (++calls == 1) return absl::DeadlineExceededError("no completion in time");
    return 7;
  });
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 7);
  EXPECT_EQ(calls, 2);
}

TEST(RetryWhileDisconnectedTest, GivesUpAfterTheReconnectTimeout) {
  RetryPolicy policy = QuickPolicy();
  policy.reconnect_timeout = absl::Milliseconds(50);
  int calls = 0;
  const absl::Time start = absl::Now();
  const absl::Status s = RetryWhileDisconnected(policy, [&] {
    ++calls;
    return absl::UnavailableError("server gone");
  });
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_GT(calls, 1);
  EXPECT_LT(absl::Now() - start, kRetryFor);
}

TEST(RetryWhileDisconnectedTest, StopsRetryingOnceAStopIsRequested) {
  std::atomic<bool> stop{true};
  RetryPolicy policy = QuickPolicy();
  policy.stop = &stop;
  int calls = 0;
  const absl::Status s = RetryWhileDisconnected(policy, [&] {
    ++calls;
    return absl::UnavailableError("server gone");
  });
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_EQ(calls, 1);
}

class ConnectWithRetryTest : public ::testing::Test {
 protected:
  std::unique_ptr<verbs::Provider> server_host_ = SoftProvider();
  std::unique_ptr<verbs::Provider> client_host_ = SoftProvider();
};

TEST_F(ConnectWithRetryTest, WaitsForAServerThatStartsLate) {
  server::ReplayServerOptions options = SmallServerOptions();
  std::unique_ptr<server::ReplayServer> server = StartServer(server_host_.get(), options);
  const ClientSessionOptions session_options = SessionOptions(*server, protocol::Role::kMonitor);
  options.port = server->port();
  server.reset();  // nobody listens on the port for a while
  std::thread starter([&] {
    absl::SleepFor(kServerAway);
    server = StartServer(server_host_.get(), options);
  });
  const RetryPolicy policy = QuickPolicy();
  absl::StatusOr<std::unique_ptr<ClientSession>> session =
      ConnectWithRetry(client_host_.get(), session_options, policy);
  starter.join();
  ASSERT_TRUE(session.ok()) << session.status();
  // Each attempt, and the session's later reconnections, are kept short.
  EXPECT_EQ((*session)->options().connect_deadline, policy.attempt_deadline);
}

TEST_F(ConnectWithRetryTest, GivesUpWhenNobodyListensWithinTheTimeout) {
  server::ReplayServerOptions options = SmallServerOptions();
  std::unique_ptr<server::ReplayServer> server = StartServer(server_host_.get(), options);
  const ClientSessionOptions session_options = SessionOptions(*server, protocol::Role::kMonitor);
  server.reset();
  RetryPolicy policy = QuickPolicy();
  policy.connect_timeout = absl::Milliseconds(200);
  const absl::Status s = ConnectWithRetry(client_host_.get(), session_options, policy).status();
  EXPECT_TRUE(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) << s;
}

TEST_F(ConnectWithRetryTest, ARefusalIsFinal) {
  server::ReplayServerOptions options = SmallServerOptions();
  options.auth_token = "the-right-token-0123";
  std::unique_ptr<server::ReplayServer> server = StartServer(server_host_.get(), options);
  const absl::Time start = absl::Now();
  const absl::Status s =
      ConnectWithRetry(client_host_.get(),
                       SessionOptions(*server, protocol::Role::kMonitor, 0, "the-wrong-token-0123"),
                       QuickPolicy())
          .status();
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_LT(absl::Now() - start, kRetryFor);
}

}  // namespace
}  // namespace dreplay::client
