// Copyright dreplay authors.
//
// The actor loop's connections, against an in-process replay server: what
// the loop hands them reaches the server, the learner's parameters reach
// the actor's network, and a server that goes away for a while is waited
// for.

#include "actor_client/service_io.h"

#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "client/session.h"
#include "client/stats_reader.h"
#include "gtest/gtest.h"
#include "learner_client/param_publisher.h"
#include "replay_server/server.h"
#include "rl/params_format.h"
#include "rl/qnet.h"
#include "testing/in_process_service.h"

namespace dreplay::actor {
namespace {

using client::ClientSession;
using protocol::Role;
using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::TaggedPayload;

constexpr uint32_t kActorId = 2;
constexpr uint32_t kPayloadBytes = 128;  // SmallServerOptions' slots hold 128
// How long the server stays away in the test that waits for it.
constexpr absl::Duration kServerAway = absl::Milliseconds(300);

std::unique_ptr<rl::QNetwork> Network(std::vector<int> hidden, uint64_t seed) {
  rl::QNetworkOptions options;
  options.observation_size = 4;
  options.action_count = 2;
  options.hidden_sizes = std::move(hidden);
  absl::StatusOr<std::unique_ptr<rl::QNetwork>> q = rl::QNetwork::Create(options, seed);
  EXPECT_TRUE(q.ok()) << q.status();
  return q.ok() ? std::move(*q) : nullptr;
}

class ActorServiceIoTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = StartServer(server_host_.get(), options_); }

  std::unique_ptr<ClientSession> Connect(Role role, uint32_t actor_id = 0) {
    auto session =
        ClientSession::Connect(client_host_.get(), SessionOptions(*server_, role, actor_id));
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  std::unique_ptr<ActorServiceIo> Io(ClientSession* session) {
    ActorServiceIoOptions options;
    options.writer.max_batch = 8;
    options.retry.reconnect_timeout = testing::kTestTimeout;
    options.retry.backoff_initial = absl::Milliseconds(5);
    options.retry.backoff_max = absl::Milliseconds(50);
    options.network_description = "--hidden=8";
    auto io = ActorServiceIo::Create(session, options);
    EXPECT_TRUE(io.ok()) << io.status();
    return io.ok() ? std::move(*io) : nullptr;
  }

  // Publishes `network` as the learner does.
  void PublishAsLearner(const rl::QNetwork& network) {
    std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
    auto publisher = learner::ParamPublisher::Create(learner.get());
    ASSERT_TRUE(publisher.ok()) << publisher.status();
    std::vector<uint8_t> buffer(network.SerializedSize());
    ASSERT_TRUE(network.Serialize(1, absl::MakeSpan(buffer)).ok());
    ASSERT_TRUE((*publisher)->Publish(buffer).ok());
  }

  std::unique_ptr<verbs::Provider> server_host_ = SoftProvider();
  std::unique_ptr<verbs::Provider> client_host_ = SoftProvider();
  server::ReplayServerOptions options_ = SmallServerOptions();
  std::unique_ptr<server::ReplayServer> server_;
};

TEST_F(ActorServiceIoTest, AppendedTransitionsAreCommittedByFlush) {
  std::unique_ptr<ClientSession> session = Connect(Role::kActor, kActorId);
  std::unique_ptr<ActorServiceIo> io = Io(session.get());
  ActorIo loop_io = io->io();
  for (uint64_t t = 0; t < 5; ++t) {
    ASSERT_TRUE(loop_io.experience->Append(TaggedPayload(t, kPayloadBytes), 1.0f).ok());
  }
  ASSERT_TRUE(loop_io.experience->Flush().ok());
  EXPECT_EQ(loop_io.experience->committed(), 5u);
  EXPECT_EQ(io->writer().stats().committed, 5u);
}

TEST_F(ActorServiceIoTest, RefreshLoadsTheLearnersParametersOnce) {
  const std::unique_ptr<rl::QNetwork> learners = Network({8}, 1);
  PublishAsLearner(*learners);
  std::unique_ptr<ClientSession> session = Connect(Role::kActor, kActorId);
  std::unique_ptr<ActorServiceIo> io = Io(session.get());
  const std::unique_ptr<rl::QNetwork> actors = Network({8}, 2);
  ASSERT_NE(actors->GetParameters(), learners->GetParameters());
  absl::StatusOr<bool> fresh = io->io().params->Refresh(actors.get());
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE(*fresh);
  EXPECT_EQ(actors->GetParameters(), learners->GetParameters());
  EXPECT_EQ(io->version(), 1u);
  fresh = io->Refresh(actors.get());
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(*fresh);
}

TEST_F(ActorServiceIoTest, RefreshKeepsTheLastGoodParametersWhenNewOnesAreNotFinite) {
  const std::unique_ptr<rl::QNetwork> learners = Network({8}, 1);
  PublishAsLearner(*learners);
  std::unique_ptr<ClientSession> session = Connect(Role::kActor, kActorId);
  std::unique_ptr<ActorServiceIo> io = Io(session.get());
  const std::unique_ptr<rl::QNetwork> actors = Network({8}, 2);
  ASSERT_TRUE(*io->Refresh(actors.get()));
  const std::vector<float> good = actors->GetParameters();
  // Version 2 carries a NaN.
  {
    std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
    auto publisher = learner::ParamPublisher::Create(learner.get());
    ASSERT_TRUE(publisher.ok()) << publisher.status();
    std::vector<uint8_t> buffer(learners->SerializedSize());
    ASSERT_TRUE(learners->Serialize(2, absl::MakeSpan(buffer)).ok());
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(buffer.data() + sizeof(rl::ParamsHeader) + 3 * sizeof(float), &nan, sizeof(nan));
    ASSERT_EQ(*(*publisher)->Publish(buffer), 2u);
  }
  absl::StatusOr<bool> fresh = io->Refresh(actors.get());
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(*fresh);
  EXPECT_EQ(actors->GetParameters(), good);
  EXPECT_EQ(io->params_refused(), 1u);
  // The same version is not fetched again; the next good one is loaded.
  EXPECT_FALSE(*io->Refresh(actors.get()));
  EXPECT_EQ(io->params_refused(), 1u);
  PublishAsLearner(*Network({8}, 3));
  EXPECT_TRUE(*io->Refresh(actors.get()));
  EXPECT_EQ(actors->GetParameters(), Network({8}, 3)->GetParameters());
}

TEST_F(ActorServiceIoTest, RefreshRefusesAnotherArchitectureAndNamesTheNetwork) {
  PublishAsLearner(*Network({16}, 1));
  std::unique_ptr<ClientSession> session = Connect(Role::kActor, kActorId);
  std::unique_ptr<ActorServiceIo> io = Io(session.get());
  const absl::Status s = io->Refresh(Network({8}, 1).get()).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("(--hidden=8)"), std::string::npos) << s;
}

TEST_F(ActorServiceIoTest, PublishWritesTheActorsLine) {
  std::unique_ptr<ClientSession> session = Connect(Role::kActor, kActorId);
  std::unique_ptr<ActorServiceIo> io = Io(session.get());
  EpisodeStatsSink* stats = io->io().stats;
  stats->RecordSteps(100);
  stats->RecordEpisode(5.0);
  ASSERT_TRUE(stats->Publish(7).ok());

  std::unique_ptr<ClientSession> learner = Connect(Role::kLearner);
  auto reader = client::StatsReader::Create(learner.get());
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::vector<protocol::ActorLine>> lines = (*reader)->ReadActors();
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->size(), 1u);
  EXPECT_EQ((*lines)[0].actor_id, kActorId);
  EXPECT_EQ((*lines)[0].env_steps, 100u);
  EXPECT_EQ((*lines)[0].episodes, 1u);
  EXPECT_EQ((*lines)[0].transitions, 7u);
}

TEST_F(ActorServiceIoTest, FlushWaitsForAServerThatIsAwayForAWhile) {
  client::ClientSessionOptions session_options = SessionOptions(*server_, Role::kActor, kActorId);
  // Shorter than the time the server is away: the writer's own reconnection
  // gives up, and the retry has to wait.
  session_options.connect_deadline = absl::Milliseconds(50);
  auto session = ClientSession::Connect(client_host_.get(), session_options);
  ASSERT_TRUE(session.ok()) << session.status();
  std::unique_ptr<ActorServiceIo> io = Io(session->get());
  ASSERT_TRUE(io->Append(TaggedPayload(0, kPayloadBytes), 1.0f).ok());
  ASSERT_TRUE(io->Flush().ok());

  options_.port = server_->port();
  server_.reset();
  std::thread restarter([&] {
    absl::SleepFor(kServerAway);
    server_ = StartServer(server_host_.get(), options_);
  });
  const absl::Status appended = io->Append(TaggedPayload(1, kPayloadBytes), 1.0f);
  const absl::Status flushed = io->Flush();
  restarter.join();
  ASSERT_TRUE(appended.ok()) << appended;
  ASSERT_TRUE(flushed.ok()) << flushed;
  EXPECT_EQ(io->committed(), 2u);
  EXPECT_GE(io->writer().stats().reconnects, 1u);
}

}  // namespace
}  // namespace dreplay::actor
