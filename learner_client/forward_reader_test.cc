// Copyright dreplay authors.

#include "learner_client/forward_reader.h"

#include <memory>
#include <vector>

#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "learner_client/param_publisher.h"
#include "replay_server/server.h"
#include "testing/in_process_service.h"

namespace dreplay::learner {
namespace {

using client::ClientSession;
using protocol::Role;
using testing::PayloadTag;
using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::TaggedPayload;
using testing::WaitFor;

constexpr uint32_t kPayloadBytes = 64;

class ForwardReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_host_ = SoftProvider();
    actor_host_ = SoftProvider();
    learner_host_ = SoftProvider();
    // One actor: one lease, the whole ring.
    server::ReplayServerOptions options = SmallServerOptions();
    options.layout.leases = 1;
    server_ = StartServer(server_host_.get(), options);
    actor_ = *ClientSession::Connect(actor_host_.get(), SessionOptions(*server_, Role::kActor, 0));
    actor::ExperienceWriterOptions o;
    o.max_batch = 9;
    writer_ = *actor::ExperienceWriter::Create(actor_.get(), o);
    client::ClientSessionOptions learner = SessionOptions(*server_, Role::kLearner);
    learner.learner_placement = true;  // keys to the slots, commit words and journal
    learner_ = *ClientSession::Connect(learner_host_.get(), learner);
  }

  // Inserts tags [first, first + count) and waits until they are ingested.
  void Insert(uint64_t first, uint64_t count) {
    for (uint64_t t = first; t < first + count; ++t) {
      ASSERT_TRUE(writer_->Append(TaggedPayload(t, kPayloadBytes), 1.0f).ok());
    }
    ASSERT_TRUE(writer_->Flush().ok());
    ASSERT_TRUE(WaitFor([&] { return server_->ReadStats().ingest_cursor == first + count; }));
  }

  // Reads until `count` transitions arrived; checks their order and tags
  // (one writer in one lease: tag == the lease's sequence), and that the
  // journal order numbers increase.
  void ExpectForwarded(ForwardReader* reader, uint64_t first, uint64_t count) {
    std::vector<ForwardedTransition> batch;
    uint64_t expected = first;
    const absl::Time deadline = absl::Now() + testing::kTestTimeout;
    while (expected < first + count && absl::Now() < deadline) {
      ASSERT_TRUE(reader->Next(absl::Milliseconds(10), &batch).ok());
      for (const ForwardedTransition& t : batch) {
        ASSERT_EQ(t.lease_sequence, expected);
        ASSERT_EQ(t.lease, 0u);
        if (expected > first) {
          ASSERT_GT(t.sequence, last_number_);
        }
        last_number_ = t.sequence;
        ASSERT_EQ(t.payload.size(), kPayloadBytes);
        ASSERT_EQ(PayloadTag(t.payload.data(), kPayloadBytes), expected);
        EXPECT_EQ(t.initial_priority(), 1.0f);
        ++expected;
      }
    }
    EXPECT_EQ(expected, first + count);
  }

  std::unique_ptr<verbs::Provider> server_host_, actor_host_, learner_host_;
  std::unique_ptr<server::ReplayServer> server_;
  std::unique_ptr<ClientSession> actor_, learner_;
  std::unique_ptr<actor::ExperienceWriter> writer_;
  uint64_t last_number_ = 0;
};

TEST_F(ForwardReaderTest, SeesEveryTransitionOnceInOrderAcrossTheWrap) {
  ForwardReaderOptions options;
  options.chunk_slots = 32;
  options.max_chunks_in_flight = 3;
  auto reader = *ForwardReader::Create(learner_.get(), options);
  EXPECT_EQ(reader->next_sequence(), 0u);
  const uint64_t capacity = server_->config().capacity;
  uint64_t inserted = 0;
  for (int round = 0; round < 5; ++round) {  // 5 x 200 sequences: the ring wraps
    Insert(inserted, 200);
    ExpectForwarded(reader.get(), inserted, 200);
    inserted += 200;
  }
  EXPECT_GT(inserted, 3 * capacity);
  EXPECT_EQ(reader->stats().transitions, inserted);
  EXPECT_EQ(reader->stats().overwritten, 0u);
  EXPECT_EQ(reader->stats().skipped_uncommitted, 0u);
  const uint64_t slot_bytes = inserted * (server_->config().slot_size + sizeof(uint64_t));
  EXPECT_GE(reader->stats().bytes_read, slot_bytes);
  // Nothing more arrives: an empty result, not an error.
  std::vector<ForwardedTransition> none;
  EXPECT_TRUE(reader->Next(absl::Milliseconds(5), &none).ok());
  EXPECT_TRUE(none.empty());
}

TEST_F(ForwardReaderTest, StartsAtTheCursorOrAtTheOldestTransitionStillHeld) {
  Insert(0, 300);
  auto from_cursor = *ForwardReader::Create(learner_.get(), {});
  const uint64_t journal_end = from_cursor->known_cursor();
  EXPECT_GT(journal_end, 0u);
  ForwardReaderOptions options;
  options.from_oldest = true;
  auto from_oldest = *ForwardReader::Create(learner_.get(), options);
  // The journal still names all 300; the ring holds the newest 256.
  ExpectForwarded(from_oldest.get(), 300 - server_->config().capacity, server_->config().capacity);
  EXPECT_EQ(from_oldest->stats().overwritten, 300 - server_->config().capacity);
  Insert(300, 10);
  ExpectForwarded(from_cursor.get(), 300, 10);
}

// While it is behind, the reader still learns the server's ingest cursor
// (what the actors generated), at most busy_poll_interval late.
TEST_F(ForwardReaderTest, KnowsTheServersIngestCursorWhileBehind) {
  Insert(0, 20);
  ForwardReaderOptions options;
  options.chunk_slots = 1;  // one sequence per READ: slow to catch up
  options.max_chunks_in_flight = 1;
  options.busy_poll_interval = absl::ZeroDuration();
  options.from_oldest = true;
  auto reader = *ForwardReader::Create(learner_.get(), options);
  EXPECT_EQ(reader->server_ingested(), 20u);
  std::vector<ForwardedTransition> batch;
  uint64_t handed_over = 0;
  ASSERT_TRUE(reader->Next(absl::Seconds(1), &batch).ok());
  handed_over += batch.size();
  Insert(20, 100);
  for (int i = 0; i < 10 && reader->server_ingested() < 120; ++i) {
    ASSERT_TRUE(reader->Next(absl::Seconds(1), &batch).ok());
    handed_over += batch.size();
  }
  EXPECT_EQ(reader->server_ingested(), 120u);
  EXPECT_LT(handed_over, 120u);  // learnt before it caught up
}

TEST_F(ForwardReaderTest, OnlyALearnerCanForward) {
  EXPECT_EQ(ForwardReader::Create(actor_.get(), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Everything is ingested before the reader asks: it is 300 sequences behind
// a ring of 256.
TEST_F(ForwardReaderTest, InOrderFallsBehindAndCountsTheLappedSequences) {
  ForwardReaderOptions options;
  options.chunk_slots = 32;
  options.max_chunks_in_flight = 2;
  options.from_oldest = true;
  auto reader = *ForwardReader::Create(learner_.get(), options);
  ASSERT_EQ(reader->next_sequence(), 0u);
  Insert(0, 300);
  const uint64_t capacity = server_->config().capacity;
  ExpectForwarded(reader.get(), 300 - capacity, capacity);
  EXPECT_EQ(reader->stats().overwritten, 300 - capacity);  // 0 .. 43, lapped
  EXPECT_EQ(reader->stats().skipped_behind, 0u);
  // The journal names all 300: the lapped ones are READ and fail their
  // check; only what the ring holds is handed over.
  EXPECT_EQ(reader->stats().transitions_fetched, 300u);
  EXPECT_EQ(reader->stats().distinct_transitions_fetched, capacity);
  EXPECT_EQ(reader->stats().journal_entries_lost, 0u);
}

TEST_F(ForwardReaderTest, FreshestJumpsToTheNewestWindowAndCountsWhatItSkipped) {
  ForwardReaderOptions options;
  options.policy = ForwardPolicy::kFreshest;
  options.window = 64;
  options.chunk_slots = 32;
  auto reader = *ForwardReader::Create(learner_.get(), options);
  // Fewer than half a journal behind: no journal entry is jumped over, but
  // of the 300 sequences the journal names only the newest 64 are READ.
  Insert(0, 300);
  ExpectForwarded(reader.get(), 300 - 64, 64);
  EXPECT_EQ(reader->stats().skipped_behind, 0u);
  EXPECT_EQ(reader->stats().skipped_sequences, 300u - 64);
  EXPECT_EQ(reader->stats().distinct_transitions_fetched, 64u);
  Insert(300, 40);
  ExpectForwarded(reader.get(), 300, 40);
}

TEST_F(ForwardReaderTest, RejectsAWindowLargerThanTheRing) {
  ForwardReaderOptions options;
  options.policy = ForwardPolicy::kFreshest;
  options.window = server_->config().capacity + 1;
  EXPECT_EQ(ForwardReader::Create(learner_.get(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Forward mode: the cursor polls, the commit words, the slots, parameters
// and the server's heartbeats add up to the queue pair's count, and only
// sequences below the cursor are READ.
TEST_F(ForwardReaderTest, LinkClassesAddUpToTheQueuePairsCount) {
  auto reader = *ForwardReader::Create(learner_.get(), {});
  auto params = *ParamPublisher::Create(learner_.get());
  Insert(0, 100);
  ExpectForwarded(reader.get(), 0, 100);
  ASSERT_TRUE(params->Publish(std::vector<uint8_t>(500, 1)).ok());
  // Caught up: more Next() calls only poll the cursor.
  std::vector<ForwardedTransition> none;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(reader->Next(absl::Milliseconds(2), &none).ok());
  ASSERT_TRUE(WaitFor([&] { return learner_->last_heartbeat() != 0; }));
  client::LinkBytes bytes;
  verbs::QueuePairTraffic traffic;
  ASSERT_TRUE(WaitFor([&] {  // a heartbeat may land between two reads
    traffic = learner_->traffic();
    bytes = learner_->link_bytes();
    return learner_->traffic() == traffic;
  }));
  const protocol::LayoutConfig& config = server_->config();
  EXPECT_EQ(bytes.experience, 100u * config.slot_size);
  // Commit words, and the journal entries (32 bytes each).
  EXPECT_GT(bytes.metadata, 100u * sizeof(uint64_t));
  EXPECT_EQ((bytes.metadata - 100u * sizeof(uint64_t)) % sizeof(protocol::JournalEntry), 0u);
  // The cursor READs completed, and perhaps one still in flight.
  EXPECT_GE(bytes.polling, reader->stats().cursor_reads * sizeof(protocol::ServerLine));
  EXPECT_LE(bytes.polling, (reader->stats().cursor_reads + 1) * sizeof(protocol::ServerLine));
  EXPECT_GT(bytes.params, 500u);
  EXPECT_EQ(bytes.priorities, 0u);
  EXPECT_EQ(bytes.total(), traffic.total() + learner_->handshake_bytes());
  EXPECT_EQ(bytes.control, traffic.peer() + learner_->handshake_bytes() +
                               sizeof(protocol::ControlBlock) + sizeof(protocol::ServerLine));
}

}  // namespace
}  // namespace dreplay::learner
