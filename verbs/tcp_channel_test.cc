// Copyright dreplay authors.

#include "verbs/tcp_channel.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstring>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dreplay::verbs {
namespace {

constexpr char kLoopback[] = "127.0.0.1";
// Generous bound for anything that should happen at once on loopback.
constexpr absl::Duration kTimeout = absl::Seconds(10);
// Short wait used only where the test expects nothing to arrive.
constexpr absl::Duration kShortWait = absl::Milliseconds(50);
constexpr size_t kMaxFrame = 1 << 16;

absl::Time Deadline() { return absl::Now() + kTimeout; }

// A listener and one connection to it, both ends.
struct Pair {
  std::unique_ptr<TcpListenSocket> listener;
  std::unique_ptr<TcpConnection> client;
  std::unique_ptr<TcpConnection> server;
};

Pair MakePair() {
  Pair p;
  auto listener = TcpListenSocket::Listen(kLoopback, 0);
  EXPECT_TRUE(listener.ok()) << listener.status();
  p.listener = std::move(*listener);
  auto client = TcpConnection::Connect(kLoopback, p.listener->port(), Deadline());
  EXPECT_TRUE(client.ok()) << client.status();
  p.client = std::move(*client);
  auto server = p.listener->Accept(Deadline());
  EXPECT_TRUE(server.ok()) << server.status();
  p.server = std::move(*server);
  return p;
}

TEST(TcpChannelTest, ListenOnPortZeroGetsARealPort) {
  auto listener = TcpListenSocket::Listen(kLoopback, 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  EXPECT_NE((*listener)->port(), 0);
  EXPECT_EQ((*listener)->host(), kLoopback);
}

TEST(TcpChannelTest, FramesArriveWholeAndInOrder) {
  Pair p = MakePair();
  ASSERT_TRUE(p.client->SendFrame("first", Deadline()).ok());
  ASSERT_TRUE(p.client->SendFrame("", Deadline()).ok());
  const std::string big(50000, 'x');
  ASSERT_TRUE(p.client->SendFrame(big, Deadline()).ok());
  EXPECT_EQ(*p.server->ReceiveFrame(kMaxFrame, Deadline()), "first");
  EXPECT_EQ(*p.server->ReceiveFrame(kMaxFrame, Deadline()), "");
  EXPECT_EQ(*p.server->ReceiveFrame(kMaxFrame, Deadline()), big);
  // And the other way.
  ASSERT_TRUE(p.server->SendFrame("reply", Deadline()).ok());
  EXPECT_EQ(*p.client->ReceiveFrame(kMaxFrame, Deadline()), "reply");
}

TEST(TcpChannelTest, FrameOverTheLimitIsRefusedWithoutReadingIt) {
  Pair p = MakePair();
  ASSERT_TRUE(p.client->SendFrame(std::string(100, 'y'), Deadline()).ok());
  auto frame = p.server->ReceiveFrame(99, Deadline());
  EXPECT_TRUE(absl::IsInvalidArgument(frame.status())) << frame.status();
}

TEST(TcpChannelTest, HugeLengthPrefixFromGarbageIsRefused) {
  Pair p = MakePair();
  const char garbage[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_GT(send(p.client->fd(), garbage, sizeof(garbage) - 1, 0), 0);
  auto frame = p.server->ReceiveFrame(kMaxFrame, Deadline());
  EXPECT_TRUE(absl::IsInvalidArgument(frame.status())) << frame.status();
}

TEST(TcpChannelTest, ReceiveTimesOutWhenNothingComes) {
  Pair p = MakePair();
  auto frame = p.server->ReceiveFrame(kMaxFrame, absl::Now() + kShortWait);
  EXPECT_TRUE(absl::IsDeadlineExceeded(frame.status())) << frame.status();
}

TEST(TcpChannelTest, PeerClosingIsUnavailable) {
  Pair p = MakePair();
  p.client.reset();
  auto frame = p.server->ReceiveFrame(kMaxFrame, Deadline());
  EXPECT_TRUE(absl::IsUnavailable(frame.status())) << frame.status();
}

TEST(TcpChannelTest, TruncatedFrameIsUnavailable) {
  Pair p = MakePair();
  const uint32_t length = htonl(10);
  ASSERT_EQ(send(p.client->fd(), &length, sizeof(length), 0), 4);
  ASSERT_EQ(send(p.client->fd(), "abc", 3, 0), 3);
  p.client.reset();
  auto frame = p.server->ReceiveFrame(kMaxFrame, Deadline());
  EXPECT_TRUE(absl::IsUnavailable(frame.status())) << frame.status();
}

TEST(TcpChannelTest, ConnectToAClosedPortIsUnavailable) {
  uint16_t port = 0;
  {
    auto listener = TcpListenSocket::Listen(kLoopback, 0);
    ASSERT_TRUE(listener.ok());
    port = (*listener)->port();
  }
  auto client = TcpConnection::Connect(kLoopback, port, Deadline());
  EXPECT_TRUE(absl::IsUnavailable(client.status())) << client.status();
}

TEST(TcpChannelTest, UnresolvableHostIsInvalidArgument) {
  auto client = TcpConnection::Connect("no such host.invalid", 1, Deadline());
  EXPECT_TRUE(absl::IsInvalidArgument(client.status())) << client.status();
}

TEST(TcpChannelTest, AcceptTimesOutWithoutPeers) {
  auto listener = TcpListenSocket::Listen(kLoopback, 0);
  ASSERT_TRUE(listener.ok());
  auto conn = (*listener)->Accept(absl::Now() + kShortWait);
  EXPECT_TRUE(absl::IsDeadlineExceeded(conn.status())) << conn.status();
}

TEST(TcpChannelTest, ShutdownWakesABlockedAcceptWithCancelled) {
  auto listener = TcpListenSocket::Listen(kLoopback, 0);
  ASSERT_TRUE(listener.ok());
  TcpListenSocket* l = listener->get();
  absl::Status accepted;
  std::thread waiter([&] { accepted = l->Accept(Deadline()).status(); });
  l->Shutdown();
  waiter.join();
  EXPECT_TRUE(absl::IsCancelled(accepted)) << accepted;
  EXPECT_TRUE(l->is_shutdown());
  EXPECT_TRUE(absl::IsCancelled(l->Accept(Deadline()).status()));
}

TEST(TcpChannelTest, ShutdownCancelsAReceiveGivenTheCancelFd) {
  Pair p = MakePair();
  p.listener->Shutdown();
  auto frame = p.server->ReceiveFrame(kMaxFrame, Deadline(), p.listener->cancel_fd());
  EXPECT_TRUE(absl::IsCancelled(frame.status())) << frame.status();
}

TEST(TcpChannelTest, PeerNamesTheOtherEnd) {
  Pair p = MakePair();
  EXPECT_EQ(p.client->peer(), absl::StrCat(kLoopback, ":", p.listener->port()));
  EXPECT_EQ(p.server->peer().rfind("127.0.0.1:", 0), 0u) << p.server->peer();
}

}  // namespace
}  // namespace dreplay::verbs
