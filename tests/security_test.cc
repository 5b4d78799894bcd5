// Copyright dreplay authors.
//
// The replay server process against clients that should not get in or
// should not be able to write: wrong tokens, a monitor forging WRITEs, and
// garbage on the listen port. Each is refused or fails alone; well-behaved
// clients connected at the same time carry on.
//
// It runs on the soft provider, or with DREPLAY_TEST_PROVIDER=ibverbs on a
// real device (tools/rxe_vm/suite.sh runs it so on rxe).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "protocol/auth.h"
#include "protocol/handshake.h"
#include "protocol/layout.h"
#include "testing/in_process_service.h"
#include "testing/server_process.h"
#include "testing/stats_monitor.h"

namespace dreplay::tests {
namespace {

using client::ClientSession;
using protocol::RegionKind;
using protocol::Role;
using protocol::StatsBlock;
using testing::TaggedPayload;
using testing::TestProvider;

constexpr char kToken[] = "correct horse battery staple";
constexpr uint32_t kPayloadBytes = 128;
constexpr absl::Duration kCompletionTimeout = absl::Seconds(20);

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::MakeTestDir("security");
    const std::string token_file = dir + "/token";
    testing::WriteSecretFile(token_file, std::string(kToken) + "\n");
    testing::ServerProcessOptions options;
    options.provider = testing::TestProviderName();
    options.flags = {"--capacity=4096",      "--slot_size=168",
                     "--batch_size=8",       "--staging_depth=4",
                     "--leases=8",           "--heartbeat_interval_s=0.1",
                     "--stats_interval_s=0", "--auth_token_file=" + token_file};
    absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
        testing::ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    host_ = TestProvider();
    auto monitor = testing::StatsMonitor::Connect(host_.get(), *server_, kToken);
    ASSERT_TRUE(monitor.ok()) << monitor.status();
    monitor_ = std::move(*monitor);
  }

  absl::StatusOr<std::unique_ptr<ClientSession>> Connect(Role role, uint32_t actor_id,
                                                         const std::string& token) {
    client::ClientSessionOptions o = testing::ClientOptions(*server_, role, actor_id, token);
    o.connect_deadline = absl::ZeroDuration();  // one attempt: refusals are final
    return ClientSession::Connect(host_.get(), o);
  }

  // Connects actor `actor_id` presenting `credential` as its token, once.
  absl::StatusOr<std::unique_ptr<ClientSession>> ConnectActorAs(uint32_t actor_id,
                                                                const std::string& credential) {
    client::ClientSessionOptions o =
        testing::ClientOptions(*server_, Role::kActor, actor_id, kToken);
    o.auth_token = credential;
    o.connect_deadline = absl::ZeroDuration();
    return ClientSession::Connect(host_.get(), o);
  }

  // Connects, retrying retryable refusals (a lease not yet given back)
  // within the session's patience.
  absl::StatusOr<std::unique_ptr<ClientSession>> ConnectPatiently(Role role, uint32_t actor_id) {
    return ClientSession::Connect(host_.get(),
                                  testing::ClientOptions(*server_, role, actor_id, kToken));
  }

  // Inserts `count` transitions through `writer` and waits until the server
  // holds `expected_total`.
  void InsertAndWait(actor::ExperienceWriter* writer, uint64_t first, uint64_t count,
                     uint64_t expected_total) {
    for (uint64_t t = first; t < first + count; ++t) {
      ASSERT_TRUE(writer->Append(TaggedPayload(t, kPayloadBytes), 1.0f).ok());
    }
    ASSERT_TRUE(writer->Flush().ok());
    absl::StatusOr<StatsBlock> s =
        monitor_->WaitUntil("the actor's transitions ingested",
                            [&](const StatsBlock& s) { return s.inserted == expected_total; });
    ASSERT_TRUE(s.ok()) << s.status();
  }

  // Posts one request on a fresh sink of `session` and returns its completion.
  verbs::Completion PostOne(ClientSession* session, verbs::WorkRequest wr) {
    const int sink = *session->AddSink();
    wr.wr_id = ClientSession::WrId(sink, 1);
    wr.signaled = true;
    EXPECT_TRUE(session->Post(absl::MakeConstSpan(&wr, 1)).ok());
    verbs::Completion c;
    c.status = verbs::WcStatus::kGeneralError;
    c.detail = "no completion within the timeout";
    const absl::Time deadline = absl::Now() + kCompletionTimeout;
    while (absl::Now() < deadline) {
      if (session->Poll(sink, absl::MakeSpan(&c, 1)) == 1) break;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return c;
  }

  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<verbs::Provider> host_;
  std::unique_ptr<testing::StatsMonitor> monitor_;
};

TEST_F(SecurityTest, AWrongTokenIsRefusedClearlyWhileAGoodClientKeepsWorking) {
  auto actor_session = Connect(Role::kActor, 0, kToken);
  ASSERT_TRUE(actor_session.ok()) << actor_session.status();
  auto writer = actor::ExperienceWriter::Create(actor_session->get(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  InsertAndWait(writer->get(), 0, 100, 100);

  const std::string wrong = "correct horse battery stapler";
  for (Role role : {Role::kActor, Role::kLearner, Role::kMonitor}) {
    for (const std::string& token : {wrong, std::string()}) {
      const absl::Status s = Connect(role, role == Role::kActor ? 1 : 0, token).status();
      EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
      EXPECT_NE(s.message().find("authentication failed"), std::string::npos) << s;
      EXPECT_FALSE(protocol::IsRetryableRejection(s)) << s;
      if (!token.empty()) {
        EXPECT_EQ(s.message().find(token), std::string::npos) << "the token must not be echoed";
      }
    }
  }

  // The good actor's connection is untouched: it goes on without
  // reconnecting, and the server counted every refusal.
  InsertAndWait(writer->get(), 100, 100, 200);
  EXPECT_EQ((*writer)->stats().reconnects, 0u);
  absl::StatusOr<StatsBlock> s = monitor_->WaitUntil(
      "six refusals counted", [](const StatsBlock& s) { return s.connections_rejected == 6; });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->actors_connected, 1u);
  EXPECT_TRUE(server_->Running());
}

TEST_F(SecurityTest, AMonitorCannotWriteAndAForgedWriteKillsOnlyItsOwnQueuePair) {
  auto actor_session = Connect(Role::kActor, 0, kToken);
  ASSERT_TRUE(actor_session.ok()) << actor_session.status();
  auto writer = actor::ExperienceWriter::Create(actor_session->get(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  InsertAndWait(writer->get(), 0, 50, 50);

  // A monitor is given no key to anything it could write.
  auto probe = Connect(Role::kMonitor, 0, kToken);
  ASSERT_TRUE(probe.ok()) << probe.status();
  for (RegionKind kind : {RegionKind::kSlots, RegionKind::kCommits, RegionKind::kStaging,
                          RegionKind::kMailbox, RegionKind::kParams}) {
    EXPECT_EQ((*probe)->Region(kind).status().code(), absl::StatusCode::kFailedPrecondition)
        << protocol::RegionKindName(kind);
  }
  const verbs::RemoteRegion control = *(*probe)->Region(RegionKind::kControl);
  const verbs::RemoteRegion stats = *(*probe)->Region(RegionKind::kStats);
  const protocol::LayoutConfig config = (*probe)->config();

  auto buffer = client::RegisteredBuffer::Create(host_.get(), 4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::memset((*buffer)->data(), 0xee, 4096);
  verbs::WorkRequest forged;
  forged.opcode = verbs::Opcode::kWrite;
  forged.local = (*buffer)->mr();
  forged.local_addr = (*buffer)->data();
  forged.length = 64;

  struct Attempt {
    std::string what;
    verbs::WorkRequest wr;
  };
  std::vector<Attempt> attempts;
  // Its own READ key, used to WRITE.
  forged.remote_addr = stats.addr;
  forged.rkey = stats.rkey;
  attempts.push_back({"WRITE with the stats region's READ key", forged});
  forged.remote_addr = control.addr;
  forged.rkey = control.rkey;
  attempts.push_back({"WRITE with the control block's READ key", forged});
  // FETCH_ADD on the server line through the control block's READ key.
  verbs::WorkRequest atomic = forged;
  atomic.opcode = verbs::Opcode::kFetchAdd;
  atomic.length = 8;
  atomic.remote_addr = control.addr + protocol::kIngestCursorOffset;
  atomic.compare_add = 1000;
  attempts.push_back({"FETCH_ADD on the server line with a READ key", atomic});
  // Guessed keys.
  std::mt19937 rng(20261129);
  for (int i = 0; i < 3; ++i) {
    forged.remote_addr = control.addr;
    forged.rkey = static_cast<uint32_t>(rng());
    if (forged.rkey == control.rkey || forged.rkey == stats.rkey) continue;
    attempts.push_back({absl::StrCat("WRITE with guessed key ", forged.rkey), forged});
  }

  for (const Attempt& a : attempts) {
    // Each attempt on its own monitor connection, next to a bystander
    // monitor that must not notice.
    auto forger = Connect(Role::kMonitor, 0, kToken);
    ASSERT_TRUE(forger.ok()) << forger.status();
    auto bystander = testing::StatsMonitor::Connect(host_.get(), *server_, kToken);
    ASSERT_TRUE(bystander.ok()) << bystander.status();
    const verbs::Completion c = PostOne(forger->get(), a.wr);
    EXPECT_EQ(c.status, verbs::WcStatus::kRemoteAccessError) << a.what << ": " << c.ToStatus();
    EXPECT_EQ((*forger)->qp()->state(), verbs::QpState::kError) << a.what;
    absl::StatusOr<StatsBlock> s = (*bystander)->Stats();
    ASSERT_TRUE(s.ok()) << a.what << ": " << s.status();
    EXPECT_EQ(s->inserted, 50u) << a.what;
    EXPECT_EQ((*bystander)->session()->generation(), 1u) << a.what << ": the bystander reconnected";
  }

  // Nothing was written: the control block, the cursor and the stats are as
  // the server made them, and the actor goes on.
  auto checker = Connect(Role::kMonitor, 0, kToken);
  ASSERT_TRUE(checker.ok()) << checker.status();
  EXPECT_EQ((*checker)->config(), config);
  InsertAndWait(writer->get(), 50, 50, 100);
  absl::StatusOr<StatsBlock> s = monitor_->Stats();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ingest_cursor, 100u) << "the forged write moved the cursor";
  EXPECT_EQ(s->capacity, config.capacity);
  EXPECT_EQ(s->torn_slots, 0u);
  EXPECT_EQ((*writer)->stats().reconnects, 0u);
  EXPECT_TRUE(server_->Running());
}

TEST_F(SecurityTest, AnActorCanWriteOnlyItsOwnLeaseAndHasNoAtomicRights) {
  auto actor_session = Connect(Role::kActor, 0, kToken);
  ASSERT_TRUE(actor_session.ok()) << actor_session.status();
  auto writer = actor::ExperienceWriter::Create(actor_session->get(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  InsertAndWait(writer->get(), 0, 50, 50);

  auto buffer = client::RegisteredBuffer::Create(host_.get(), 4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::memset((*buffer)->data(), 0xee, 4096);
  struct Attempt {
    std::string what;
    RegionKind kind;
    int64_t offset;  // from the start of the forger's own range
    verbs::Opcode opcode;
  };
  const std::vector<Attempt> attempts = {
      {"WRITE just past its lease's slots", RegionKind::kSlots, 0, verbs::Opcode::kWrite},
      {"WRITE just before its lease's slots", RegionKind::kSlots, -64, verbs::Opcode::kWrite},
      {"WRITE past its lease's commit words", RegionKind::kCommits, 0, verbs::Opcode::kWrite},
      {"FETCH_ADD on its own commit word", RegionKind::kCommits, 0, verbs::Opcode::kFetchAdd},
      {"FETCH_ADD on its own slot", RegionKind::kSlots, 0, verbs::Opcode::kFetchAdd},
  };
  for (const Attempt& a : attempts) {
    // Each attempt on a new connection of actor 1, once the last one's
    // lease is back (a failed request ends its queue pair, and the server
    // gives the lease back only when the connection is gone).
    auto forger = ConnectPatiently(Role::kActor, 1);
    ASSERT_TRUE(forger.ok()) << forger.status();
    EXPECT_FALSE((*forger)->directory().Has(RegionKind::kStaging));
    const verbs::RemoteRegion own = *(*forger)->Region(a.kind);
    verbs::WorkRequest wr;
    wr.opcode = a.opcode;
    wr.local = (*buffer)->mr();
    wr.local_addr = (*buffer)->data();
    if (a.opcode == verbs::Opcode::kFetchAdd) {
      wr.length = 8;
      wr.remote_addr = own.addr;  // inside its own range: the right is missing
      wr.compare_add = uint64_t{1} << 62;
    } else {
      wr.length = 64;
      wr.remote_addr = a.offset < 0 ? own.addr - static_cast<uint64_t>(-a.offset)
                                    : own.addr + own.length + static_cast<uint64_t>(a.offset);
    }
    wr.rkey = own.rkey;
    const verbs::Completion c = PostOne(forger->get(), wr);
    EXPECT_EQ(c.status, verbs::WcStatus::kRemoteAccessError) << a.what << ": " << c.ToStatus();
  }
  // The honest actor goes on; nothing forged was ingested or torn.
  InsertAndWait(writer->get(), 50, 50, 100);
  absl::StatusOr<StatsBlock> s = monitor_->Stats();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->torn_slots, 0u);
  EXPECT_EQ(s->overrun_slots, 0u);
  EXPECT_EQ((*writer)->stats().reconnects, 0u);
  EXPECT_TRUE(server_->Running());
}

TEST_F(SecurityTest, AnActorCanNeitherClaimAnotherIdNorTakeAHeldLease) {
  auto victim = Connect(Role::kActor, 0, kToken);
  ASSERT_TRUE(victim.ok()) << victim.status();
  auto writer = actor::ExperienceWriter::Create(victim->get(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  InsertAndWait(writer->get(), 0, 100, 100);

  // Actor 1's own credential, and the actors' master token, cannot claim id 0.
  for (const std::string& credential :
       {protocol::ActorCredential(kToken, 1), std::string(kToken)}) {
    const absl::Status s = ConnectActorAs(0, credential).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_FALSE(protocol::IsRetryableRejection(s)) << s;
  }
  // Even actor 0's own credential cannot take the lease while it is held:
  // the newcomer is refused, retryably, and the holder is not displaced.
  const absl::Status held = ConnectActorAs(0, protocol::ActorCredential(kToken, 0)).status();
  EXPECT_FALSE(held.ok());
  EXPECT_TRUE(protocol::IsRetryableRejection(held)) << held;

  InsertAndWait(writer->get(), 100, 100, 200);
  EXPECT_EQ((*writer)->stats().reconnects, 0u);
  absl::StatusOr<StatsBlock> s = monitor_->WaitUntil(
      "three refusals counted", [](const StatsBlock& s) { return s.connections_rejected == 3; });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->actors_connected, 1u);

  // Once the holder is gone, the same identity takes its lease back and
  // writes on after what the holder committed.
  writer->reset();
  victim->reset();
  auto returning = ConnectPatiently(Role::kActor, 0);
  ASSERT_TRUE(returning.ok()) << returning.status();
  auto resumed = actor::ExperienceWriter::Create(returning->get(), {});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  InsertAndWait(resumed->get(), 200, 50, 250);
  s = monitor_->Stats();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->torn_slots, 0u);
  EXPECT_TRUE(server_->Running());
}

// Opens a TCP connection to the server's listen port.
int RawConnect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST_F(SecurityTest, GarbageOnTheListenPortDoesNotDisturbTheServer) {
  auto actor_session = Connect(Role::kActor, 0, kToken);
  ASSERT_TRUE(actor_session.ok()) << actor_session.status();
  auto writer = actor::ExperienceWriter::Create(actor_session->get(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  InsertAndWait(writer->get(), 0, 40, 40);

  std::mt19937_64 rng(7);
  std::vector<int> open_fds;
  // Random bytes of several sizes, closed at once; then a peer that sends a
  // few bytes and stays silent (held open while the others connect); then
  // one that connects and hangs up without a byte.
  for (size_t size : {1u, 16u, 64u, 4096u, 65536u}) {
    const int fd = RawConnect(server_->port());
    ASSERT_GE(fd, 0) << std::strerror(errno);
    std::vector<uint8_t> garbage(size);
    for (uint8_t& b : garbage) b = static_cast<uint8_t>(rng());
    // The server may close the connection while we send: ignore errors.
    (void)send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL);
    close(fd);
  }
  const int silent = RawConnect(server_->port());
  ASSERT_GE(silent, 0);
  (void)send(silent, "\x00\x01\x02", 3, MSG_NOSIGNAL);
  const int mute = RawConnect(server_->port());
  ASSERT_GE(mute, 0);
  close(mute);

  // While the silent peer holds its connection, new clients get in and the
  // connected actor goes on.
  auto newcomer = Connect(Role::kActor, 1, kToken);
  ASSERT_TRUE(newcomer.ok()) << newcomer.status();
  auto newcomer_writer = actor::ExperienceWriter::Create(newcomer->get(), {});
  ASSERT_TRUE(newcomer_writer.ok()) << newcomer_writer.status();
  InsertAndWait(newcomer_writer->get(), 1000, 30, 70);
  InsertAndWait(writer->get(), 40, 40, 110);
  close(silent);

  EXPECT_EQ((*writer)->stats().reconnects, 0u);
  absl::StatusOr<StatsBlock> s = monitor_->Stats();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->torn_slots, 0u);
  EXPECT_EQ(s->actors_connected, 2u);
  EXPECT_TRUE(server_->Running());
  absl::StatusOr<int> exit_status = server_->Stop(SIGTERM, testing::kServerStopTimeout);
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_EQ(*exit_status, 0) << server_->LogTail();
}

// The binary's per-role token files: a role's own token replaces the shared
// one for that role only, and no token is written to the log.
TEST(SecurityFlagsTest, PerRoleTokenFilesGiveEachRoleItsOwnCredential) {
  const std::string dir = testing::MakeTestDir("security_roles");
  const std::string shared = "shared-token-5d1c0a9e", learner = "learner-token-77e2b3f1";
  testing::WriteSecretFile(dir + "/shared", shared + "\n");
  testing::WriteSecretFile(dir + "/learner", learner + "\n");
  testing::ServerProcessOptions options;
  options.provider = testing::TestProviderName();
  options.flags = {"--capacity=4096",
                   "--slot_size=168",
                   "--batch_size=8",
                   "--staging_depth=4",
                   "--leases=8",
                   "--stats_interval_s=0",
                   "--auth_token_file=" + dir + "/shared",
                   "--learner_token_file=" + dir + "/learner"};
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
      testing::ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<verbs::Provider> host = TestProvider();
  auto connect = [&](Role role, uint32_t actor_id, const std::string& token) {
    client::ClientSessionOptions o = testing::ClientOptions(**server, role, actor_id, token);
    o.connect_deadline = absl::ZeroDuration();
    return ClientSession::Connect(host.get(), o).status();
  };
  EXPECT_TRUE(connect(Role::kActor, 1, shared).ok());
  EXPECT_TRUE(connect(Role::kMonitor, 0, shared).ok());
  const absl::Status s = connect(Role::kLearner, 0, shared);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("authentication failed"), std::string::npos) << s;
  EXPECT_TRUE(connect(Role::kLearner, 0, learner).ok());
  const std::string log = (*server)->LogTail(1 << 20);
  EXPECT_NE(log.find("learners authenticate with their own role's token"), std::string::npos)
      << log;
  EXPECT_EQ(log.find(shared), std::string::npos);
  EXPECT_EQ(log.find(learner), std::string::npos);
}

TEST(SecurityFlagsTest, AServerWithoutTokensWarnsAtStart) {
  testing::ServerProcessOptions options;
  options.provider = testing::TestProviderName();
  options.flags = {"--capacity=4096",   "--slot_size=168", "--batch_size=8",
                   "--staging_depth=4", "--leases=8",      "--stats_interval_s=0"};
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
      testing::ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_NE((*server)->LogTail().find("no token given"), std::string::npos) << (*server)->LogTail();
}

}  // namespace
}  // namespace dreplay::tests
