// Copyright dreplay authors.
//
// The connection manager against raw TCP peers on loopback: complete
// hellos reach Accept() while silent peers wait, each half-open peer has its
// own deadline, a flood from one source address pushes out only itself
// (any 127.x address is loopback, so 127.0.0.2 plays a second host), a
// hello of another provider is refused with the listener's provider named.

#include "verbs/connection_manager.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/retry_tag.h"
#include "gtest/gtest.h"
#include "verbs/setup_preamble.h"
#include "verbs/tcp_channel.h"

namespace dreplay::verbs {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

// A blocking TCP connection from `source` (an IPv4 loopback address) to
// 127.0.0.1:port; -1 on failure.
int ConnectFrom(const char* source, uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in local = {};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source, &local.sin_addr);
  sockaddr_in remote = {};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::unique_ptr<TcpConnection> Peer(const char* source, uint16_t port) {
  const int fd = ConnectFrom(source, port);
  EXPECT_GE(fd, 0) << "connect from " << source;
  return fd < 0 ? nullptr : std::make_unique<TcpConnection>(fd, source);
}

std::string Hello(SetupProvider provider, const std::string& body) {
  Preamble p;
  p.kind = PreambleKind::kHello;
  p.provider = provider;
  p.body_length = static_cast<uint32_t>(body.size());
  return EncodePreamble(p) + body;
}

void Send(TcpConnection* c, const std::string& bytes) {
  ASSERT_TRUE(c->WriteAll(bytes.data(), bytes.size(), absl::Now() + kWait).ok());
}

// Reads an answer's preamble and body.
absl::StatusOr<std::pair<Preamble, std::string>> ReadAnswer(TcpConnection* c) {
  std::string bytes(kPreambleBytes, '\0');
  absl::Status s = c->ReadAll(bytes.data(), bytes.size(), absl::Now() + kWait);
  if (!s.ok()) return s;
  absl::StatusOr<Preamble> p = DecodePreamble(bytes, "listener");
  if (!p.ok()) return p.status();
  std::string body(p->body_length, '\0');
  s = c->ReadAll(body.data(), body.size(), absl::Now() + kWait);
  if (!s.ok()) return s;
  return std::make_pair(*p, body);
}

// True once the peer's end is closed (end of stream or reset, after any
// answer the listener sent) within kWait.
bool ClosedByListener(TcpConnection* c) {
  const absl::Time deadline = absl::Now() + kWait;
  char byte;
  absl::Status s;
  while ((s = c->ReadAll(&byte, 1, deadline)).ok()) {
  }
  return absl::IsUnavailable(s);
}

bool WaitFor(const std::function<bool()>& condition) {
  const absl::Time deadline = absl::Now() + kWait;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return condition();
}

std::unique_ptr<ConnectionManager> StartManager(ConnectionManagerOptions options) {
  auto manager = ConnectionManager::Start("127.0.0.1", 0, std::move(options));
  EXPECT_TRUE(manager.ok()) << manager.status();
  return manager.ok() ? std::move(*manager) : nullptr;
}

TEST(ConnectionManagerTest, ACompleteHelloReachesAcceptBehindASilentPeer) {
  auto manager = StartManager(ConnectionManagerOptions{});
  ASSERT_NE(manager, nullptr);
  auto silent = Peer("127.0.0.1", manager->port());
  auto talker = Peer("127.0.0.1", manager->port());
  ASSERT_NE(talker, nullptr);
  Send(talker.get(), Hello(SetupProvider::kSoft, "hello body"));
  const absl::Time start = absl::Now();
  absl::StatusOr<CompletedHello> hello = manager->Accept(kWait);
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));  // not the silent peer's 5 s
  EXPECT_EQ(hello->body, "hello body");
  // The socket is the peer's: what the listener writes, the peer reads.
  ASSERT_TRUE(hello->connection->WriteAll("ok", 2, absl::Now() + kWait).ok());
  char got[2];
  ASSERT_TRUE(talker->ReadAll(got, 2, absl::Now() + kWait).ok());
  EXPECT_EQ(std::string(got, 2), "ok");
}

TEST(ConnectionManagerTest, ASilentPeerIsClosedAtItsOwnDeadline) {
  ConnectionManagerOptions options;
  options.hello_timeout = absl::Milliseconds(200);
  auto manager = StartManager(options);
  ASSERT_NE(manager, nullptr);
  auto silent = Peer("127.0.0.1", manager->port());
  ASSERT_NE(silent, nullptr);
  Send(silent.get(), Hello(SetupProvider::kSoft, "only part of it").substr(0, 5));
  EXPECT_TRUE(ClosedByListener(silent.get()));
  EXPECT_EQ(manager->counters().timed_out, 1u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(manager->Accept(absl::Milliseconds(10)).status()));
}

TEST(ConnectionManagerTest, AFloodFromOneSourcePushesOutOnlyItself) {
  ConnectionManagerOptions options;
  options.max_half_open_per_source = 4;
  options.max_half_open = 64;
  auto manager = StartManager(options);
  ASSERT_NE(manager, nullptr);
  // An honest peer from 127.0.0.1 has sent part of its hello ...
  auto honest = Peer("127.0.0.1", manager->port());
  ASSERT_NE(honest, nullptr);
  const std::string hello = Hello(SetupProvider::kSoft, "honest");
  Send(honest.get(), hello.substr(0, 7));
  ASSERT_TRUE(WaitFor([&] { return manager->counters().accepted == 1; }));
  // ... when 20 silent peers from 127.0.0.2 arrive.
  std::vector<std::unique_ptr<TcpConnection>> flood;
  for (int i = 0; i < 20; ++i) flood.push_back(Peer("127.0.0.2", manager->port()));
  ASSERT_TRUE(WaitFor([&] { return manager->counters().accepted == 21; }));
  EXPECT_EQ(manager->counters().evicted_source, 16u);
  EXPECT_EQ(manager->counters().half_open, 5);
  // The oldest of the flood are the ones closed.
  EXPECT_TRUE(ClosedByListener(flood.front().get()));
  Send(honest.get(), hello.substr(7));
  absl::StatusOr<CompletedHello> got = manager->Accept(kWait);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->body, "honest");
}

TEST(ConnectionManagerTest, TheTotalBoundClosesFromTheSourceHoldingTheMost) {
  ConnectionManagerOptions options;
  options.max_half_open_per_source = 8;
  options.max_half_open = 8;
  auto manager = StartManager(options);
  ASSERT_NE(manager, nullptr);
  auto honest = Peer("127.0.0.1", manager->port());
  ASSERT_NE(honest, nullptr);
  ASSERT_TRUE(WaitFor([&] { return manager->counters().accepted == 1; }));
  std::vector<std::unique_ptr<TcpConnection>> flood;
  for (int i = 0; i < 20; ++i) flood.push_back(Peer("127.0.0.2", manager->port()));
  ASSERT_TRUE(WaitFor([&] { return manager->counters().accepted == 21; }));
  const ConnectionManagerCounters c = manager->counters();
  EXPECT_EQ(c.evicted_total + c.evicted_source, 13u);
  EXPECT_GT(c.evicted_total, 0u);
  EXPECT_EQ(c.half_open, 8);
  Send(honest.get(), Hello(SetupProvider::kSoft, "still here"));
  absl::StatusOr<CompletedHello> got = manager->Accept(kWait);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->body, "still here");
}

TEST(ConnectionManagerTest, AHelloOfAnotherProviderIsRefusedNamingBoth) {
  ConnectionManagerOptions options;
  options.provider = SetupProvider::kSoft;
  auto manager = StartManager(options);
  ASSERT_NE(manager, nullptr);
  auto peer = Peer("127.0.0.1", manager->port());
  ASSERT_NE(peer, nullptr);
  Send(peer.get(), Hello(SetupProvider::kIbverbs, "qp info"));
  auto answer = ReadAnswer(peer.get());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->first.kind, PreambleKind::kReject);
  EXPECT_EQ(answer->first.provider, SetupProvider::kSoft);
  EXPECT_NE(answer->second.find("soft"), std::string::npos) << answer->second;
  EXPECT_NE(answer->second.find("ibverbs"), std::string::npos) << answer->second;
  EXPECT_NE(answer->second.find("--provider"), std::string::npos) << answer->second;
  EXPECT_EQ(manager->counters().refused, 1u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(manager->Accept(absl::Milliseconds(10)).status()));
}

TEST(ConnectionManagerTest, GarbageOversizedAndRefusedHellosNeverReachAccept) {
  ConnectionManagerOptions options;
  options.max_hello_bytes = 100;
  options.check_hello = [](absl::string_view body) {
    return body == "bad" ? absl::InvalidArgumentError("bad body") : absl::OkStatus();
  };
  auto manager = StartManager(options);
  ASSERT_NE(manager, nullptr);
  auto garbage = Peer("127.0.0.1", manager->port());
  auto oversized = Peer("127.0.0.1", manager->port());
  auto refused = Peer("127.0.0.1", manager->port());
  ASSERT_TRUE(garbage && oversized && refused);
  Send(garbage.get(), std::string(64, '\xab'));
  Send(oversized.get(), Hello(SetupProvider::kSoft, std::string(101, 'x')));
  Send(refused.get(), Hello(SetupProvider::kSoft, "bad"));
  auto answer = ReadAnswer(refused.get());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->first.kind, PreambleKind::kReject);
  EXPECT_EQ(answer->second, "bad body");
  EXPECT_TRUE(ClosedByListener(garbage.get()));
  EXPECT_TRUE(ClosedByListener(oversized.get()));
  EXPECT_TRUE(WaitFor([&] { return manager->counters().refused == 3; }));
  auto good = Peer("127.0.0.1", manager->port());
  Send(good.get(), Hello(SetupProvider::kSoft, "good"));
  absl::StatusOr<CompletedHello> got = manager->Accept(kWait);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->body, "good");
}

TEST(ConnectionManagerTest, AFullWaitingQueueRefusesRetryably) {
  ConnectionManagerOptions options;
  options.max_waiting = 1;
  auto manager = StartManager(options);
  ASSERT_NE(manager, nullptr);
  auto first = Peer("127.0.0.1", manager->port());
  auto second = Peer("127.0.0.1", manager->port());
  ASSERT_TRUE(first && second);
  Send(first.get(), Hello(SetupProvider::kSoft, "first"));
  ASSERT_TRUE(WaitFor([&] { return manager->counters().completed == 1; }));
  Send(second.get(), Hello(SetupProvider::kSoft, "second"));  // nobody accepts yet
  auto answer = ReadAnswer(second.get());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->first.kind, PreambleKind::kReject);
  EXPECT_EQ(answer->second.rfind(std::string(kRetryLaterTag), 0), 0u) << answer->second;
}

TEST(ConnectionManagerTest, ShutdownWakesAccept) {
  auto manager = StartManager(ConnectionManagerOptions{});
  ASSERT_NE(manager, nullptr);
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(20));
    manager->Shutdown();
  });
  EXPECT_TRUE(absl::IsCancelled(manager->Accept(kWait).status()));
  stopper.join();
  EXPECT_TRUE(absl::IsCancelled(manager->Accept(kWait).status()));
}

TEST(ConnectionManagerTest, OptionsNameTheBadField) {
  ConnectionManagerOptions options;
  EXPECT_TRUE(options.Validate().ok());
  options.max_half_open_per_source = 0;
  EXPECT_NE(options.Validate().message().find("max_half_open_per_source"), std::string::npos);
  options = ConnectionManagerOptions{};
  options.max_half_open = 4;
  options.max_half_open_per_source = 8;
  EXPECT_FALSE(options.Validate().ok());
  options = ConnectionManagerOptions{};
  options.hello_timeout = absl::ZeroDuration();
  EXPECT_NE(options.Validate().message().find("hello_timeout"), std::string::npos);
}

}  // namespace
}  // namespace dreplay::verbs
