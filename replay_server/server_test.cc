// Copyright dreplay authors.

#include "replay_server/server.h"

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "client/session.h"
#include "gtest/gtest.h"
#include "protocol/handshake.h"
#include "testing/in_process_service.h"
#include "verbs/verbs.h"

namespace dreplay::server {
namespace {

using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::WaitFor;

class ReplayServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_host_ = SoftProvider();
    client_host_ = SoftProvider();
  }

  std::unique_ptr<client::ClientSession> Connect(const ReplayServer& server, protocol::Role role,
                                                 uint32_t actor_id = 0,
                                                 const std::string& token = "") {
    absl::StatusOr<std::unique_ptr<client::ClientSession>> session = client::ClientSession::Connect(
        client_host_.get(), SessionOptions(server, role, actor_id, token));
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  // Connects with a raw payload (no ClientSession); returns the status.
  absl::Status ConnectRaw(const ReplayServer& server, const std::string& payload) {
    verbs::QueuePairOptions qp;
    qp.connect_timeout = absl::Seconds(5);
    return client_host_->Connect(server.host(), server.port(), payload, qp).status();
  }

  // `hello` answering a fresh challenge of `server`, with the MAC of `token`.
  std::string SignedHello(const ReplayServer& server, protocol::Hello hello,
                          const std::string& token) {
    const absl::Status refusal = ConnectRaw(server, protocol::EncodeChallengeRequest(hello.role));
    absl::StatusOr<protocol::Nonce> nonce = protocol::ParseChallenge(refusal);
    EXPECT_TRUE(nonce.ok()) << refusal;
    if (nonce.ok()) hello.server_nonce = *nonce;
    // A grant region the server WRITEs the keys to (never READ here).
    if (hello.grant.length == 0) hello.grant = {0x1000, protocol::kGrantRegionBytes, 1, 0};
    return protocol::EncodeHello(hello, token).value();
  }

  // A READ of the session's lease line: proves an actor's queue pair still
  // works; returns the lease's ingest cursor.
  absl::StatusOr<uint64_t> PeekLease(client::ClientSession* session) {
    absl::StatusOr<std::unique_ptr<client::RegisteredBuffer>> buffer =
        client::RegisteredBuffer::Create(client_host_.get(), 64);
    if (!buffer.ok()) return buffer.status();
    absl::StatusOr<verbs::RemoteRegion> leases = session->Region(protocol::RegionKind::kLeases);
    if (!leases.ok()) return leases.status();
    absl::StatusOr<int> sink = session->AddSink();
    if (!sink.ok()) return sink.status();
    verbs::WorkRequest wr;
    wr.wr_id = client::ClientSession::WrId(*sink, 1);
    wr.opcode = verbs::Opcode::kRead;
    wr.local = (*buffer)->mr();
    wr.local_addr = (*buffer)->data();
    wr.length = 8;
    wr.remote_addr = leases->addr + protocol::LeaseLineOffset(session->directory().lease);
    wr.rkey = leases->rkey;
    absl::Status s = session->Post(absl::MakeConstSpan(&wr, 1));
    if (s.ok()) s = session->Wait(*sink, wr.wr_id, absl::Seconds(5));
    if (!s.ok()) return s;
    uint64_t value;
    std::memcpy(&value, (*buffer)->data(), sizeof(value));
    return value;
  }

  std::unique_ptr<verbs::Provider> server_host_;
  std::unique_ptr<verbs::Provider> client_host_;
};

TEST(ReplayServerOptionsTest, ACheckpointDirectoryAloneCheckpointsPeriodically) {
  // A directory without an interval used to checkpoint only at a clean stop:
  // a crash lost everything since the start.
  ReplayServerOptions o = SmallServerOptions();
  o.checkpoint_dir = "/nonexistent/not-created-by-validate";
  ASSERT_TRUE(o.Validate().ok());
  EXPECT_EQ(o.checkpoint_interval, kDefaultCheckpointInterval);
  EXPECT_LT(o.checkpoint_interval, absl::InfiniteDuration());
}

TEST(ReplayServerOptionsTest, ValidateNamesTheBadValue) {
  ReplayServerOptions o = SmallServerOptions();
  EXPECT_TRUE(o.Validate().ok());
  o.layout.capacity = 100;
  EXPECT_NE(o.Validate().message().find("capacity=100"), std::string::npos);
  o = SmallServerOptions();
  o.checkpoint_interval = absl::ZeroDuration();
  EXPECT_NE(o.Validate().message().find("checkpoint_interval=0"), std::string::npos);
  o = SmallServerOptions();
  o.heartbeat_interval = absl::ZeroDuration();
  EXPECT_NE(o.Validate().message().find("heartbeat_interval=0"), std::string::npos);
  o = SmallServerOptions();
  o.auth_token.assign(protocol::kMaxAuthTokenBytes + 1, 't');
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  o = SmallServerOptions();
  o.max_clients = 0;
  EXPECT_NE(o.Validate().message().find("max_clients=0"), std::string::npos);
  o = SmallServerOptions();
  o.host = "";
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ReplayServerTest, EachRoleGetsOnlyTheKeysItNeeds) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  for (protocol::Role role :
       {protocol::Role::kActor, protocol::Role::kLearner, protocol::Role::kMonitor}) {
    auto session = Connect(*server, role, role == protocol::Role::kActor ? 5 : 0);
    ASSERT_NE(session, nullptr);
    EXPECT_EQ(session->config(), server->config());
    for (uint32_t k = 0; k < protocol::kNumRegionKinds; ++k) {
      const auto kind = static_cast<protocol::RegionKind>(k);
      EXPECT_EQ(session->directory().Has(kind),
                protocol::RoleNeedsRegion(role, kind, server->config(), false))
          << protocol::RoleName(role) << " " << protocol::RegionKindName(kind);
    }
    if (role == protocol::Role::kActor) {
      // The actor's key covers its own stats line only.
      EXPECT_EQ(session->directory().Get(protocol::RegionKind::kActors).length,
                sizeof(protocol::ActorLine));
    } else {
      EXPECT_EQ(session->directory().Get(protocol::RegionKind::kActors).length,
                protocol::ActorsRegionBytes(server->config()));
    }
  }
}

TEST_F(ReplayServerTest, RefusedHandshakesDoNotDisturbAConnectedClient) {
  ReplayServerOptions options = SmallServerOptions();
  options.auth_token = "open-sesame-0123456";
  auto server = StartServer(server_host_.get(), options);
  auto actor = Connect(*server, protocol::Role::kActor, 1, "open-sesame-0123456");
  ASSERT_NE(actor, nullptr);
  ASSERT_TRUE(PeekLease(actor.get()).ok());

  // A wrong token.
  client::ClientSessionOptions bad_token =
      SessionOptions(*server, protocol::Role::kActor, 2, "a-wrong-guess-0123");
  absl::Status s = client::ClientSession::Connect(client_host_.get(), bad_token).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("authentication failed"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("a-wrong-guess"), std::string::npos) << "the token must not be echoed";

  // Another layout version.
  protocol::Hello hello;
  hello.role = protocol::Role::kLearner;
  std::string wire = SignedHello(*server, hello, "open-sesame-0123456");
  const uint32_t other_version = protocol::kLayoutVersion + 1;
  std::memcpy(&wire[offsetof(protocol::HelloMessage, layout_version)], &other_version, 4);
  s = ConnectRaw(*server, wire);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("client speaks layout version " + std::to_string(other_version)),
            std::string::npos)
      << s;

  // Garbage and an empty payload.
  s = ConnectRaw(*server, "\x01\x02garbage that is not a hello at all........");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("malformed hello"), std::string::npos) << s;
  EXPECT_EQ(ConnectRaw(*server, "").code(), absl::StatusCode::kPermissionDenied);

  // An actor id beyond max_actors.
  s = client::ClientSession::Connect(
          client_host_.get(),
          SessionOptions(*server, protocol::Role::kActor, 8, "open-sesame-0123456"))
          .status();
  EXPECT_NE(s.message().find("max_actors=8"), std::string::npos) << s;

  EXPECT_TRUE(WaitFor([&] { return server->connections().rejected == 5; }))
      << server->connections().rejected;
  // The connected actor is untouched.
  absl::StatusOr<uint64_t> tail = PeekLease(actor.get());
  EXPECT_TRUE(tail.ok()) << tail.status();
  EXPECT_TRUE(actor->ReadServerLine().ok());
  EXPECT_EQ(server->connections().actors, 1u);
}

TEST_F(ReplayServerTest, AnActorGetsItsOwnLeaseBackWhenItReconnects) {
  ReplayServerOptions o = SmallServerOptions();
  auto server = StartServer(server_host_.get(), o);
  auto a3 = Connect(*server, protocol::Role::kActor, 3);
  auto a5 = Connect(*server, protocol::Role::kActor, 5);
  ASSERT_NE(a3, nullptr);
  ASSERT_NE(a5, nullptr);
  const uint32_t lease3 = a3->directory().lease;
  const uint32_t lease5 = a5->directory().lease;
  EXPECT_NE(lease3, lease5);
  ASSERT_LT(lease3, server->config().leases);
  // The keys cover the lease alone.
  const uint64_t lease_slots = protocol::LeaseSlots(server->config());
  EXPECT_EQ(a3->directory().Get(protocol::RegionKind::kSlots).length,
            lease_slots * server->config().slot_size);
  EXPECT_EQ(a3->directory().Get(protocol::RegionKind::kCommits).length,
            lease_slots * sizeof(uint64_t));
  // A second connection of actor 3 while the first is connected is refused,
  // retryably; the first keeps its lease and its keys.
  client::ClientSessionOptions once = SessionOptions(*server, protocol::Role::kActor, 3);
  once.connect_deadline = absl::ZeroDuration();
  const absl::Status second = client::ClientSession::Connect(client_host_.get(), once).status();
  EXPECT_TRUE(protocol::IsRetryableRejection(second)) << second;
  EXPECT_NE(second.message().find("actor 3 is connected already"), std::string::npos) << second;
  EXPECT_TRUE(PeekLease(a3.get()).ok());
  EXPECT_TRUE(PeekLease(a5.get()).ok());
  // Dropped and back: still its own lease.
  a3.reset();
  EXPECT_TRUE(WaitFor([&] { return server->connections().actors == 1; }));
  auto back = Connect(*server, protocol::Role::kActor, 3);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->directory().lease, lease3);
}

TEST_F(ReplayServerTest, RefusesAnActorWithAClearErrorWhenAllLeasesAreHeld) {
  ReplayServerOptions o = SmallServerOptions();
  o.layout.leases = 2;
  auto server = StartServer(server_host_.get(), o);
  auto a0 = Connect(*server, protocol::Role::kActor, 0);
  auto a1 = Connect(*server, protocol::Role::kActor, 1);
  ASSERT_NE(a0, nullptr);
  ASSERT_NE(a1, nullptr);
  client::ClientSessionOptions co = SessionOptions(*server, protocol::Role::kActor, 2);
  co.connect_deadline = absl::ZeroDuration();
  const absl::Status s = client::ClientSession::Connect(client_host_.get(), co).status();
  EXPECT_TRUE(protocol::IsRetryableRejection(s)) << s;  // a lease may be released soon
  EXPECT_NE(s.message().find("all 2 actor leases are held"), std::string::npos) << s;
  // When one goes, the newcomer gets its (released) lease.
  const uint32_t freed = a1->directory().lease;
  a1.reset();
  EXPECT_TRUE(WaitFor([&] { return server->connections().actors == 1; }));
  auto a2 = Connect(*server, protocol::Role::kActor, 2);
  ASSERT_NE(a2, nullptr);
  EXPECT_EQ(a2->directory().lease, freed);
}

TEST_F(ReplayServerTest, AnActorHasNoKeyForTheStagingRing) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto actor = Connect(*server, protocol::Role::kActor, 0);
  ASSERT_NE(actor, nullptr);
  EXPECT_EQ(actor->Region(protocol::RegionKind::kStaging).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(actor->Region(protocol::RegionKind::kMailbox).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto buffer = *client::RegisteredBuffer::Create(client_host_.get(), 4096);
  const absl::Status s =
      actor->ReadSync(protocol::RegionKind::kStaging, 0, 64, buffer->mr(), buffer->data());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  // Nor can its control block key be stretched beyond the control block.
  EXPECT_EQ(
      actor->ReadSync(protocol::RegionKind::kControl, 0, 4096, buffer->mr(), buffer->data()).code(),
      absl::StatusCode::kOutOfRange);
}

TEST_F(ReplayServerTest, AMonitorWriteFailsWithRemoteAccessError) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto monitor = Connect(*server, protocol::Role::kMonitor);
  ASSERT_NE(monitor, nullptr);
  auto buffer = *client::RegisteredBuffer::Create(client_host_.get(), 4096);
  const verbs::RemoteRegion control = *monitor->Region(protocol::RegionKind::kControl);
  const int sink = *monitor->AddSink();
  verbs::WorkRequest wr;
  wr.wr_id = client::ClientSession::WrId(sink, 1);
  wr.opcode = verbs::Opcode::kWrite;
  wr.local = buffer->mr();
  wr.local_addr = buffer->data();
  wr.length = 64;
  wr.remote_addr = control.addr;
  wr.rkey = control.rkey;
  ASSERT_TRUE(monitor->Post(absl::MakeConstSpan(&wr, 1)).ok());
  verbs::Completion completion;
  ASSERT_TRUE(WaitFor([&] { return monitor->Poll(sink, absl::MakeSpan(&completion, 1)) == 1; }));
  EXPECT_EQ(completion.status, verbs::WcStatus::kRemoteAccessError) << completion.ToStatus();
  // The control block is as the server wrote it.
  EXPECT_EQ(server->config(), server->config());
  auto other = Connect(*server, protocol::Role::kMonitor);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->config(), server->config());
}

TEST_F(ReplayServerTest, ASecondLearnerIsRefusedUntilTheFirstLeaves) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto first = Connect(*server, protocol::Role::kLearner);
  ASSERT_NE(first, nullptr);
  client::ClientSessionOptions once = SessionOptions(*server, protocol::Role::kLearner);
  once.connect_deadline = absl::ZeroDuration();
  const absl::Status s = client::ClientSession::Connect(client_host_.get(), once).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_TRUE(protocol::IsRetryableRejection(s)) << s;
  EXPECT_NE(s.message().find("another learner is connected"), std::string::npos) << s;
  first.reset();
  // The session retries while the server notices the first one is gone.
  auto second = Connect(*server, protocol::Role::kLearner);
  EXPECT_NE(second, nullptr);
  EXPECT_TRUE(WaitFor([&] { return server->connections().learners == 1; }));
}

TEST_F(ReplayServerTest, PublishesThePolicyAndForgetsTheLearnerCacheOnEveryLearner) {
  ReplayServerOptions options = SmallServerOptions();
  options.core.sampler.rate_limiter.samples_per_insert = 2;
  options.core.sampler.rate_limiter.error_buffer = 4.0 * options.layout.batch_size;
  auto server = StartServer(server_host_.get(), options);
  auto monitor = Connect(*server, protocol::Role::kMonitor);
  ASSERT_NE(monitor, nullptr);
  auto buffer = *client::RegisteredBuffer::Create(client_host_.get(), sizeof(protocol::StatsBlock));
  ASSERT_TRUE(monitor
                  ->ReadSync(protocol::RegionKind::kControl,
                             offsetof(protocol::ControlBlock, policy), sizeof(protocol::PolicyLine),
                             buffer->mr(), buffer->data())
                  .ok());
  protocol::PolicyLine policy;
  std::memcpy(&policy, buffer->data(), sizeof(policy));
  EXPECT_EQ(policy.samples_per_insert, 2);
  EXPECT_EQ(policy.spi_error_buffer, 4.0 * options.layout.batch_size);
  EXPECT_EQ(policy.spi_block_actors, 0u);

  auto resets = [&]() -> uint64_t {
    if (!monitor
             ->ReadSync(protocol::RegionKind::kStats, 0, sizeof(protocol::StatsBlock), buffer->mr(),
                        buffer->data())
             .ok()) {
      return 0;
    }
    protocol::StatsBlock stats;
    std::memcpy(&stats, buffer->data(), sizeof(stats));
    return stats.learner_cache_resets;
  };
  protocol::Hello hello;
  hello.role = protocol::Role::kLearner;
  hello.learner_cache = true;
  // The accept thread answers a learner only once the core has applied its
  // connection: the reset is counted by then (and published soon after).
  const absl::Status s = ConnectRaw(*server, SignedHello(*server, hello, ""));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(WaitFor([&] { return resets() == 1; }));
}

TEST_F(ReplayServerTest, TheConnectionLineCountsClientsAndDropsDeadOnes) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto a0 = Connect(*server, protocol::Role::kActor, 0);
  auto a1 = Connect(*server, protocol::Role::kActor, 1);
  auto monitor = Connect(*server, protocol::Role::kMonitor);
  ASSERT_TRUE(a0 && a1 && monitor);
  // The server counts a client just after its Connect returns.
  EXPECT_TRUE(WaitFor([&] {
    const ConnectionCounts c = server->connections();
    return c.actors == 2 && c.monitors == 1 && c.total == 3;
  }));
  a1.reset();
  EXPECT_TRUE(WaitFor([&] { return server->connections().actors == 1; }));
  // What was accepted, by role, stays counted.
  const ConnectionCounts c = server->connections();
  EXPECT_EQ(c.actors_accepted, 2u);
  EXPECT_EQ(c.monitors_accepted, 1u);
  EXPECT_EQ(c.learners_accepted, 0u);
  // A monitor sees the same through its READ of the stats region.
  auto buffer = *client::RegisteredBuffer::Create(client_host_.get(), sizeof(protocol::StatsBlock));
  ASSERT_TRUE(monitor
                  ->ReadSync(protocol::RegionKind::kStats, 0, sizeof(protocol::StatsBlock),
                             buffer->mr(), buffer->data())
                  .ok());
  protocol::StatsBlock stats;
  std::memcpy(&stats, buffer->data(), sizeof(stats));
  EXPECT_EQ(stats.actors_connected, 1u);
  EXPECT_EQ(stats.monitors_connected, 1u);
  EXPECT_EQ(stats.capacity, server->config().capacity);
}

TEST_F(ReplayServerTest, RestartFromACheckpointStartsANewEpoch) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/restart_epoch";
  std::filesystem::remove_all(dir);
  ReplayServerOptions options = SmallServerOptions();
  options.checkpoint_dir = dir;
  auto server = StartServer(server_host_.get(), options);
  EXPECT_FALSE(server->restored());
  EXPECT_EQ(server->epoch(), 1u);
  EXPECT_TRUE(server->Stop().ok());
  EXPECT_TRUE(std::filesystem::exists(server->checkpoint_path()));
  server.reset();

  server = StartServer(server_host_.get(), options);
  EXPECT_TRUE(server->restored());
  EXPECT_EQ(server->epoch(), 2u);
  auto monitor = Connect(*server, protocol::Role::kMonitor);
  ASSERT_NE(monitor, nullptr);
  EXPECT_EQ(monitor->epoch(), 2u);
  server.reset();

  // A checkpoint of another geometry is refused, naming the difference.
  options.layout.batch_size = 16;
  const absl::Status s = ReplayServer::Start(server_host_.get(), options).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("batch_size"), std::string::npos) << s;
  EXPECT_NE(s.message().find("replay.ckpt"), std::string::npos) << s;
}

TEST_F(ReplayServerTest, GrantsKeysThroughASendQueueSmallerThanTheBindsAndWrites) {
  ReplayServerOptions options = SmallServerOptions();
  options.qp.max_send_wr = 1;  // binds and the grant's two WRITEs go one by one
  auto server = StartServer(server_host_.get(), options);
  auto actor = Connect(*server, protocol::Role::kActor, 1);
  auto learner = Connect(*server, protocol::Role::kLearner);
  ASSERT_TRUE(actor && learner);
  EXPECT_TRUE(PeekLease(actor.get()).ok());
  EXPECT_EQ(server->connections().actors, 1u);
}

TEST_F(ReplayServerTest, MonitorsHoldTheirShareOnlyAndTheLearnerAndActorsStillFindRoom) {
  ReplayServerOptions options = SmallServerOptions();
  options.max_monitors = 2;
  options.max_clients = options.layout.leases + 1 + options.max_monitors;
  auto server = StartServer(server_host_.get(), options);
  auto m1 = Connect(*server, protocol::Role::kMonitor);
  auto m2 = Connect(*server, protocol::Role::kMonitor);
  ASSERT_TRUE(m1 && m2);
  client::ClientSessionOptions once = SessionOptions(*server, protocol::Role::kMonitor);
  once.connect_deadline = absl::ZeroDuration();
  const absl::Status s = client::ClientSession::Connect(client_host_.get(), once).status();
  EXPECT_TRUE(protocol::IsRetryableRejection(s)) << s;
  EXPECT_NE(s.message().find("maximum of 2 monitors"), std::string::npos) << s;
  // Monitors at their maximum take no room of the other roles.
  auto learner = Connect(*server, protocol::Role::kLearner);
  auto actor = Connect(*server, protocol::Role::kActor, 0);
  EXPECT_TRUE(learner && actor);
  m1.reset();
  EXPECT_NE(Connect(*server, protocol::Role::kMonitor), nullptr);  // retried until m1 is dropped
}

TEST_F(ReplayServerTest, MaxClientsMustLeaveRoomForEveryRole) {
  ReplayServerOptions o = SmallServerOptions();
  o.layout.leases = 4;
  o.max_monitors = 3;
  o.max_clients = 7;
  const absl::Status s = o.Validate();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("= 8"), std::string::npos) << s;
  o.max_clients = 8;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
}

TEST_F(ReplayServerTest, WritesCheckpointsPeriodically) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/periodic";
  std::filesystem::remove_all(dir);
  ReplayServerOptions options = SmallServerOptions();
  options.checkpoint_dir = dir;
  options.checkpoint_interval = absl::Milliseconds(20);
  auto server = StartServer(server_host_.get(), options);
  EXPECT_TRUE(WaitFor([&] { return server->ReadStats().checkpoints_written >= 2; }));
  EXPECT_TRUE(std::filesystem::exists(server->checkpoint_path()));
}

TEST_F(ReplayServerTest, WritesACheckpointOnRequestAndKeepsTheNewestOnes) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/requested";
  std::filesystem::remove_all(dir);
  ReplayServerOptions options = SmallServerOptions();
  options.checkpoint_dir = dir;
  options.checkpoint_keep = 2;
  auto server = StartServer(server_host_.get(), options);
  for (uint64_t written = 1; written <= 3; ++written) {
    ASSERT_TRUE(server->RequestCheckpoint().ok());
    ASSERT_TRUE(WaitFor([&] { return server->ReadStats().checkpoints_written >= written; }));
  }
  // The count goes up when a file is written, before the older ones are
  // rotated: stop the core thread (and write a fourth) before looking.
  ASSERT_TRUE(server->Stop().ok());
  EXPECT_EQ(server->ReadStats().checkpoints_written, 4u);
  EXPECT_TRUE(std::filesystem::exists(server->checkpoint_path()));
  EXPECT_TRUE(std::filesystem::exists(server->checkpoint_path() + ".1"));
  EXPECT_FALSE(std::filesystem::exists(server->checkpoint_path() + ".2"));
}

TEST_F(ReplayServerTest, ARequestedCheckpointNeedsACheckpointDir) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  EXPECT_EQ(server->RequestCheckpoint().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ReplayServerTest, FallsBackToThePreviousCheckpointWhenTheNewestIsDamaged) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/fallback";
  std::filesystem::remove_all(dir);
  ReplayServerOptions options = SmallServerOptions();
  options.checkpoint_dir = dir;
  options.checkpoint_keep = 3;
  auto server = StartServer(server_host_.get(), options);
  ASSERT_TRUE(server->RequestCheckpoint().ok());
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().checkpoints_written >= 1; }));
  ASSERT_TRUE(server->Stop().ok());  // the final checkpoint: the newest
  const std::string newest = server->checkpoint_path();
  server.reset();
  {
    // A bit flipped in the middle of the newest file.
    std::fstream file(newest, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(0, std::ios::end);
    const std::streamoff middle = file.tellg() / 2;
    file.seekg(middle);
    char byte = 0;
    file.read(&byte, 1);
    byte ^= 1;
    file.seekp(middle);
    file.write(&byte, 1);
    ASSERT_TRUE(file.good());
  }

  server = StartServer(server_host_.get(), options);
  EXPECT_TRUE(server->restored());
  EXPECT_EQ(server->restored_path(), newest + ".1");
  EXPECT_EQ(server->epoch(), 2u);

  // With every kept checkpoint damaged the server refuses to start empty.
  server.reset();  // its final checkpoint is sound: damage it too
  for (const std::string& path : {newest, newest + ".1", newest + ".2"}) {
    std::filesystem::resize_file(path, 100);
  }
  const absl::Status s = ReplayServer::Start(server_host_.get(), options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find(newest), std::string::npos) << s;
}

TEST_F(ReplayServerTest, NeverRunsAgainAnEpochThatACrashedServerRan) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/crashed";
  std::filesystem::remove_all(dir);
  ReplayServerOptions options = SmallServerOptions();
  options.checkpoint_dir = dir;
  auto server = StartServer(server_host_.get(), options);
  ASSERT_TRUE(server->Stop().ok());  // a checkpoint of epoch 1
  server.reset();
  // A later server restored it, ran epoch 2, and crashed before writing a
  // checkpoint: only its start record says so.
  CheckpointStoreOptions store_options;
  store_options.dir = dir;
  auto store = CheckpointStore::Open(store_options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(store->WriteStartRecord({/*incarnation=*/12345, /*epoch=*/2}).ok());

  server = StartServer(server_host_.get(), options);
  EXPECT_TRUE(server->restored());
  EXPECT_EQ(server->epoch(), 3u) << "epoch 2 was run already";
  const absl::StatusOr<std::optional<StartRecord>> record = store->ReadStartRecord();
  ASSERT_TRUE(record.ok()) << record.status();
  ASSERT_TRUE(record->has_value());
  EXPECT_EQ((*record)->epoch, 3u);
  EXPECT_NE((*record)->incarnation, 12345u);
}

TEST_F(ReplayServerTest, StopIsIdempotentAndCutsClientsOff) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto actor = Connect(*server, protocol::Role::kActor, 3);
  ASSERT_NE(actor, nullptr);
  EXPECT_TRUE(server->Stop().ok());
  EXPECT_TRUE(server->Stop().ok());
  EXPECT_FALSE(PeekLease(actor.get()).ok());
}

}  // namespace
}  // namespace dreplay::server
