// Copyright dreplay authors.
//
// Monitoring without server CPU: the stats region and the actors' lines.

#include "client/stats_reader.h"

#include <memory>
#include <vector>

#include "actor_client/actor_stats_publisher.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "replay_server/server.h"
#include "testing/in_process_service.h"

namespace dreplay::client {
namespace {

using client::ClientSession;
using protocol::Role;
using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::TaggedPayload;
using testing::WaitFor;

class StatsReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_host_ = SoftProvider();
    client_host_ = SoftProvider();
    server_ = StartServer(server_host_.get(), SmallServerOptions());
  }

  std::unique_ptr<ClientSession> Connect(Role role, uint32_t actor_id = 0) {
    auto session =
        ClientSession::Connect(client_host_.get(), SessionOptions(*server_, role, actor_id));
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  std::unique_ptr<verbs::Provider> server_host_, client_host_;
  std::unique_ptr<server::ReplayServer> server_;
};

TEST_F(StatsReaderTest, AMonitorReadsAConsistentSnapshotWhileActorsInsert) {
  auto actor = Connect(Role::kActor, 0);
  auto monitor = Connect(Role::kMonitor);
  ASSERT_TRUE(actor && monitor);
  auto writer = *actor::ExperienceWriter::Create(actor.get(), {});
  auto stats = *StatsReader::Create(monitor.get());
  ASSERT_TRUE(WaitFor([&] { return server_->connections().actors == 1; }));
  uint64_t last_inserted = 0;
  for (uint64_t t = 0; t < 500; ++t) {
    ASSERT_TRUE(writer->Append(TaggedPayload(t, 64), 1.0f).ok());
    if (t % 50 == 49) {
      ASSERT_TRUE(writer->Flush().ok());
      absl::StatusOr<protocol::StatsBlock> s = stats->ReadStats();
      ASSERT_TRUE(s.ok()) << s.status();
      // A consistent snapshot: one generation, counters that add up.
      EXPECT_EQ(s->generation_begin, s->generation_end);
      EXPECT_GE(s->inserted, last_inserted);
      EXPECT_EQ(s->inserted + s->overrun_slots + s->torn_slots, s->ingest_cursor);
      EXPECT_LE(s->size, s->capacity);
      EXPECT_EQ(s->actors_connected, 1u);
      last_inserted = s->inserted;
    }
  }
  ASSERT_TRUE(WaitFor([&] { return stats->ReadStats()->inserted == 500; }));
}

// Since layout 14 the learner READs the stats region (its summary's
// crossing percentile); an actor still may not.
TEST_F(StatsReaderTest, ALearnerReadsTheStatsRegionAnActorMayNot) {
  auto learner = Connect(Role::kLearner);
  ASSERT_NE(learner, nullptr);
  auto stats = *StatsReader::Create(learner.get());
  absl::StatusOr<protocol::StatsBlock> s = stats->ReadStats();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(s->capacity, 0u);
  EXPECT_EQ(s->generation_begin, s->generation_end);
  absl::StatusOr<std::vector<protocol::ActorLine>> actors = stats->ReadActors();
  ASSERT_TRUE(actors.ok()) << actors.status();
  EXPECT_TRUE(actors->empty());
  auto actor = Connect(Role::kActor, 2);
  ASSERT_NE(actor, nullptr);
  auto actor_stats = *StatsReader::Create(actor.get());
  EXPECT_EQ(actor_stats->ReadStats().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StatsReaderTest, ActorsPublishTheirOwnLinesForTheLearnerAndMonitors) {
  auto a3 = Connect(Role::kActor, 3);
  auto a5 = Connect(Role::kActor, 5);
  ASSERT_TRUE(a3 && a5);
  auto p3 = *actor::ActorStatsPublisher::Create(a3.get(), /*window=*/2);
  auto p5 = *actor::ActorStatsPublisher::Create(a5.get());
  p3->RecordStep(100);
  p3->RecordEpisode(10.0);
  p3->RecordEpisode(20.0);
  p3->RecordEpisode(40.0);  // the window keeps the last two
  ASSERT_TRUE(p3->Publish(77).ok());
  p5->RecordStep(7);
  ASSERT_TRUE(p5->Publish(0).ok());

  for (Role role : {Role::kLearner, Role::kMonitor}) {
    auto reader_session = Connect(role);
    ASSERT_NE(reader_session, nullptr);
    auto stats = *StatsReader::Create(reader_session.get());
    absl::StatusOr<std::vector<protocol::ActorLine>> lines = stats->ReadActors();
    ASSERT_TRUE(lines.ok()) << lines.status();
    ASSERT_EQ(lines->size(), 2u);
    const protocol::ActorLine& l3 = (*lines)[0];
    EXPECT_EQ(l3.actor_id, 3u);
    EXPECT_EQ(l3.env_steps, 100u);
    EXPECT_EQ(l3.episodes, 3u);
    EXPECT_EQ(l3.returns_count, 2u);
    EXPECT_DOUBLE_EQ(l3.returns_sum, 60.0);
    EXPECT_DOUBLE_EQ(l3.last_return, 40.0);
    EXPECT_EQ(l3.transitions, 77u);
    EXPECT_GT(l3.updated_ns, 0u);
    EXPECT_EQ((*lines)[1].actor_id, 5u);
    EXPECT_EQ((*lines)[1].env_steps, 7u);
  }
}

TEST_F(StatsReaderTest, AnActorsKeyCoversItsOwnLineOnly) {
  auto a1 = Connect(Role::kActor, 1);
  ASSERT_NE(a1, nullptr);
  const verbs::RemoteRegion own = *a1->Region(protocol::RegionKind::kActors);
  EXPECT_EQ(own.length, sizeof(protocol::ActorLine));
  // WRITE into the neighbour's line with this key: refused by the "NIC".
  auto buffer = *client::RegisteredBuffer::Create(client_host_.get(), 64);
  const int sink = *a1->AddSink();
  verbs::WorkRequest wr;
  wr.wr_id = ClientSession::WrId(sink, 1);
  wr.opcode = verbs::Opcode::kWrite;
  wr.local = buffer->mr();
  wr.local_addr = buffer->data();
  wr.length = sizeof(protocol::ActorLine);
  wr.remote_addr = own.addr + sizeof(protocol::ActorLine);
  wr.rkey = own.rkey;
  ASSERT_TRUE(a1->Post(absl::MakeConstSpan(&wr, 1)).ok());
  verbs::Completion completion;
  ASSERT_TRUE(WaitFor([&] { return a1->Poll(sink, absl::MakeSpan(&completion, 1)) == 1; }));
  EXPECT_EQ(completion.status, verbs::WcStatus::kRemoteAccessError);
}

TEST_F(StatsReaderTest, WithoutAnActorsRegionThePublisherExplainsWhy) {
  server::ReplayServerOptions options = SmallServerOptions();
  options.layout.max_actors = 0;
  auto server = StartServer(server_host_.get(), options);
  auto actor =
      *ClientSession::Connect(client_host_.get(), SessionOptions(*server, Role::kActor, 42));
  const absl::Status s = actor::ActorStatsPublisher::Create(actor.get()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("max_actors=0"), std::string::npos) << s;
}

}  // namespace
}  // namespace dreplay::client
