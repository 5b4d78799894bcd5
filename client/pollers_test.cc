// Copyright dreplay authors.
//
// The pollers that keep the ServerLine and the actors' lines known without
// waiting for the link.

#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "actor_client/actor_stats_publisher.h"
#include "actor_client/experience_writer.h"
#include "client/actor_lines_poller.h"
#include "client/server_line_poller.h"
#include "client/session.h"
#include "client/stats_reader.h"
#include "gtest/gtest.h"
#include "replay_server/server.h"
#include "testing/in_process_service.h"
#include "verbs/options.h"

namespace dreplay::client {
namespace {

using protocol::Role;
using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::TaggedPayload;
using testing::WaitFor;

// 50 ms each way: a READ's answer cannot come within a few milliseconds.
constexpr char kSlowLink[] = "50000:1";

class PollersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_host_ = SoftProvider();
    client_host_ = SoftProvider();
    server_ = StartServer(server_host_.get(), SmallServerOptions());
  }

  std::unique_ptr<ClientSession> Connect(Role role, uint32_t actor_id = 0, bool slow = false) {
    ClientSessionOptions o = SessionOptions(*server_, role, actor_id);
    if (slow) {
      absl::StatusOr<verbs::LinkModel> link = verbs::ParseLinkModel(kSlowLink);
      EXPECT_TRUE(link.ok()) << link.status();
      if (link.ok()) o.qp.link = *link;
    }
    auto session = ClientSession::Connect(client_host_.get(), o);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  std::unique_ptr<verbs::Provider> server_host_, client_host_;
  std::unique_ptr<server::ReplayServer> server_;
};

TEST_F(PollersTest, TheServerLineIsKnownAtOnceAndFollowsInsertsWithoutWaiting) {
  auto learner = Connect(Role::kLearner, 0, /*slow=*/true);
  auto actor = Connect(Role::kActor, 0);
  ASSERT_TRUE(learner && actor);
  auto poller = ServerLinePoller::Create(learner.get(), absl::ZeroDuration());
  ASSERT_TRUE(poller.ok()) << poller.status();
  EXPECT_EQ((*poller)->known().ingest_cursor, 0u);
  auto writer = *actor::ExperienceWriter::Create(actor.get(), {});
  for (uint64_t t = 0; t < 50; ++t) ASSERT_TRUE(writer->Append(TaggedPayload(t, 64), 1.0f).ok());
  ASSERT_TRUE(writer->Flush().ok());
  ASSERT_TRUE(WaitFor([&] { return server_->ReadStats().inserted == 50; }));
  // The first Poll posts a READ and answers what is known, at once.
  const absl::Time start = absl::Now();
  absl::StatusOr<protocol::ServerLine> line = (*poller)->Poll();
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_EQ(line->ingest_cursor, 0u);
  EXPECT_TRUE(WaitFor([&] {
    absl::StatusOr<protocol::ServerLine> l = (*poller)->Poll();
    return l.ok() && l->ingest_cursor == 50;
  }));
}

TEST_F(PollersTest, ARefusedIntervalIsAnError) {
  auto learner = Connect(Role::kLearner);
  ASSERT_NE(learner, nullptr);
  EXPECT_EQ(ServerLinePoller::Create(learner.get(), absl::Milliseconds(-1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PollersTest, ActorLinesAreKnownWithoutWaitingAndFollowWhatActorsPublish) {
  auto a2 = Connect(Role::kActor, 2);
  auto learner = Connect(Role::kLearner, 0, /*slow=*/true);
  ASSERT_TRUE(a2 && learner);
  auto publisher = *actor::ActorStatsPublisher::Create(a2.get());
  publisher->RecordStep(10);
  ASSERT_TRUE(publisher->Publish(0).ok());

  auto stats = *StatsReader::Create(learner.get());
  auto poller = ActorLinesPoller::Create(learner.get());
  ASSERT_TRUE(poller.ok()) << poller.status();
  // Seeded from a blocking read: known before any READ of its own came.
  (*poller)->Seed(*stats->ReadActors());
  publisher->RecordStep(32);
  ASSERT_TRUE(publisher->Publish(0).ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<protocol::ActorLine>> lines = (*poller)->Poll();
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(50));
  ASSERT_EQ(lines->size(), 1u);
  EXPECT_EQ((*lines)[0].actor_id, 2u);
  EXPECT_EQ((*lines)[0].env_steps, 10u);  // the READ in flight has not come back
  EXPECT_TRUE(WaitFor([&] {
    absl::StatusOr<std::vector<protocol::ActorLine>> l = (*poller)->Poll();
    return l.ok() && l->size() == 1 && (*l)[0].env_steps == 42;
  }));
  EXPECT_GE((*poller)->reads_completed(), 1u);
}

TEST_F(PollersTest, AnActorsLinesPollerStartsEmptyWithoutASeed) {
  auto learner = Connect(Role::kLearner);
  ASSERT_NE(learner, nullptr);
  auto poller = *ActorLinesPoller::Create(learner.get());
  absl::StatusOr<std::vector<protocol::ActorLine>> lines = poller->Poll();
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_TRUE(lines->empty());
}

}  // namespace
}  // namespace dreplay::client
