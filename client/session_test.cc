// Copyright dreplay authors.

#include "client/session.h"

#include <cstring>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "replay_server/server.h"
#include "testing/in_process_service.h"

namespace dreplay::client {
namespace {

using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;

TEST(ClientSessionOptionsTest, ATokenIsRequiredUnlessInsecure) {
  ClientSessionOptions o;
  o.port = 1;
  EXPECT_NE(o.Validate().message().find("--insecure"), std::string::npos) << o.Validate();
  o.auth_token = "too-short";
  EXPECT_NE(o.Validate().message().find("fewer than 16"), std::string::npos) << o.Validate();
  o.auth_token = "long-enough-token-0123";
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  o.insecure = true;
  EXPECT_NE(o.Validate().message().find("--insecure with a token"), std::string::npos);
  o.auth_token.clear();
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
}

TEST(ClientSessionOptionsTest, ValidateNamesTheBadField) {
  ClientSessionOptions o;
  o.port = 1;
  o.insecure = true;
  EXPECT_TRUE(o.Validate().ok());
  o.port = 0;
  EXPECT_NE(o.Validate().message().find("port=0"), std::string::npos);
  o.port = 1;
  o.role = protocol::Role::kMonitor;
  o.actor_id = 3;
  EXPECT_NE(o.Validate().message().find("actor_id=3"), std::string::npos);
  o.actor_id = 0;
  o.learner_placement = true;  // a monitor
  EXPECT_NE(o.Validate().message().find("learner_placement=true"), std::string::npos);
  o.role = protocol::Role::kLearner;
  EXPECT_TRUE(o.Validate().ok());
  o.learner_cache = true;  // the buffer placement's
  EXPECT_NE(o.Validate().message().find("learner_cache=true"), std::string::npos);
  o.learner_cache = false;
  o.learner_placement = false;
  o.retry_initial = absl::ZeroDuration();
  EXPECT_NE(o.Validate().message().find("retry_initial"), std::string::npos);
}

TEST(IsConnectionFailureTest, SeparatesLinkFailuresFromMisuse) {
  EXPECT_TRUE(IsConnectionFailure(absl::UnavailableError("gone")));
  EXPECT_TRUE(IsConnectionFailure(absl::AbortedError("flushed")));
  EXPECT_TRUE(IsConnectionFailure(absl::DeadlineExceededError("slow")));
  EXPECT_FALSE(IsConnectionFailure(absl::InvalidArgumentError("bad")));
  EXPECT_FALSE(IsConnectionFailure(absl::FailedPreconditionError("no key")));
  EXPECT_FALSE(IsConnectionFailure(absl::ResourceExhaustedError("queue full")));
  EXPECT_FALSE(IsConnectionFailure(absl::OkStatus()));
}

class ClientSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_host_ = SoftProvider();
    client_host_ = SoftProvider();
  }
  std::unique_ptr<verbs::Provider> server_host_, client_host_;
};

TEST_F(ClientSessionTest, ConnectReadsTheConfigAndServerLine) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto session = ClientSession::Connect(client_host_.get(),
                                        SessionOptions(*server, protocol::Role::kActor, 4));
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ((*session)->config(), server->config());
  EXPECT_EQ((*session)->config().spec(), "test f32");
  EXPECT_EQ((*session)->epoch(), 1u);
  EXPECT_EQ((*session)->generation(), 1u);
  absl::StatusOr<protocol::ServerLine> line = (*session)->ReadServerLine();
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->epoch, 1u);
  EXPECT_EQ(line->ingest_cursor, 0u);
  // The server's heartbeat WRITE arrives (it carries the epoch).
  EXPECT_TRUE(testing::WaitFor([&] { return (*session)->last_heartbeat() == 1; }));
}

TEST_F(ClientSessionTest, ConnectFailsClearlyWhenNobodyListens) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  ClientSessionOptions o = SessionOptions(*server, protocol::Role::kMonitor);
  server.reset();
  o.connect_deadline = absl::Milliseconds(50);
  const absl::Status s = ClientSession::Connect(client_host_.get(), o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("connecting to the replay server at 127.0.0.1:"), std::string::npos)
      << s;
}

TEST_F(ClientSessionTest, ReconnectFollowsARestartAndRefusesAChangedConfig) {
  server::ReplayServerOptions options = SmallServerOptions();
  auto server = StartServer(server_host_.get(), options);
  auto session = *ClientSession::Connect(client_host_.get(),
                                         SessionOptions(*server, protocol::Role::kMonitor));
  const uint64_t generation = session->generation();
  options.port = server->port();
  server.reset();
  server = StartServer(server_host_.get(), options);
  // The old connection is gone: on the same-host path a READ may still be
  // served until the peer's close is noticed, which happens promptly.
  EXPECT_TRUE(testing::WaitFor([&] { return !session->ReadServerLine().ok(); }));
  ASSERT_TRUE(session->Reconnect(generation, absl::UnavailableError("test")).ok());
  EXPECT_EQ(session->generation(), generation + 1);
  EXPECT_TRUE(session->ReadServerLine().ok());
  // Someone else already reconnected: nothing happens.
  ASSERT_TRUE(session->Reconnect(generation, absl::UnavailableError("test")).ok());
  EXPECT_EQ(session->generation(), generation + 1);

  server.reset();
  options.layout.slot_size = 256;
  server = StartServer(server_host_.get(), options);
  const absl::Status s = session->Reconnect(session->generation(), absl::UnavailableError("test"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("slot_size: 168 vs 256"), std::string::npos) << s;
}

TEST_F(ClientSessionTest, SinksSeeOnlyTheirOwnCompletions) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto session = *ClientSession::Connect(client_host_.get(),
                                         SessionOptions(*server, protocol::Role::kMonitor));
  const int a = *session->AddSink();
  const int b = *session->AddSink();
  EXPECT_NE(a, b);
  auto buffer = *RegisteredBuffer::Create(client_host_.get(), 4096);
  const verbs::RemoteRegion control = *session->Region(protocol::RegionKind::kControl);
  verbs::WorkRequest wrs[2];
  for (int i = 0; i < 2; ++i) {
    wrs[i].wr_id = ClientSession::WrId(i == 0 ? a : b, 100 + i);
    wrs[i].opcode = verbs::Opcode::kRead;
    wrs[i].local = buffer->mr();
    wrs[i].local_addr = buffer->data() + 256 * i;
    wrs[i].length = 64;
    wrs[i].remote_addr = control.addr;
    wrs[i].rkey = control.rkey;
  }
  ASSERT_TRUE(session->Post(wrs).ok());
  EXPECT_TRUE(session->Wait(b, wrs[1].wr_id, absl::Seconds(5)).ok());
  verbs::Completion c;
  ASSERT_TRUE(testing::WaitFor([&] { return session->Poll(a, absl::MakeSpan(&c, 1)) == 1; }));
  EXPECT_EQ(ClientSession::WrIdPayload(c.wr_id), 100u);
  EXPECT_EQ(session->Poll(b, absl::MakeSpan(&c, 1)), 0);
}

// Memory may be freed once Settle returns: deregistering it under an
// outstanding READ would fail the queue pair (a slow link keeps the READ
// outstanding when Settle is called).
TEST_F(ClientSessionTest, SettleWaitsForASinksRequestsBeforeItsMemoryGoes) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  ClientSessionOptions o = SessionOptions(*server, protocol::Role::kMonitor);
  absl::StatusOr<verbs::LinkModel> link = verbs::ParseLinkModel("20000:1");  // 20 ms each way
  ASSERT_TRUE(link.ok()) << link.status();
  o.qp.link = *link;
  auto session = *ClientSession::Connect(client_host_.get(), o);
  const int sink = *session->AddSink();
  session->Settle(sink);  // nothing outstanding: returns at once
  auto buffer = *RegisteredBuffer::Create(client_host_.get(), 4096);
  const verbs::RemoteRegion control = *session->Region(protocol::RegionKind::kControl);
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink, 7);
  wr.opcode = verbs::Opcode::kRead;
  wr.local = buffer->mr();
  wr.local_addr = buffer->data();
  wr.length = sizeof(protocol::ControlBlock);
  wr.remote_addr = control.addr;
  wr.rkey = control.rkey;
  ASSERT_TRUE(session->Post(absl::MakeConstSpan(&wr, 1)).ok());
  const absl::Time start = absl::Now();
  session->Settle(sink);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));  // it did wait for the READ
  protocol::ControlBlock block;
  std::memcpy(&block, buffer->data(), sizeof(block));
  EXPECT_EQ(block.header.magic, protocol::kMagic);
  verbs::Completion c;
  EXPECT_EQ(session->Poll(sink, absl::MakeSpan(&c, 1)), 0);  // dropped
  buffer.reset();
  EXPECT_EQ(session->qp()->state(), verbs::QpState::kReady) << session->qp()->error();
  EXPECT_TRUE(session->ReadServerLine().ok());
}

// link_bytes() and traffic() at one moment: the server's heartbeats may
// land between two reads, so read until a pair is stable.
LinkBytes StableLinkBytes(const ClientSession& s, verbs::QueuePairTraffic* traffic) {
  LinkBytes bytes;
  EXPECT_TRUE(testing::WaitFor([&] {
    *traffic = s.traffic();
    bytes = s.link_bytes();
    return s.traffic() == *traffic;
  }));
  return bytes;
}

// Link accounting: every byte the queue pair moved is in one class.
TEST_F(ClientSessionTest, LinkBytesAddUpToTheQueuePairsCount) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto session =
      ClientSession::Connect(client_host_.get(), SessionOptions(*server, protocol::Role::kLearner));
  ASSERT_TRUE(session.ok()) << session.status();
  ClientSession& s = **session;
  // The control block READ at connect and the handshake are control.
  // (The key grant the server WRITEs is peer traffic.) `traffic` is filled
  // before it is read.
  verbs::QueuePairTraffic traffic;
  const uint64_t control = StableLinkBytes(s, &traffic).control;
  EXPECT_GE(traffic.peer_in, protocol::kGrantRegionBytes);
  EXPECT_EQ(control, sizeof(protocol::ControlBlock) + s.handshake_bytes() + traffic.peer());
  EXPECT_GT(s.handshake_bytes(), 0u);
  ASSERT_TRUE(s.ReadServerLine(TrafficClass::kPolling).ok());
  EXPECT_EQ(s.link_bytes().polling, sizeof(protocol::ServerLine));
  // The server's heartbeat WRITEs arrive: peer-initiated, control.
  ASSERT_TRUE(testing::WaitFor([&] { return s.last_heartbeat() != 0; }));
  EXPECT_GE(s.traffic().peer_in, protocol::kHeartbeatBytes);
  const LinkBytes bytes = StableLinkBytes(s, &traffic);
  EXPECT_EQ(bytes.total(), traffic.total() + s.handshake_bytes());
  EXPECT_EQ(bytes.experience + bytes.metadata + bytes.polling + bytes.priorities + bytes.params,
            traffic.initiated() - sizeof(protocol::ControlBlock));
}

TEST_F(ClientSessionTest, AReconnectionKeepsTheOldQueuePairsCounts) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto session =
      ClientSession::Connect(client_host_.get(), SessionOptions(*server, protocol::Role::kMonitor));
  ASSERT_TRUE(session.ok()) << session.status();
  ClientSession& s = **session;
  ASSERT_TRUE(s.ReadServerLine().ok());
  const uint64_t before = s.traffic().initiated();
  ASSERT_TRUE(s.Reconnect(s.generation(), absl::UnavailableError("test")).ok());
  EXPECT_EQ(s.generation(), 2u);
  // The new connection READ the control block again; nothing was lost.
  EXPECT_EQ(s.traffic().initiated(), before + sizeof(protocol::ControlBlock));
  verbs::QueuePairTraffic traffic;
  const LinkBytes bytes = StableLinkBytes(s, &traffic);
  EXPECT_EQ(bytes.control - traffic.peer() - s.handshake_bytes(),
            2 * sizeof(protocol::ControlBlock) + sizeof(protocol::ServerLine));
  EXPECT_EQ(bytes.total(), traffic.total() + s.handshake_bytes());
}

}  // namespace
}  // namespace dreplay::client
