// Copyright dreplay authors.

#include "client/connection_flags.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dreplay::client {
namespace {

using ::testing::HasSubstr;

ConnectionFlags Flags(const std::string& server) {
  ConnectionFlags flags;
  flags.server = server;
  return flags;
}

std::string EmptyFile() {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/empty_token";
  std::ofstream(path) << "\n";
  chmod(path.c_str(), 0600);
  return path;
}

TEST(ConnectionFlagsTest, FillsTheProviderAndTheSessionFromTheFlags) {
  ConnectionFlags flags = Flags("10.0.0.2:7471");
  flags.provider.provider = "soft";
  flags.link = "10km-25g";
  flags.auth_token = "t0ken-0123456789";
  const absl::StatusOr<ConnectionOptions> c =
      ConnectionOptionsFromFlags(flags, protocol::Role::kActor, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->provider.kind, verbs::ProviderKind::kSoft);
  EXPECT_EQ(c->session.host, "10.0.0.2");
  EXPECT_EQ(c->session.port, 7471);
  EXPECT_EQ(c->session.role, protocol::Role::kActor);
  EXPECT_EQ(c->session.actor_id, 3u);
  EXPECT_EQ(c->session.auth_token, "t0ken-0123456789");
  EXPECT_FALSE(c->session.insecure);
  EXPECT_EQ(c->session.qp.link.one_way_delay, absl::Microseconds(50));
}

TEST(ConnectionFlagsTest, TheFlagsDefaultsNeedAServerAndATokenOrInsecure) {
  ConnectionFlags flags = Flags("127.0.0.1:1");
  const absl::Status no_token =
      ConnectionOptionsFromFlags(flags, protocol::Role::kMonitor).status();
  EXPECT_TRUE(absl::IsInvalidArgument(no_token)) << no_token;
  EXPECT_THAT(no_token.message(), HasSubstr("--insecure"));
  flags.insecure = true;
  const absl::StatusOr<ConnectionOptions> c =
      ConnectionOptionsFromFlags(flags, protocol::Role::kMonitor);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->session.insecure);
  EXPECT_EQ(c->provider.kind, verbs::ProviderKind::kAuto);
  EXPECT_FALSE(c->session.qp.link.enabled());
  EXPECT_EQ(c->session.auth_token, "");
}

TEST(ConnectionFlagsTest, NamesTheBadFlagAndItsValue) {
  const auto message = [](const ConnectionFlags& flags) {
    const absl::Status s = ConnectionOptionsFromFlags(flags, protocol::Role::kLearner).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    return std::string(s.message());
  };
  EXPECT_EQ(message(Flags("")), "--server=: is required (HOST:PORT)");
  EXPECT_THAT(message(Flags("no-port")), HasSubstr("--server=no-port: "));
  ConnectionFlags link = Flags("127.0.0.1:1");
  link.link = "faraway";
  EXPECT_THAT(message(link), HasSubstr("--link=faraway: "));
  ConnectionFlags provider = Flags("127.0.0.1:1");
  provider.provider.provider = "rxe";
  EXPECT_THAT(message(provider), HasSubstr("--provider=rxe: "));
  ConnectionFlags both = Flags("127.0.0.1:1");
  both.auth_token = "a";
  both.auth_token_file = "b";
  EXPECT_THAT(message(both), HasSubstr("--auth_token or --auth_token_file, not both"));
  ConnectionFlags short_token = Flags("127.0.0.1:1");
  short_token.auth_token = "short";
  EXPECT_THAT(message(short_token), HasSubstr("fewer than 16"));
  ConnectionFlags both_ways = Flags("127.0.0.1:1");
  both_ways.auth_token = "a-token-0123456789";
  both_ways.insecure = true;
  EXPECT_THAT(message(both_ways), HasSubstr("--insecure with a token"));
}

TEST(ConnectionFlagsTest, AnEmptyTokenFileIsNoTokenUnlessRefused) {
  ConnectionFlags flags = Flags("127.0.0.1:1");
  flags.auth_token_file = EmptyFile();
  flags.insecure = true;
  EXPECT_TRUE(ConnectionOptionsFromFlags(flags, protocol::Role::kActor).ok());
  flags.empty_token_file = EmptyTokenFile::kRefused;
  EXPECT_THAT(ConnectionOptionsFromFlags(flags, protocol::Role::kMonitor).status().message(),
              HasSubstr("holds no token"));
}

}  // namespace
}  // namespace dreplay::client
