// Copyright dreplay authors.
//
// The round trip: actors write, the server ingests and stages, the learner
// READs batches and writes priorities back.

#include "learner_client/batch_reader.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "learner_client/param_publisher.h"
#include "learner_client/priority_writer.h"
#include "protocol/handshake.h"
#include "protocol/key_grant.h"
#include "replay_server/regions.h"
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
      EXPECT_GT(e.priority_alpha, 0.0f);
      EXPECT_GT(batch.weight(i), 0.0f);
      EXPECT_LE(batch.weight(i), 1.0f);
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
  ReplayServerOptions one_lease = SmallServerOptions();
  one_lease.layout.leases = 1;  // the one actor has the whole ring
  auto server = StartServer(server_host_.get(), one_lease);
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
  // Each batch READ is its used bytes, after at least one commit line READ.
  EXPECT_GE(reader->stats().bytes_read,
            kBatches * (protocol::StagingUsedBytes(server->config(), server->config().batch_size) +
                        sizeof(protocol::CommitLine)));
}

TEST_F(BatchReaderTest, AnUpdateIsReadyOnlyOnceTheBufferItReusesIsWritten) {
  ReplayServerOptions one_lease = SmallServerOptions();
  one_lease.layout.leases = 1;
  auto server = StartServer(server_host_.get(), one_lease);
  InsertThroughActor(*server, 0, 200);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == 200; }));
  client::ClientSessionOptions o = SessionOptions(*server, Role::kLearner);
  absl::StatusOr<verbs::LinkModel> link = verbs::ParseLinkModel("50000:1");  // 50 ms each way
  ASSERT_TRUE(link.ok()) << link.status();
  o.qp.link = *link;
  auto session = ClientSession::Connect(learner_host_.get(), o);
  ASSERT_TRUE(session.ok()) << session.status();
  auto reader = *BatchReader::Create(session->get(), {});
  auto priorities = *PriorityWriter::Create(session->get());
  const uint64_t depth = server->config().staging_depth;
  absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
  ASSERT_TRUE(batch.ok()) << batch.status();
  const uint64_t n = batch->batch_number();
  absl::StatusOr<bool> ready = priorities->Ready(n);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(*ready);
  ASSERT_TRUE(priorities->Write(*batch, std::vector<float>(batch->size(), 0.5f)).ok());
  // Batch n + depth reuses n's buffer: not before n's WRITE completes, a
  // round trip (100 ms) later. The other buffers are free.
  ready = priorities->Ready(n + depth);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_FALSE(*ready);
  ready = priorities->Ready(n + 1);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(*ready);
  EXPECT_TRUE(WaitFor([&] {
    absl::StatusOr<bool> r = priorities->Ready(n + depth);
    return r.ok() && *r;
  }));
}

// A writer dropped right after its WRITE (as a Python temporary is) must not
// take the connection with it: its memory goes only once the WRITE is done.
TEST_F(BatchReaderTest, AWriterDestroyedAfterItsWriteLeavesTheConnectionWorking) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  InsertThroughActor(*server, 0, 200);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == 200; }));
  client::ClientSessionOptions o = SessionOptions(*server, Role::kLearner);
  absl::StatusOr<verbs::LinkModel> link = verbs::ParseLinkModel("20000:1");  // 20 ms each way
  ASSERT_TRUE(link.ok()) << link.status();
  o.qp.link = *link;
  auto session = ClientSession::Connect(learner_host_.get(), o);
  ASSERT_TRUE(session.ok()) << session.status();
  auto reader = *BatchReader::Create(session->get(), {});
  absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
  ASSERT_TRUE(batch.ok()) << batch.status();
  {
    auto priorities = *PriorityWriter::Create(session->get());
    ASSERT_TRUE(priorities->Write(*batch, std::vector<float>(batch->size(), 0.5f)).ok());
  }
  EXPECT_EQ((*session)->qp()->state(), verbs::QpState::kReady) << (*session)->qp()->error();
  absl::StatusOr<StagedBatch> next = reader->Next(kBatchTimeout);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->batch_number(), batch->batch_number() + 1);
  EXPECT_EQ((*session)->generation(), 1u);
  // The update arrived: each record applied (or stale, where the batch
  // sampled one entry twice).
  EXPECT_TRUE(WaitFor([&] {
    const protocol::StatsBlock stats = server->ReadStats();
    return stats.priority_updates_applied + stats.priority_updates_stale == batch->size();
  }));
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

// A staging slot whose commit line gives sizes no batch can have (the
// server's memory corrupt, or not a dreplay server of this layout; no torn
// READ makes one): the reader gives up with DataLoss after a few READs
// instead of waiting for its timeout and saying "not staged".
TEST_F(BatchReaderTest, ACommitLineWithImpossibleSizesFailsWithDataLoss) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto session = ConnectLearner(*server);
  ASSERT_NE(session, nullptr);
  auto reader = *BatchReader::Create(session.get(), {});
  // Nothing is inserted, so the server stages nothing; the test writes
  // batch 0's commit line itself (the server runs in this process, so the
  // region's address is its memory).
  const absl::StatusOr<verbs::RemoteRegion> staging =
      session->Region(protocol::RegionKind::kStaging);
  ASSERT_TRUE(staging.ok()) << staging.status();
  const protocol::LayoutConfig& c = session->config();
  protocol::CommitLine line{};
  line.commit = protocol::BatchCommitValue(0);
  line.used_bytes = protocol::StagingUsedBytes(c, 1);
  line.entry_bytes = sizeof(protocol::BatchEntry) + 3;
  std::memcpy(reinterpret_cast<void*>(staging->addr + protocol::StagingSlotOffset(c, 0) +
                                      protocol::StagingCommitOffset(c)),
              &line, sizeof(line));
  const absl::Status s = reader->Next(kBatchTimeout).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("no batch of this layout"), std::string::npos) << s;
  EXPECT_GE(reader->stats().torn, 3u);
}

TEST_F(BatchReaderTest, SkipsBatchesTheServerReleasedWhileTheLearnerWasPaused) {
  ReplayServerOptions options = SmallServerOptions();
  options.core.update_timeout = absl::Milliseconds(100);
  auto server = StartServer(server_host_.get(), options);
  auto session = ConnectLearner(*server);
  ASSERT_NE(session, nullptr);
  // The reader's first commit line READs find nothing staged.
  auto reader = *BatchReader::Create(session.get(), {});
  const uint64_t depth = server->config().staging_depth;
  InsertThroughActor(*server, 0, 200);
  // The learner is paused: unanswered batches time out and later batches
  // take their staging slots.
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().batches_released >= 2 * depth; }));

  absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_GE(batch->batch_number(), 2 * depth);
  EXPECT_GE(reader->stats().superseded, 2 * depth);
  EXPECT_GE(reader->stats().resyncs, 2u);
  ExpectValid(*batch, 200);
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

TEST_F(BatchReaderTest, AFailedReconnectionIsAConnectionFailureAndIsTriedAgain) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/reader_reconnect";
  std::filesystem::remove_all(dir);
  ReplayServerOptions options = SmallServerOptions();
  options.checkpoint_dir = dir;
  auto server = StartServer(server_host_.get(), options);
  InsertThroughActor(*server, 0, 100);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == 100; }));
  client::ClientSessionOptions o = SessionOptions(*server, Role::kLearner);
  o.connect_deadline = absl::Milliseconds(300);
  auto session = *ClientSession::Connect(learner_host_.get(), o);
  auto reader = *BatchReader::Create(session.get(), {});
  auto priorities = *PriorityWriter::Create(session.get());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(priorities->Write(*batch, std::vector<float>(batch->size(), 1.0f)).ok());
  }
  ASSERT_TRUE(server->Stop().ok());
  options.port = server->port();
  server.reset();
  // Gone, and its port taken by a socket that accepts and never answers,
  // so that each attempt to reconnect runs out of time: every call says
  // the connection failed (never "not staged in time", which a caller
  // waits out), however short its timeout, and tries again.
  const int mute = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(mute, 0);
  const int one = 1;
  setsockopt(mute, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(options.port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(mute, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  ASSERT_EQ(listen(mute, 16), 0);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<StagedBatch> batch = reader->Next(absl::ZeroDuration());
    EXPECT_TRUE(client::IsConnectionFailure(batch.status())) << batch.status();
    EXPECT_FALSE(absl::IsDeadlineExceeded(batch.status())) << batch.status();
  }
  close(mute);
  // Back: the next call reconnects and reads on.
  server = StartServer(server_host_.get(), options);
  absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->epoch(), 2u);
  ExpectValid(*batch, 100);
}

TEST_F(BatchReaderTest, ResynchronisesWhenARestartedServerRunsTheSameEpochNumberAgain) {
  // Without checkpoints every start is epoch 1; only the incarnation tells
  // the new server from the old one.
  ReplayServerOptions options = SmallServerOptions();
  auto server = StartServer(server_host_.get(), options);
  InsertThroughActor(*server, 0, 100);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == 100; }));
  auto session = ConnectLearner(*server);
  ASSERT_NE(session, nullptr);
  auto reader = *BatchReader::Create(session.get(), {});
  auto priorities = *PriorityWriter::Create(session.get());
  uint64_t first_incarnation = 0;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
    ASSERT_TRUE(batch.ok()) << batch.status();
    first_incarnation = batch->incarnation();
    ASSERT_TRUE(priorities->Write(*batch, std::vector<float>(batch->size(), 1.0f)).ok());
  }
  ASSERT_NE(first_incarnation, 0u);
  ASSERT_TRUE(server->Stop().ok());
  options.port = server->port();
  server.reset();
  server = StartServer(server_host_.get(), options);
  InsertThroughActor(*server, 0, 100);

  absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->epoch(), 1u);
  EXPECT_NE(batch->incarnation(), first_incarnation);
  EXPECT_EQ(batch->batch_number(), 0u);
  EXPECT_EQ(reader->stats().epoch_changes, 1u);
  EXPECT_EQ(reader->stats().redelivered, 0u) << "the old server's batches are not owed";
  // The update echoes the new incarnation, so the new server applies it.
  ASSERT_TRUE(priorities->Write(*batch, std::vector<float>(batch->size(), 1.0f)).ok());
  ASSERT_TRUE(priorities->Flush().ok());
  EXPECT_TRUE(WaitFor([&] { return server->ReadStats().batches_released >= 1; }));
  EXPECT_EQ(server->ReadStats().mailbox_rejects, 0u);
}

// A server with larger transitions and batches, so that a batch outweighs
// the READs that ask for it.
ReplayServerOptions SteadyServerOptions() {
  ReplayServerOptions o = SmallServerOptions();
  o.layout.slot_size = protocol::SlotSizeFor(1024);
  o.layout.batch_size = 32;
  // The one actor has the whole ring: its 200 transitions never lap a
  // lease, so no slot is rewritten under the sampler and batches are full.
  o.layout.leases = 1;
  return o;
}

TEST_F(BatchReaderTest, ReadsOnlyTheUsedBytesAndPollsWithCommitLines) {
  auto server = StartServer(server_host_.get(), SteadyServerOptions());
  const protocol::LayoutConfig& config = server->config();
  constexpr uint64_t kInserted = 200;
  {
    auto session =
        *ClientSession::Connect(actor_host_.get(), SessionOptions(*server, Role::kActor, 0));
    auto writer = *actor::ExperienceWriter::Create(session.get(), {});
    for (uint64_t t = 0; t < kInserted; ++t) {
      ASSERT_TRUE(writer->Append(TaggedPayload(t, 1024), 1.0f).ok());
    }
    ASSERT_TRUE(writer->Flush().ok());
  }
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == kInserted; }));
  auto session = ConnectLearner(*server);
  ASSERT_NE(session, nullptr);
  auto reader = *BatchReader::Create(session.get(), {});
  auto priorities = *PriorityWriter::Create(session.get());
  constexpr uint64_t kBatches = 60;
  for (uint64_t n = 0; n < kBatches; ++n) {
    absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_EQ(batch->size(), config.batch_size);
    for (uint32_t i = 0; i < batch->size(); ++i) EXPECT_TRUE(batch->arrived(i));
    ASSERT_TRUE(priorities->Write(*batch, std::vector<float>(batch->size(), 0.5f)).ok());
  }
  ASSERT_TRUE(priorities->Flush().ok());
  const BatchReaderStats& stats = reader->stats();
  const client::LinkBytes& link = session->link_bytes();
  // The reader's READs are its three classes, and nothing else is. The
  // session counts a READ when it is posted, the reader when it completes:
  // the READs still in flight (at most depth, each at most a staging slot)
  // are the only difference.
  const uint64_t posted = link.polling + link.metadata + link.experience;
  EXPECT_GE(posted, stats.bytes_read);
  EXPECT_LE(posted - stats.bytes_read,
            uint64_t{reader->depth()} * protocol::StagingSlotStride(config));
  EXPECT_GE(stats.polls, kBatches);
  // Never a whole staging slot: the copied slots, and the header and
  // entries, of the batches READ (those returned and those in flight).
  const uint64_t read_at_most = kBatches + reader->depth() + stats.torn + stats.not_staged;
  EXPECT_EQ(stats.transitions_fetched, kBatches * config.batch_size);
  EXPECT_GE(link.experience, stats.transitions_fetched * config.slot_size);
  EXPECT_LE(link.experience, read_at_most * config.batch_size * config.slot_size);
  EXPECT_LE(link.metadata, read_at_most * protocol::StagingPayloadsOffset(config));
  EXPECT_GT(stats.distinct_transitions_fetched, 0u);
  EXPECT_LE(stats.distinct_transitions_fetched, kInserted);
  EXPECT_EQ(link.priorities, kBatches * (protocol::MailboxRecordsOffset(config) +
                                         config.batch_size * sizeof(protocol::PriorityRecord) +
                                         sizeof(protocol::CommitLine)));
  // Polling is a small part of the link.
  EXPECT_LT(link.polling * 20, link.total()) << link.polling << " of " << link.total();
}

// Every class a learner uses, and the server's heartbeats, add up to its
// queue pair's count.
TEST_F(BatchReaderTest, LinkClassesAddUpToTheQueuePairsCount) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  InsertThroughActor(*server, 0, 100);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == 100; }));
  auto session = ConnectLearner(*server);
  ASSERT_NE(session, nullptr);
  auto reader = *BatchReader::Create(session.get(), {});
  auto priorities = *PriorityWriter::Create(session.get());
  auto params = *ParamPublisher::Create(session.get());
  const std::vector<uint8_t> weights(1000, 7);
  for (int n = 0; n < 20; ++n) {
    absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(priorities->Write(*batch, std::vector<float>(batch->size(), 1.0f)).ok());
    if (n % 5 == 0) {
      ASSERT_TRUE(params->Publish(weights).ok());
    }
  }
  ASSERT_TRUE(priorities->Flush().ok());
  ASSERT_TRUE(WaitFor([&] { return session->last_heartbeat() != 0; }));
  client::LinkBytes bytes;
  verbs::QueuePairTraffic traffic;
  ASSERT_TRUE(WaitFor([&] {  // a heartbeat may land between two reads
    traffic = session->traffic();
    bytes = session->link_bytes();
    return session->traffic() == traffic;
  }));
  EXPECT_GT(bytes.experience, 0u);
  EXPECT_GT(bytes.metadata, 0u);
  EXPECT_GT(bytes.polling, 0u);
  EXPECT_GT(bytes.priorities, 0u);
  EXPECT_GT(bytes.params, weights.size());
  EXPECT_GE(traffic.peer_in, protocol::kHeartbeatBytes);
  EXPECT_EQ(bytes.total(), traffic.total() + session->handshake_bytes());
  // The session's own READs: the control block at connect, and the
  // ServerLine the reader starts from.
  EXPECT_EQ(bytes.total() - bytes.control,
            traffic.initiated() - sizeof(protocol::ControlBlock) - sizeof(protocol::ServerLine));
}

}  // namespace
}  // namespace dreplay::learner
