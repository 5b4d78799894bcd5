// Copyright dreplay authors.
//
// The round trip: actors write, the server ingests and stages, the learner
// READs batches and writes priorities back.

#include "learner_client/batch_reader.h"

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

// ---------------------------------------------------------------------------
// The learner cache, against a fake server whose staging ring the test
// writes: references (kEntryCachedBit) are staged exactly as the test says.

std::vector<uint8_t> PayloadOf(uint64_t sequence) {
  std::vector<uint8_t> p(kPayloadBytes, static_cast<uint8_t>(sequence * 7 + 1));
  std::memcpy(p.data(), &sequence, sizeof(sequence));
  return p;
}
uint64_t InsertTimeOf(uint64_t sequence) { return 1'000'000 + sequence; }

class FakeStagingServer {
 public:
  explicit FakeStagingServer(verbs::Provider* provider) : provider_(provider) {
    protocol::LayoutConfig config = SmallServerOptions().layout;
    config.capacity = 16;
    config.leases = 1;
    config.batch_size = 4;
    config.staging_depth = 4;
    regions_ = *server::ReplayRegions::Create(config);
    regions_->control()->server.epoch = 1;
    for (uint32_t k = 0; k < protocol::kNumRegionKinds; ++k) {
      const auto kind = static_cast<protocol::RegionKind>(k);
      if (!protocol::RoleNeedsRegion(Role::kLearner, kind, config, false)) continue;
      auto mr = *provider_->RegisterMemory(
          regions_->region(kind), regions_->region_bytes(kind),
          verbs::kLocalWrite | protocol::RoleAccess(Role::kLearner, kind, false));
      const verbs::RemoteRegion r = mr->remote();
      directory_.Set(kind, protocol::WireRegion{r.addr, r.length, r.rkey, 0});
      mrs_.push_back(std::move(mr));
    }
    listener_ = *provider_->Listen("127.0.0.1", 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeStagingServer() {
    stop_ = true;
    listener_->Shutdown();
    thread_.join();
    qps_.clear();  // before the memory goes
    mrs_.clear();
  }

  uint16_t port() const { return listener_->port(); }
  const protocol::LayoutConfig& config() const { return regions_->config(); }
  bool learner_cache() const { return learner_cache_; }
  const server::ReplayRegions& regions() const { return *regions_; }

  struct Entry {
    uint64_t sequence;
    bool cached;  // staged as a reference only
  };
  // Stages batch `n` of epoch 1: the entries, the copied slots of those not
  // cached, and the commit line last.
  void Stage(uint64_t n, const std::vector<Entry>& entries) {
    const protocol::LayoutConfig& c = config();
    uint8_t* img = regions_->staging_slot(n);
    auto* header = reinterpret_cast<protocol::BatchHeader*>(img);
    auto* staged = reinterpret_cast<protocol::BatchEntry*>(img + protocol::StagingEntriesOffset(c));
    uint8_t* slot = img + protocol::StagingPayloadsOffset(c);
    uint32_t payload_count = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      const uint64_t q = entries[i].sequence;
      staged[i].slot_sequence = q;
      staged[i].slot_index = static_cast<uint32_t>(protocol::LeaseSlotIndex(c, 0, q));
      staged[i].weight = 1.0f;
      if (entries[i].cached) {
        staged[i].slot_index |= protocol::kEntryCachedBit;
        continue;
      }
      const std::vector<uint8_t> payload = PayloadOf(q);
      ASSERT_TRUE(protocol::SealSlot(slot, c.slot_size, q, 0, 1.0f, InsertTimeOf(q), payload.data(),
                                     kPayloadBytes)
                      .ok());
      slot += c.slot_size;
      ++payload_count;
    }
    *header = protocol::BatchHeader{};
    header->batch_number = n;
    header->epoch = 1;
    header->count = static_cast<uint32_t>(entries.size());
    header->size = c.capacity;
    header->beta = 0.4f;
    header->payload_count = payload_count;
    header->used_bytes = protocol::StagingUsedBytes(c, payload_count);
    header->checksum = protocol::BatchChecksum(c, img, header->count, payload_count);
    auto* line = reinterpret_cast<protocol::CommitLine*>(img + protocol::StagingCommitOffset(c));
    StoreRelease(&line->used_bytes, header->used_bytes);
    StoreRelease(&line->commit, protocol::BatchCommitValue(n));
  }

 private:
  void Serve() {
    while (!stop_) {
      absl::StatusOr<std::unique_ptr<verbs::PendingConnection>> pending =
          listener_->Accept(absl::Milliseconds(50));
      if (!pending.ok()) continue;
      if (protocol::IsChallengeRequest((*pending)->payload())) {
        (*pending)->Reject(protocol::ChallengeReason(*protocol::RandomNonce()));
        continue;
      }
      // No token: the hello's MAC and the accept proof are not checked.
      absl::StatusOr<protocol::Hello> hello = protocol::DecodeHello((*pending)->payload());
      if (!hello.ok()) {
        (*pending)->Reject(std::string(hello.status().message()));
        continue;
      }
      learner_cache_ = hello->learner_cache;
      auto qp = (*pending)->Accept(
          protocol::EncodeAccept(protocol::WithoutKeys(directory_), protocol::Mac{}), {});
      if (!qp.ok()) continue;
      GrantKeys(qp->get(), *hello);
      qps_.push_back(std::move(*qp));
    }
  }

  // WRITEs the keys (protocol/key_grant.h): the grant, then its commit word.
  void GrantKeys(verbs::QueuePair* qp, const protocol::Hello& hello) {
    grants_.push_back(
        std::make_unique<protocol::KeyGrantMessage>(protocol::MakeKeyGrant("", hello, directory_)));
    protocol::KeyGrantMessage* grant = grants_.back().get();
    mrs_.push_back(*provider_->RegisterMemory(grant, sizeof(*grant), verbs::kLocalWrite));
    verbs::WorkRequest wrs[2];
    for (verbs::WorkRequest& wr : wrs) {
      wr.opcode = verbs::Opcode::kWrite;
      wr.signaled = false;
      wr.local = mrs_.back().get();
      wr.rkey = hello.grant.rkey;
    }
    wrs[0].local_addr = grant;
    wrs[0].length = protocol::kGrantCommitOffset;
    wrs[0].remote_addr = hello.grant.addr;
    wrs[1].local_addr = &grant->commit;
    wrs[1].length = sizeof(uint64_t);
    wrs[1].remote_addr = hello.grant.addr + protocol::kGrantCommitOffset;
    EXPECT_TRUE(qp->PostSend(absl::MakeConstSpan(wrs)).ok());
  }

  verbs::Provider* const provider_;
  std::vector<std::unique_ptr<protocol::KeyGrantMessage>> grants_;
  std::unique_ptr<server::ReplayRegions> regions_;
  std::vector<std::unique_ptr<verbs::MemoryRegion>> mrs_;
  protocol::RegionDirectory directory_;
  std::unique_ptr<verbs::Listener> listener_;
  std::vector<std::unique_ptr<verbs::QueuePair>> qps_;  // the serving thread's until joined
  std::atomic<bool> stop_{false};
  std::atomic<bool> learner_cache_{false};
  std::thread thread_;
};

class LearnerCacheTest : public BatchReaderTest {
 protected:
  std::unique_ptr<ClientSession> Connect(const FakeStagingServer& fake, bool cache) {
    client::ClientSessionOptions o;
    o.host = "127.0.0.1";
    o.port = fake.port();
    o.role = Role::kLearner;
    o.heartbeat = false;
    o.insecure = true;  // the fake server has no token
    o.learner_cache = cache;
    auto session = ClientSession::Connect(learner_host_.get(), o);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  // Next batch; checks every entry returned against its sequence.
  static StagedBatch NextChecked(BatchReader* reader) {
    absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok()) return StagedBatch();
    for (uint32_t i = 0; i < batch->size(); ++i) {
      const uint64_t q = batch->entry(i).slot_sequence;
      EXPECT_FALSE(protocol::EntryCached(batch->entry(i)));
      EXPECT_EQ(batch->entry(i).slot_index, q % 16);
      EXPECT_EQ(batch->slot_header(i).sequence, q) << "a stale slot";
      EXPECT_EQ(batch->insert_time_ns(i), InsertTimeOf(q));
      const absl::Span<const uint8_t> p = batch->payload(i);
      EXPECT_EQ(std::vector<uint8_t>(p.begin(), p.end()), PayloadOf(q)) << "a stale payload";
    }
    return *batch;
  }
  static std::vector<uint64_t> Sequences(const StagedBatch& b) {
    std::vector<uint64_t> out;
    for (uint32_t i = 0; i < b.size(); ++i) out.push_back(b.entry(i).slot_sequence);
    return out;
  }
  static std::vector<bool> Arrived(const StagedBatch& b) {
    std::vector<bool> out;
    for (uint32_t i = 0; i < b.size(); ++i) out.push_back(b.arrived(i));
    return out;
  }
};

TEST_F(LearnerCacheTest, ServesHitsAndNeverAStalePayloadWhenSlotsAreOverwritten) {
  FakeStagingServer fake(server_host_.get());
  // Capacity 16: sequence q lives in slot q % 16, so 17 overwrites 1.
  fake.Stage(0, {{1, false}, {2, false}, {3, false}});
  fake.Stage(1, {{1, true}, {4, false}, {2, true}});
  fake.Stage(2, {{17, true}, {5, true}, {6, false}});  // 17 and 5 were never received
  fake.Stage(3, {{17, false}, {2, true}});             // slot 1 now holds 17
  auto session = Connect(fake, /*cache=*/true);
  ASSERT_NE(session, nullptr);
  EXPECT_TRUE(fake.learner_cache());
  BatchReaderOptions options;
  options.learner_cache = true;
  auto reader = *BatchReader::Create(session.get(), options);
  auto priorities = *PriorityWriter::Create(session.get());

  StagedBatch b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(Arrived(b), (std::vector<bool>{true, true, true}));
  b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{1, 4, 2}));
  EXPECT_EQ(Arrived(b), (std::vector<bool>{false, true, false}));
  b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{6}));  // the misses are left out
  EXPECT_EQ(b.header().count, 3u);
  // The priority update answers the entries returned, and only those.
  ASSERT_TRUE(priorities->Write(b, {0.25f}).ok());
  ASSERT_TRUE(priorities->Flush().ok());
  const auto* update =
      reinterpret_cast<const protocol::MailboxHeader*>(fake.regions().mailbox_entry(2));
  EXPECT_EQ(update->count, 1u);
  const auto* record = reinterpret_cast<const protocol::PriorityRecord*>(
      fake.regions().mailbox_entry(2) + protocol::MailboxRecordsOffset(fake.config()));
  EXPECT_EQ(record->slot_sequence, 6u);
  EXPECT_EQ(record->slot_index, 6u);
  b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{17, 2}));
  EXPECT_EQ(Arrived(b), (std::vector<bool>{true, false}));
  // Slot 1 was overwritten under the cache: a reference to 1 is a miss now.
  fake.Stage(4, {{1, true}, {17, true}, {7, false}});
  b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{17, 7}));
  EXPECT_EQ(Arrived(b), (std::vector<bool>{false, true}));

  const BatchReaderStats& stats = reader->stats();
  EXPECT_EQ(stats.cache_hits, 4u);
  EXPECT_EQ(stats.cache_misses, 3u);
  EXPECT_EQ(stats.transitions_fetched, 7u);  // 1 2 3 4 6 17 7
  EXPECT_EQ(stats.distinct_transitions_fetched, 7u);
  EXPECT_EQ(stats.transitions, 3u + 3 + 1 + 2 + 2);
  // Only the copied slots crossed the link as experience.
  EXPECT_EQ(session->link_bytes().experience, stats.transitions_fetched * fake.config().slot_size);
}

TEST_F(LearnerCacheTest, WithoutTheCacheEveryReferenceIsAMiss) {
  FakeStagingServer fake(server_host_.get());
  fake.Stage(0, {{1, false}, {2, false}});
  fake.Stage(1, {{1, true}, {3, false}, {1, false}});
  auto session = Connect(fake, /*cache=*/false);
  ASSERT_NE(session, nullptr);
  EXPECT_FALSE(fake.learner_cache());
  auto reader = *BatchReader::Create(session.get(), {});
  EXPECT_EQ(Sequences(NextChecked(reader.get())), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(Sequences(NextChecked(reader.get())), (std::vector<uint64_t>{3, 1}));
  EXPECT_EQ(reader->stats().cache_hits, 0u);
  EXPECT_EQ(reader->stats().cache_misses, 1u);
  EXPECT_EQ(reader->stats().transitions_fetched, 4u);
  EXPECT_EQ(reader->stats().distinct_transitions_fetched, 3u);
}

}  // namespace
}  // namespace dreplay::learner
