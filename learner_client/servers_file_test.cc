// Copyright dreplay authors.

#include "learner_client/servers_file.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace dreplay::learner {
namespace {

TEST(ServersFileTest, ReadsAddressesLinksAndSkipsCommentsAndBlankLines) {
  absl::StatusOr<std::vector<NodeAddress>> nodes = ParseServersFile(
      "# edge sites\n"
      "10.0.0.2:7471 10km-25g\n"
      "\n"
      "  host-b:7472   # the second site, the learner's link\n"
      "[::1]:7473\t100:1\r\n");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[0].server, "10.0.0.2:7471");
  EXPECT_EQ((*nodes)[0].link, "10km-25g");
  EXPECT_EQ((*nodes)[1].server, "host-b:7472");
  EXPECT_EQ((*nodes)[1].link, "");
  EXPECT_EQ((*nodes)[2].server, "[::1]:7473");
  EXPECT_EQ((*nodes)[2].link, "100:1");
  EXPECT_TRUE(ParseServersFile("# nothing yet\n")->empty());
}

TEST(ServersFileTest, NamesTheLineOfAMalformedEntry) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {Case{"a:1\nb:2 none extra\n", "line 2"}, Case{"a:1\nnoport\n", "line 2"},
                        Case{"a:99999\n", "line 1"}, Case{"a:1 nosuchlink\n", "line 1"},
                        Case{"a:1\n\na:1 none\n", "listed twice"}}) {
    absl::StatusOr<std::vector<NodeAddress>> nodes = ParseServersFile(c.text);
    ASSERT_FALSE(nodes.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(nodes.status()));
    EXPECT_NE(nodes.status().message().find(c.says), std::string::npos) << nodes.status();
  }
  EXPECT_TRUE(absl::IsNotFound(ReadServersFile("/nonexistent/servers.txt").status()));
}

TEST(ServersFileTest, ANodesConnectionIsTheBaseWithItsAddressAndLink) {
  client::ConnectionOptions base;
  base.session.host = "first";
  base.session.port = 1;
  base.session.auth_token = "token";
  absl::StatusOr<client::ConnectionOptions> c = NodeConnection(base, {"host-b:7472", "10km-25g"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->session.host, "host-b");
  EXPECT_EQ(c->session.port, 7472);
  EXPECT_EQ(c->session.auth_token, "token");
  EXPECT_GT(c->session.qp.link.one_way_delay, absl::ZeroDuration());
  c = NodeConnection(base, {"host-c:7473", ""});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->session.qp.link.one_way_delay, base.session.qp.link.one_way_delay);
  EXPECT_FALSE(NodeConnection(base, {"nocolon", ""}).ok());
}

std::string TestFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void Write(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  std::ofstream(tmp) << text;
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

// Waits up to 10 s for `done`.
bool Eventually(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

TEST(ServersFileTest, TheWatcherJoinsEachNewNodeOnceAndRetriesAFailedJoin) {
  const std::string path = TestFile("servers.txt");
  Write(path, "a:1\n");
  absl::Mutex mu;
  std::vector<std::string> calls;
  int c_attempts = 0;
  ServersFileWatcherOptions options;
  options.path = path;
  options.interval = absl::Milliseconds(10);
  auto watcher = ServersFileWatcher::Start(options, {"a:1"}, [&](const NodeAddress& node) {
    absl::MutexLock lock(&mu);
    calls.push_back(node.server + "/" + node.link);
    if (node.server == "c:3" && ++c_attempts == 1) {
      return absl::UnavailableError("test: not up yet");
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ((*watcher)->joined(), 0u) << "a node in use is not joined again";
  Write(path, "a:1\nb:2 10km-25g\nc:3\n");
  ASSERT_TRUE(Eventually([&] { return (*watcher)->joined() == 2; }));
  // A malformed file changes nothing and is counted.
  Write(path, "a:1\nb:2 10km-25g\nc:3\nd:4 bad-link\n");
  ASSERT_TRUE(Eventually([&] { return (*watcher)->bad_readings() > 0; }));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ((*watcher)->joined(), 2u);
  watcher->reset();  // stops and joins its thread
  absl::MutexLock lock(&mu);
  EXPECT_EQ(calls, (std::vector<std::string>{"b:2/10km-25g", "c:3/", "c:3/"}));
}

TEST(ServersFileTest, RefusesBadOptions) {
  ServersFileWatcherOptions options;
  auto join = [](const NodeAddress&) { return absl::OkStatus(); };
  EXPECT_FALSE(ServersFileWatcher::Start(options, {}, join).ok()) << "no path";
  options.path = TestFile("x.txt");
  options.interval = absl::ZeroDuration();
  EXPECT_FALSE(ServersFileWatcher::Start(options, {}, join).ok()) << "no interval";
  options.interval = absl::Seconds(1);
  EXPECT_FALSE(ServersFileWatcher::Start(options, {}, nullptr).ok()) << "no join";
}

}  // namespace
}  // namespace dreplay::learner
