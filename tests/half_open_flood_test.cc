// Copyright dreplay authors.
//
// The real replay_server against a flood of silent TCP peers: 100
// connections that never say a word, from the client's own address and then
// from another (any 127.x address is loopback), while a real client session
// still connects within a second each time. Before the connection manager a
// silent peer could hold the listener for its whole hello timeout.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "testing/in_process_service.h"
#include "testing/server_process.h"
#include "testing/stats_monitor.h"

namespace dreplay::tests {
namespace {

constexpr int kSilentPeers = 100;
constexpr absl::Duration kConnectBound = absl::Seconds(1);

// A TCP connection from `source` to 127.0.0.1:port that says nothing; -1 on
// failure.
int SilentPeer(const char* source, uint16_t port) {
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

class HalfOpenFloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::ServerProcessOptions options;
    options.flags = {"--capacity=4096",     "--slot_size=168", "--batch_size=8",
                     "--staging_depth=4",   "--leases=8",      "--heartbeat_interval_s=0.1",
                     "--stats_interval_s=0"};
    absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
        testing::ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    host_ = testing::SoftProvider();
  }

  void TearDown() override {
    for (int fd : silent_) close(fd);
  }

  void Flood(const char* source) {
    for (int i = 0; i < kSilentPeers; ++i) {
      const int fd = SilentPeer(source, server_->port());
      ASSERT_GE(fd, 0) << "silent peer " << i << " from " << source << ": " << std::strerror(errno);
      silent_.push_back(fd);
    }
  }

  // One real session (one attempt: challenge, then the handshake); returns
  // how long it took.
  absl::Duration ConnectOnce() {
    client::ClientSessionOptions o = testing::ClientOptions(*server_, protocol::Role::kMonitor);
    o.connect_deadline = absl::ZeroDuration();
    const absl::Time start = absl::Now();
    auto session = client::ClientSession::Connect(host_.get(), o);
    const absl::Duration took = absl::Now() - start;
    EXPECT_TRUE(session.ok()) << session.status() << "\n" << server_->LogTail();
    return took;
  }

  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<verbs::Provider> host_;
  std::vector<int> silent_;
};

TEST_F(HalfOpenFloodTest, ARealClientConnectsWithinASecondBehindAHundredSilentPeers) {
  // From the client's own address: the client's connection is the newest of
  // its source, so the per-source bound closes the flood's oldest instead.
  Flood("127.0.0.1");
  const absl::Duration same_source = ConnectOnce();
  EXPECT_LT(same_source, kConnectBound);
  // From another address: that source's bound holds the flood alone.
  Flood("127.0.0.2");
  const absl::Duration other_source = ConnectOnce();
  EXPECT_LT(other_source, kConnectBound);
  std::printf("connect behind %d silent peers from the same address: %s; from another: %s\n",
              kSilentPeers, absl::FormatDuration(same_source).c_str(),
              absl::FormatDuration(other_source).c_str());
  EXPECT_TRUE(server_->Running()) << server_->LogTail();
}

}  // namespace
}  // namespace dreplay::tests
