// Copyright dreplay authors.
//
// The round trip: actors write, the server ingests and stages, the learner
// READs batches and writes priorities back.

#include "learner_client/batch_reader.h"

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "learner_client/priority_writer.h"
#include "replay_server/server.h"
#include "testing/in_process_service.h"

namespace dreplay::learner {
namespace {

using client::ClientSession;
using protocol::Role;
using server::ReplayServer;
using server::ReplayServerOptions;
using testing::PayloadTag;
using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::TaggedPayload;
using testing::WaitFor;

constexpr uint32_t kPayloadBytes = 100;
constexpr absl::Duration kBatchTimeout = absl::Seconds(10);

class BatchReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_host_ = SoftProvider();
    actor_host_ = SoftProvider();
    learner_host_ = SoftProvider();
  }

  // Inserts transitions tagged first .. first+count-1 through one actor.
  void InsertThroughActor(const ReplayServer& server, uint64_t first, uint64_t count) {
    auto session =
        *ClientSession::Connect(actor_host_.get(), SessionOptions(server, Role::kActor, 0));
    auto writer = *actor::ExperienceWriter::Create(session.get(), {});
    for (uint64_t t = first; t < first + count; ++t) {
      ASSERT_TRUE(writer->Append(TaggedPayload(t, kPayloadBytes), 0.5f + t % 5).ok());
    }
    ASSERT_TRUE(writer->Flush().ok());
  }

  std::unique_ptr<ClientSession> ConnectLearner(const ReplayServer& server,
                                                const verbs::FaultOptions& faults = {}) {
    client::ClientSessionOptions o = SessionOptions(server, Role::kLearner);
    o.qp.faults = faults;
    auto session = ClientSession::Connect(learner_host_.get(), o);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  // Checks that every entry of `batch` is a valid transition with a tag
  // below `inserted`.
  static void ExpectValid(const StagedBatch& batch, uint64_t inserted) {
    ASSERT_GT(batch.size(), 0u);
    for (uint32_t i = 0; i < batch.size(); ++i) {
      const protocol::BatchEntry& e = batch.entry(i);
      EXPECT_EQ(batch.slot_header(i).sequence, e.slot_sequence);
      EXPECT_LT(e.slot_sequence, inserted);
      EXPECT_GT(e.weight, 0.0f);
      EXPECT_LE(e.weight, 1.0f);
      const absl::Span<const uint8_t> p = batch.payload(i);
      ASSERT_EQ(p.size(), kPayloadBytes);
      EXPECT_LT(PayloadTag(p.data(), kPayloadBytes), inserted) << "payload corrupted";
    }
  }

  std::unique_ptr<verbs::Provider> server_host_;
  std::unique_ptr<verbs::Provider> actor_host_;
  std::unique_ptr<verbs::Provider> learner_host_;
};

TEST_F(BatchReaderTest, RoundTripReturnsValidBatchesInOrderAndAppliesPriorities) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  constexpr uint64_t kInserted = 200;
  InsertThroughActor(*server, 0, kInserted);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == kInserted; }));

  auto session = ConnectLearner(*server);
  ASSERT_NE(session, nullptr);
  auto reader = *BatchReader::Create(session.get(), {});
  auto priorities = *PriorityWriter::Create(session.get());
  EXPECT_EQ(reader->depth(), server->config().staging_depth);
  constexpr uint64_t kBatches = 40;
  uint64_t records = 0;
  for (uint64_t n = 0; n < kBatches; ++n) {
    absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
    ASSERT_TRUE(batch.ok()) << batch.status();
    EXPECT_EQ(batch->batch_number(), n);
    EXPECT_EQ(batch->epoch(), 1u);
    EXPECT_EQ(batch->size(), server->config().batch_size);
    ExpectValid(*batch, kInserted);
    std::vector<float> td(batch->size());
    for (uint32_t i = 0; i < batch->size(); ++i) td[i] = 0.01f * (i + 1);
    ASSERT_TRUE(priorities->Write(*batch, td).ok());
    records += batch->size();
  }
  ASSERT_TRUE(priorities->Flush().ok());
  EXPECT_EQ(priorities->stats().updates, kBatches);
  // Every update reaches the server and is applied (no slot was reused).
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().batches_released == kBatches; }))
      << server->ReadStats().batches_released;
  const protocol::StatsBlock stats = server->ReadStats();
  EXPECT_EQ(stats.priority_updates_applied, records);
  EXPECT_EQ(stats.mailbox_rejects, 0u);
  EXPECT_EQ(stats.inserted, kInserted);  // nothing ingested twice
  EXPECT_EQ(reader->stats().batches, kBatches);
  EXPECT_EQ(reader->stats().bad_slots, 0u);
  EXPECT_GE(reader->stats().bytes_read, kBatches * protocol::StagingSlotStride(server->config()));
}

TEST_F(BatchReaderTest, WaitsForBatchesThatAreNotStagedYet) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto session = ConnectLearner(*server);
  ASSERT_NE(session, nullptr);
  auto reader = *BatchReader::Create(session.get(), {});
  // Nothing inserted: nothing can be staged.
  const absl::Status s = reader->Next(absl::Milliseconds(50)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_GT(reader->stats().not_staged, 0u);
  // Actors arrive; the same reader then gets batch 0.
  std::thread actor([&] { InsertThroughActor(*server, 0, 50); });
  absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
  actor.join();
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->batch_number(), 0u);
  ExpectValid(*batch, 50);
}

TEST_F(BatchReaderTest, RecoversFromDroppedConnectionsAndAnswersEveryBatch) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  InsertThroughActor(*server, 0, 150);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == 150; }));
  verbs::FaultOptions faults;
  faults.drop_after_ops = 25;  // every connection of the learner dies after 25 requests
  auto session = ConnectLearner(*server, faults);
  ASSERT_NE(session, nullptr);
  auto reader = *BatchReader::Create(session.get(), {});
  auto priorities = *PriorityWriter::Create(session.get());
  uint64_t expected = 0;
  for (int i = 0; i < 30; ++i) {
    absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
    ASSERT_TRUE(batch.ok()) << batch.status();
    // In order, except that after a reconnection the reader may go back to
    // batches whose update was lost.
    EXPECT_LE(batch->batch_number(), expected);
    expected = batch->batch_number() + 1;
    ExpectValid(*batch, 150);
    std::vector<float> td(batch->size(), 0.3f);
    ASSERT_TRUE(priorities->Write(*batch, td).ok());
  }
  EXPECT_GE(session->generation(), 2u);
  EXPECT_GE(reader->stats().resyncs, 2u);
  // The server never saw a bad update, and no batch was skipped.
  EXPECT_EQ(server->ReadStats().mailbox_rejects, 0u);
  EXPECT_EQ(server->ReadStats().updates_timed_out, 0u);
}

TEST_F(BatchReaderTest, ResynchronisesWithANewEpochAfterARestart) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/reader_restart";
  std::filesystem::remove_all(dir);
  ReplayServerOptions options = SmallServerOptions();
  options.checkpoint_dir = dir;
  auto server = StartServer(server_host_.get(), options);
  InsertThroughActor(*server, 0, 100);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == 100; }));
  auto session = ConnectLearner(*server);
  ASSERT_NE(session, nullptr);
  auto reader = *BatchReader::Create(session.get(), {});
  auto priorities = *PriorityWriter::Create(session.get());
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(priorities->Write(*batch, std::vector<float>(batch->size(), 1.0f)).ok());
  }
  ASSERT_TRUE(server->Stop().ok());
  options.port = server->port();
  server.reset();
  server = StartServer(server_host_.get(), options);

  absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->epoch(), 2u);
  EXPECT_EQ(batch->batch_number(), 0u);  // numbers restart in every epoch
  EXPECT_EQ(reader->stats().epoch_changes, 1u);
  ExpectValid(*batch, 100);
}

}  // namespace
}  // namespace dreplay::learner
