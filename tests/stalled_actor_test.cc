// Copyright dreplay authors.
//
// A stalled and a killed actor with real processes: the real replay_server
// binary and lease_writer child processes (tests/lease_writer_main.cc), one
// of which is stopped (SIGSTOP) while it writes. The others keep being
// ingested while it is stopped, every transition they committed is
// ingested exactly once and nothing is torn; after SIGCONT the stopped
// writer goes on, after SIGKILL the server stays healthy and gives its
// lease back to the next actor with its id. Rates are not compared here
// (tools/bench/replay_bench --stalled_actors measures them).

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "protocol/layout.h"
#include "testing/in_process_service.h"
#include "testing/server_process.h"
#include "testing/session_options.h"

extern char** environ;

namespace dreplay::tests {
namespace {

using protocol::LeaseLine;
using protocol::Role;

constexpr int kLeases = 4;
constexpr uint64_t kLiveCount = 20000;      // per live writer
constexpr uint64_t kStalledCount = 100000;  // the stopped writer's (never reached in time)
constexpr uint64_t kStopAfter = 1000;       // its lease's cursor when it is stopped
constexpr uint64_t kRespawnCount = 3000;
constexpr absl::Duration kTimeout = absl::Seconds(60);

std::vector<std::string> ServerFlags() {
  return {"--capacity=8192",
          "--slot_size=128",
          "--batch_size=16",
          "--staging_depth=4",
          "--actor_ids=8",
          absl::StrCat("--leases=", kLeases),
          "--heartbeat_interval_s=0.1",
          "--stats_interval_s=0",
          "--seed=5"};
}

// A lease_writer child; killed (SIGKILL, by pid) and reaped if still running
// at destruction.
class Writer {
 public:
  Writer(const std::string& dir, const std::string& server, int actor_id, uint64_t count)
      : out_(absl::StrCat(dir, "/writer_", actor_id, "_", count, ".out")) {
    const std::vector<std::string> args = {"tests/lease_writer",
                                           absl::StrCat("--server=", server),
                                           absl::StrCat("--actor_id=", actor_id),
                                           absl::StrCat("--count=", count),
                                           "--max_batch=16",
                                           "--logtostderr"};
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (out_ + ".err").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(rc, 0) << "posix_spawn " << argv[0];
    if (rc != 0) pid_ = -1;
  }
  ~Writer() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  void Signal(int signal) { ASSERT_EQ(kill(pid_, signal), 0); }
  // Waits for the child to exit; its exit status, or -1 at the timeout.
  int Wait(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return -1;
  }
  std::string Output() const { return ReadFile(out_) + ReadFile(out_ + ".err"); }

 private:
  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string out_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

// READs the lease lines through a monitor session.
class LeaseWatch {
 public:
  explicit LeaseWatch(const testing::ServerProcess& server) : provider_(testing::SoftProvider()) {
    auto session = client::ClientSession::Connect(
        provider_.get(), testing::TestSessionOptions(server.host(), server.port(), Role::kMonitor));
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return;
    session_ = std::move(*session);
    buffer_ = *client::RegisteredBuffer::Create(provider_.get(), kLeases * sizeof(LeaseLine));
  }
  bool ok() const { return session_ != nullptr; }

  // The line of the lease `actor_id` holds or last held (a zero line if
  // none).
  LeaseLine Of(uint32_t actor_id) {
    const absl::Status s =
        session_->ReadSync(protocol::RegionKind::kLeases, 0, kLeases * sizeof(LeaseLine),
                           buffer_->mr(), buffer_->data());
    EXPECT_TRUE(s.ok()) << s;
    const auto* lines = reinterpret_cast<const LeaseLine*>(buffer_->data());
    for (int i = 0; i < kLeases; ++i) {
      if (lines[i].state != 0 && lines[i].holder_actor_id == actor_id) return lines[i];
    }
    return LeaseLine{};
  }
  // Polls until pred(Of(actor_id)) or the timeout.
  template <typename Pred>
  bool WaitFor(uint32_t actor_id, Pred pred, absl::Duration timeout = kTimeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (pred(Of(actor_id))) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

 private:
  std::unique_ptr<verbs::Provider> provider_;
  std::unique_ptr<client::ClientSession> session_;
  std::unique_ptr<client::RegisteredBuffer> buffer_;
};

TEST(StalledActorTest, OthersAreIngestedWhileOneIsStoppedAndTheServerSurvivesItsDeath) {
  testing::ServerProcessOptions options;
  options.flags = ServerFlags();
  auto server = testing::ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string dir = testing::MakeTestDir("stalled_actor");
  LeaseWatch watch(**server);
  ASSERT_TRUE(watch.ok());

  // Actor 0 is stopped while it writes.
  auto stalled = std::make_unique<Writer>(dir, (*server)->address(), 0, kStalledCount);
  ASSERT_TRUE(watch.WaitFor(0, [](const LeaseLine& l) { return l.ingest_cursor >= kStopAfter; }))
      << stalled->Output();
  stalled->Signal(SIGSTOP);
  // What it had on the wire may still land; then its lease stands still.
  const LeaseLine at_stop = watch.Of(0);
  ASSERT_LT(at_stop.ingest_cursor, kStalledCount);

  // Three more actors write all their transitions meanwhile.
  std::vector<std::unique_ptr<Writer>> live;
  for (int id = 1; id < kLeases; ++id) {
    live.push_back(std::make_unique<Writer>(dir, (*server)->address(), id, kLiveCount));
  }
  for (int id = 1; id < kLeases; ++id) {
    Writer& w = *live[id - 1];
    ASSERT_EQ(w.Wait(kTimeout), 0) << w.Output();
    EXPECT_NE(w.Output().find(absl::StrCat("committed ", kLiveCount, " abandoned 0")),
              std::string::npos)
        << w.Output();
    // Each committed transition ingested exactly once, nothing torn.
    EXPECT_TRUE(watch.WaitFor(id, [](const LeaseLine& l) { return l.ingest_cursor == kLiveCount; }))
        << "actor " << id << " cursor " << watch.Of(id).ingest_cursor;
    const LeaseLine l = watch.Of(id);
    EXPECT_EQ(l.inserted, kLiveCount) << "actor " << id;
    EXPECT_EQ(l.torn + l.overrun, 0u) << "actor " << id;
  }
  // The stopped actor's lease did not move while the others wrote.
  const LeaseLine stopped = watch.Of(0);
  EXPECT_LT(stopped.ingest_cursor, kStalledCount);
  EXPECT_EQ(stopped.torn + stopped.overrun, 0u);

  // Continued, it writes on (its connection may have been dropped meanwhile:
  // it reconnects and resumes its lease).
  stalled->Signal(SIGCONT);
  const uint64_t resumed_from = stopped.ingest_cursor;
  EXPECT_TRUE(watch.WaitFor(0, [&](const LeaseLine& l) {
    return l.ingest_cursor >= resumed_from + kStopAfter || l.ingest_cursor == kStalledCount;
  })) << stalled->Output();

  // Killed mid-write, then replaced by a new process with its id: the lease
  // comes back, resumes after the last commit, and nothing is torn.
  stalled->Signal(SIGKILL);
  ASSERT_EQ(stalled->Wait(kTimeout), 128 + SIGKILL);
  Writer respawned(dir, (*server)->address(), 0, kRespawnCount);
  ASSERT_EQ(respawned.Wait(kTimeout), 0) << respawned.Output();
  EXPECT_NE(respawned.Output().find(absl::StrCat("committed ", kRespawnCount, " abandoned 0")),
            std::string::npos)
      << respawned.Output();
  EXPECT_TRUE(watch.WaitFor(0, [](const LeaseLine& l) { return l.inserted == l.ingest_cursor; }));
  const LeaseLine end = watch.Of(0);
  EXPECT_GE(end.grants, 2u);
  EXPECT_EQ(end.torn + end.overrun, 0u);
  EXPECT_GE(end.ingest_cursor, resumed_from + kRespawnCount);

  // The server is healthy: still running, and it stops cleanly.
  EXPECT_TRUE((*server)->Running()) << (*server)->LogTail();
  auto stopped_status = (*server)->Stop(SIGTERM, testing::kServerStopTimeout);
  ASSERT_TRUE(stopped_status.ok()) << stopped_status.status();
  EXPECT_EQ(*stopped_status, 0) << (*server)->LogTail();
}

}  // namespace
}  // namespace dreplay::tests
