// Copyright dreplay authors.
//
// The handshake's challenge-response against a real server (soft provider):
// per-role tokens, replayed hellos, and the bytes a client sends.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/session.h"
#include "common/mutex.h"
#include "gtest/gtest.h"
#include "protocol/handshake.h"
#include "replay_server/server.h"
#include "testing/in_process_service.h"
#include "verbs/verbs.h"

namespace dreplay::server {
namespace {

using protocol::Role;
using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::WaitFor;

constexpr char kActorToken[] = "actor-token-3f9c1e77d2a04b58";
constexpr char kLearnerToken[] = "learner-token-8b21c6d0e5f94a13";

// A provider that records every payload its Connect() sends, and forwards
// everything to a soft provider.
class RecordingProvider : public verbs::Provider {
 public:
  explicit RecordingProvider(std::unique_ptr<verbs::Provider> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  absl::StatusOr<std::unique_ptr<verbs::MemoryRegion>> RegisterMemory(void* addr, size_t length,
                                                                      uint32_t access) override {
    return inner_->RegisterMemory(addr, length, access);
  }
  absl::StatusOr<std::unique_ptr<verbs::Listener>> Listen(const std::string& host,
                                                          uint16_t port) override {
    return inner_->Listen(host, port);
  }
  absl::StatusOr<verbs::Connection> Connect(const std::string& host, uint16_t port,
                                            const std::string& payload,
                                            const verbs::QueuePairOptions& options) override {
    {
      MutexLock lock(&mu_);
      sent_.push_back(payload);
    }
    return inner_->Connect(host, port, payload, options);
  }
  std::vector<std::string> sent() const {
    MutexLock lock(&mu_);
    return sent_;
  }

 private:
  std::unique_ptr<verbs::Provider> inner_;
  mutable Mutex mu_;
  std::vector<std::string> sent_ ABSL_GUARDED_BY(mu_);
};

class AuthenticationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_host_ = SoftProvider();
    client_host_ = SoftProvider();
  }

  // A server where actors and the learner have tokens of their own and
  // monitors none (so they are refused).
  std::unique_ptr<ReplayServer> StartPerRoleServer() {
    ReplayServerOptions options = SmallServerOptions();
    options.actor_token = kActorToken;
    options.learner_token = kLearnerToken;
    return StartServer(server_host_.get(), options);
  }

  absl::Status ConnectAs(const ReplayServer& server, Role role, const std::string& token,
                         uint32_t actor_id = 0) {
    return client::ClientSession::Connect(client_host_.get(),
                                          SessionOptions(server, role, actor_id, token))
        .status();
  }

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
    hello.client_nonce = *protocol::RandomNonce();
    return protocol::EncodeHello(hello, token).value();
  }

  std::unique_ptr<verbs::Provider> server_host_;
  std::unique_ptr<verbs::Provider> client_host_;
};

TEST_F(AuthenticationTest, EachRoleNeedsItsOwnTokenAndAnotherRolesTokenFails) {
  auto server = StartPerRoleServer();
  EXPECT_TRUE(ConnectAs(*server, Role::kActor, kActorToken, 1).ok());
  {
    // The learner's own token works.
    absl::StatusOr<std::unique_ptr<client::ClientSession>> learner = client::ClientSession::Connect(
        client_host_.get(), SessionOptions(*server, Role::kLearner, 0, kLearnerToken));
    EXPECT_TRUE(learner.ok()) << learner.status();
  }
  // An actor's credential cannot take the learner role, nor the reverse.
  absl::Status s;
  EXPECT_TRUE(WaitFor([&] {
    s = ConnectAs(*server, Role::kLearner, kActorToken);
    return !protocol::IsRetryableRejection(s);  // the previous learner may linger
  }));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("authentication failed"), std::string::npos) << s;
  s = ConnectAs(*server, Role::kActor, kLearnerToken, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  // Monitors have no token on this server: refused whatever they present.
  for (const std::string& token : {std::string(), std::string(kActorToken)}) {
    s = ConnectAs(*server, Role::kMonitor, token);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_NE(s.message().find("admits no monitor"), std::string::npos) << s;
  }
  // No message echoes a token.
  EXPECT_EQ(s.message().find(kActorToken), std::string::npos) << s;
}

TEST_F(AuthenticationTest, TheSharedTokenCoversEveryRoleWithoutItsOwn) {
  ReplayServerOptions options = SmallServerOptions();
  options.auth_token = "shared-token-0123456";
  options.learner_token = kLearnerToken;
  auto server = StartServer(server_host_.get(), options);
  EXPECT_TRUE(ConnectAs(*server, Role::kActor, "shared-token-0123456", 1).ok());
  EXPECT_TRUE(ConnectAs(*server, Role::kMonitor, "shared-token-0123456").ok());
  EXPECT_EQ(ConnectAs(*server, Role::kLearner, "shared-token-0123456").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(AuthenticationTest, AnActorCanClaimOnlyTheIdOfItsOwnCredential) {
  auto server = StartPerRoleServer();
  const std::string own = protocol::ActorCredential(kActorToken, 1);
  client::ClientSessionOptions o = SessionOptions(*server, Role::kActor, 1, "");
  o.insecure = false;
  o.auth_token = own;
  auto actor1 = client::ClientSession::Connect(client_host_.get(), o);
  ASSERT_TRUE(actor1.ok()) << actor1.status();
  // Actor 1's credential names actor 1 only: as actor 2 (a free id) and as
  // actor 1 again (its own id, held) it is refused, and the holder keeps
  // its lease.
  o.actor_id = 2;
  o.connect_deadline = absl::ZeroDuration();
  absl::Status s = client::ClientSession::Connect(client_host_.get(), o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("not the credential of actor 2"), std::string::npos) << s;
  EXPECT_FALSE(protocol::IsRetryableRejection(s)) << s;
  // The master token itself is no actor's credential.
  o.auth_token = kActorToken;
  s = client::ClientSession::Connect(client_host_.get(), o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  o.actor_id = 1;
  o.auth_token = own;
  s = client::ClientSession::Connect(client_host_.get(), o).status();
  EXPECT_TRUE(protocol::IsRetryableRejection(s)) << s;
  EXPECT_TRUE((*actor1)->ReadServerLine().ok());
  EXPECT_EQ(server->connections().actors, 1u);
  // Once actor 1's connection is gone, its credential takes the lease back.
  const uint32_t lease = (*actor1)->directory().lease;
  actor1->reset();
  o.connect_deadline = absl::Seconds(10);
  auto back = client::ClientSession::Connect(client_host_.get(), o);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->directory().lease, lease);
}

TEST_F(AuthenticationTest, AReplayedHelloIsRefusedBecauseItsNonceIsSpent) {
  auto server = StartPerRoleServer();
  protocol::Hello hello;
  hello.role = Role::kActor;
  hello.actor_id = 3;
  const std::string wire = SignedHello(*server, hello, protocol::ActorCredential(kActorToken, 3));
  ASSERT_TRUE(ConnectRaw(*server, wire).ok());
  // The same bytes on a new connection, as an eavesdropper would send them.
  const absl::Status s = ConnectRaw(*server, wire);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("authentication failed"), std::string::npos) << s;
  EXPECT_TRUE(WaitFor([&] { return server->connections().rejected == 1; }))
      << server->connections().rejected;  // challenges are not counted as refusals
  // A hello naming a nonce the server never issued fails the same way.
  hello.server_nonce = *protocol::RandomNonce();
  hello.grant = {0x1000, protocol::kGrantRegionBytes, 1, 0};
  EXPECT_EQ(ConnectRaw(*server, protocol::EncodeHello(hello, kActorToken).value()).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(AuthenticationTest, AHelloWithAWrongMacIsRefusedAndSpendsItsNonce) {
  auto server = StartPerRoleServer();
  protocol::Hello hello;
  hello.role = Role::kActor;
  std::string wire = SignedHello(*server, hello, "a-guess");
  EXPECT_EQ(ConnectRaw(*server, wire).code(), absl::StatusCode::kPermissionDenied);
  // The nonce is spent: the right MAC over it cannot come later.
  protocol::Hello back = protocol::DecodeHello(wire).value();
  EXPECT_EQ(ConnectRaw(*server, protocol::EncodeHello(back, kActorToken).value()).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(server->connections().actors, 0u);
}

TEST_F(AuthenticationTest, NoTokenByteCrossesTheWire) {
  auto server = StartPerRoleServer();
  RecordingProvider recorder(SoftProvider());
  absl::StatusOr<std::unique_ptr<client::ClientSession>> session = client::ClientSession::Connect(
      &recorder, SessionOptions(*server, Role::kActor, 4, kActorToken));
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<std::string> sent = recorder.sent();
  ASSERT_EQ(sent.size(), 2u);  // the challenge request, then the hello
  const std::string token = kActorToken;
  for (const std::string& payload : sent) {
    EXPECT_EQ(payload.find(token), std::string::npos);
    // Nor any 8-byte piece of it.
    for (size_t i = 0; i + 8 <= token.size(); ++i) {
      EXPECT_EQ(payload.find(token.substr(i, 8)), std::string::npos) << i;
    }
  }
}

TEST_F(AuthenticationTest, AClientRefusesAServerThatCannotProveTheToken) {
  // An impostor that answers challenges and accepts any hello with a
  // directory and no valid proof.
  auto listener = server_host_->Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<verbs::QueuePair>> qps;
  std::thread impostor([&] {
    while (!stop) {
      auto pending = (*listener)->Accept(absl::Milliseconds(20));
      if (!pending.ok()) continue;
      if (protocol::IsChallengeRequest((*pending)->payload())) {
        (*pending)->Reject(protocol::ChallengeReason(*protocol::RandomNonce()));
        continue;
      }
      protocol::RegionDirectory directory;
      directory.Set(protocol::RegionKind::kControl, protocol::WireRegion{0x1000, 4096, 1, 0});
      auto qp = (*pending)->Accept(protocol::EncodeAccept(directory, protocol::Mac{}), {});
      if (qp.ok()) qps.push_back(std::move(*qp));
    }
  });
  client::ClientSessionOptions o;
  o.host = (*listener)->host();
  o.port = (*listener)->port();
  o.role = Role::kMonitor;
  o.auth_token = "monitor-token-0123456";
  o.connect_deadline = absl::Seconds(5);
  const absl::Status s = client::ClientSession::Connect(client_host_.get(), o).status();
  stop = true;
  impostor.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("did not prove"), std::string::npos) << s;
}

}  // namespace
}  // namespace dreplay::server
