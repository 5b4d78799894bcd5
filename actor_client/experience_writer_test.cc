// Copyright dreplay authors.

#include "actor_client/experience_writer.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/session.h"
#include "common/verification_log.h"
#include "gtest/gtest.h"
#include "replay_server/server.h"
#include "testing/in_process_service.h"

namespace dreplay::actor {
namespace {

using client::ClientSession;
using protocol::Role;
using server::ReplayServer;
using server::ReplayServerOptions;
using testing::SessionOptions;
using testing::SmallServerOptions;
using testing::SoftProvider;
using testing::StartServer;
using testing::TaggedPayload;
using testing::WaitFor;

constexpr uint32_t kPayloadBytes = 100;
constexpr uint32_t kPipelinedBatch = 4;

class ExperienceWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_host_ = SoftProvider();
    actor_host_ = SoftProvider();
  }

  std::unique_ptr<ClientSession> ConnectActor(const ReplayServer& server, uint32_t actor_id) {
    auto session =
        ClientSession::Connect(actor_host_.get(), SessionOptions(server, Role::kActor, actor_id));
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  // Appends `count` tagged transitions (tags first .. first+count-1) and
  // flushes.
  static void Insert(ExperienceWriter* writer, uint64_t first, uint64_t count) {
    for (uint64_t t = first; t < first + count; ++t) {
      ASSERT_TRUE(writer->Append(TaggedPayload(t, kPayloadBytes), 1.0f + t % 7).ok());
    }
    ASSERT_TRUE(writer->Flush().ok());
  }

  // Drives `writers` (max_batch kPipelinedBatch) from this thread with
  // Submit/Poll until each has
  // committed `each` tagged transitions (writer w: tags w*each ..) or the
  // deadline passes; false on an error or at the deadline.
  static bool RunPipelined(const std::vector<ExperienceWriter*>& writers, uint64_t each) {
    std::vector<uint64_t> appended(writers.size(), 0);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      bool done = true;
      for (size_t w = 0; w < writers.size(); ++w) {
        ExperienceWriter* writer = writers[w];
        if (!writer->Poll().ok()) return false;
        while (appended[w] < each && writer->pending() < kPipelinedBatch) {
          const uint64_t tag = w * each + appended[w]++;
          if (!writer->Append(TaggedPayload(tag, kPayloadBytes), 1.0f + tag % 7).ok()) return false;
        }
        absl::StatusOr<bool> posted = writer->Submit();
        if (!posted.ok()) return false;
        done = done && appended[w] == each && writer->pending() == 0 && writer->in_flight() == 0;
      }
      if (done) return true;
    }
    return false;
  }

  std::unique_ptr<verbs::Provider> server_host_;
  std::unique_ptr<verbs::Provider> actor_host_;
};

TEST_F(ExperienceWriterTest, EveryCommittedTransitionIsIngestedExactlyOnce) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto session = ConnectActor(*server, 1);
  ASSERT_NE(session, nullptr);
  ExperienceWriterOptions options;
  options.max_batch = 7;  // batches straddle the lease's wrap
  auto writer = *ExperienceWriter::Create(session.get(), options);
  const uint64_t kCount = 3 * server->config().capacity + 5;
  Insert(writer.get(), 0, kCount);
  EXPECT_EQ(writer->stats().committed, kCount);
  EXPECT_EQ(writer->stats().abandoned, 0u);
  EXPECT_EQ(writer->pending(), 0u);
  EXPECT_EQ(writer->stats().latency.count(), writer->stats().flushes);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == kCount; }))
      << server->ReadStats().inserted;
  const protocol::StatsBlock stats = server->ReadStats();
  EXPECT_EQ(stats.torn_slots, 0u);
  EXPECT_EQ(stats.overrun_slots, 0u);
  // The writer's lease is full; the other leases are empty.
  EXPECT_EQ(stats.size, protocol::LeaseSlots(server->config()));
  EXPECT_EQ(stats.ingest_cursor, kCount);
  EXPECT_EQ(writer->next_sequence(), kCount);
}

TEST_F(ExperienceWriterTest, ConcurrentWritersShareATinyRingInTheirOwnLeasesWithoutOverrunning) {
  ReplayServerOptions options = SmallServerOptions();
  options.layout.capacity = 16;
  options.layout.leases = 3;  // 5 slots each
  auto server = StartServer(server_host_.get(), options);
  constexpr int kWriters = 3;
  constexpr uint64_t kEach = 200;
  std::vector<std::thread> threads;
  std::vector<uint64_t> committed(kWriters, 0);
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      auto session = ConnectActor(*server, w);
      ASSERT_NE(session, nullptr);
      ExperienceWriterOptions o;
      o.max_batch = 5;
      auto writer = *ExperienceWriter::Create(session.get(), o);
      Insert(writer.get(), w * kEach, kEach);
      committed[w] = writer->stats().committed;
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWriters; ++w) EXPECT_EQ(committed[w], kEach);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == kWriters * kEach; }))
      << server->ReadStats().inserted;
  EXPECT_EQ(server->ReadStats().overrun_slots, 0u);
  EXPECT_EQ(server->ReadStats().torn_slots, 0u);
}

TEST_F(ExperienceWriterTest, RefusesPayloadsLargerThanASlotAndBadOptions) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto session = ConnectActor(*server, 0);
  ASSERT_NE(session, nullptr);
  ExperienceWriterOptions options;
  options.max_batch = 1024;  // more than the capacity
  EXPECT_EQ(ExperienceWriter::Create(session.get(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto writer = *ExperienceWriter::Create(session.get(), {});
  const std::vector<uint8_t> big(server->config().max_payload() + 1, 1);
  const absl::Status s = writer->Append(big, 1.0f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("129 bytes"), std::string::npos) << s;
  EXPECT_EQ(writer->pending(), 0u);
  EXPECT_TRUE(writer->Flush().ok());  // nothing pending
}

TEST_F(ExperienceWriterTest, AnotherRoleCannotWrite) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  auto monitor = ClientSession::Connect(actor_host_.get(), SessionOptions(*server, Role::kMonitor));
  ASSERT_TRUE(monitor.ok());
  EXPECT_EQ(ExperienceWriter::Create(monitor->get(), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ExperienceWriterTest, ReconnectsAfterARestartFromCheckpointAndLosesNothingCommitted) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/writer_restart";
  std::filesystem::remove_all(dir);
  ReplayServerOptions options = SmallServerOptions();
  options.checkpoint_dir = dir;
  auto server = StartServer(server_host_.get(), options);
  auto session = ConnectActor(*server, 2);
  ASSERT_NE(session, nullptr);
  auto writer = *ExperienceWriter::Create(session.get(), {});
  Insert(writer.get(), 0, 100);

  // Stop (final checkpoint) and start again on the same port.
  ASSERT_TRUE(server->Stop().ok());
  options.port = server->port();
  server.reset();
  server = StartServer(server_host_.get(), options);
  ASSERT_TRUE(server->restored());
  EXPECT_EQ(server->epoch(), 2u);

  Insert(writer.get(), 100, 50);
  EXPECT_GE(writer->stats().reconnects, 1u);
  EXPECT_EQ(writer->stats().abandoned, 0u);
  EXPECT_EQ(writer->stats().committed, 150u);
  EXPECT_EQ(session->epoch(), 2u);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == 150; }))
      << server->ReadStats().inserted;
  EXPECT_EQ(server->ReadStats().size, protocol::LeaseSlots(server->config()));
  EXPECT_EQ(server->ReadStats().epoch, 2u);
}

TEST_F(ExperienceWriterTest, ABatchWhoseCommitLandedButWasNotConfirmedIsNotWrittenTwice) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  // The connection is dropped right after the fifth request: the control
  // block READ, then the slots and commit WRITEs of two batches. The second
  // batch's commit is placed, its completion may never arrive.
  client::ClientSessionOptions o = SessionOptions(*server, Role::kActor, 1);
  o.qp.faults.drop_after_ops = 1 + 2 * 2;
  auto session = *ClientSession::Connect(actor_host_.get(), o);
  ExperienceWriterOptions wo;
  wo.max_batch = 4;
  auto writer = *ExperienceWriter::Create(session.get(), wo);
  constexpr uint64_t kCount = 3 * 4;
  for (uint64_t first = 0; first < kCount; first += 4) Insert(writer.get(), first, 4);
  // Whether the second batch's commit was placed before the connection
  // dropped is a race: when it was not, the lease resumes at the second
  // batch and the new connection (with the same fault) drops once more.
  EXPECT_GE(writer->stats().reconnects, 1u);
  EXPECT_LE(writer->stats().reconnects, 2u);
  EXPECT_EQ(writer->stats().committed, kCount);
  EXPECT_EQ(writer->stats().abandoned, 0u);
  EXPECT_EQ(writer->next_sequence(), kCount);
  // Each transition was ingested exactly once: the server resumed the
  // lease after the last placed commit, and the writer did not write what
  // was below it again.
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().ingest_cursor == kCount; }))
      << server->ReadStats().ingest_cursor;
  const protocol::StatsBlock stats = server->ReadStats();
  EXPECT_EQ(stats.inserted, kCount);
  EXPECT_EQ(stats.torn_slots + stats.overrun_slots, 0u);
}

TEST_F(ExperienceWriterTest, FailsCleanlyWhenTheServerStaysAway) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  client::ClientSessionOptions o = SessionOptions(*server, Role::kActor, 0);
  o.connect_deadline = absl::Milliseconds(100);
  auto session = *ClientSession::Connect(actor_host_.get(), o);
  auto writer = *ExperienceWriter::Create(session.get(), {});
  ASSERT_TRUE(server->Stop().ok());
  server.reset();
  ASSERT_TRUE(writer->Append(TaggedPayload(1, kPayloadBytes), 1.0f).ok());
  const absl::Status s = writer->Flush();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("connecting to the replay server"), std::string::npos) << s;
  EXPECT_EQ(writer->pending(), 1u);  // kept: nothing was written
}

TEST_F(ExperienceWriterTest, PipelinedWritersOnOneThreadLoseNothingAndWriteNothingTwice) {
  ReplayServerOptions options = SmallServerOptions();
  options.layout.capacity = 64;
  options.layout.leases = 4;  // 16 slots each: the writers wait for room often
  auto server = StartServer(server_host_.get(), options);
  constexpr int kWriters = 4;
  constexpr uint64_t kEach = 500;
  std::vector<std::unique_ptr<ClientSession>> sessions;
  std::vector<std::unique_ptr<ExperienceWriter>> owned;
  std::vector<ExperienceWriter*> writers;
  ExperienceWriterOptions wo;
  wo.max_batch = kPipelinedBatch;
  wo.max_in_flight = 3;
  for (int w = 0; w < kWriters; ++w) {
    sessions.push_back(ConnectActor(*server, w));
    ASSERT_NE(sessions.back(), nullptr);
    owned.push_back(*ExperienceWriter::Create(sessions.back().get(), wo));
    writers.push_back(owned.back().get());
  }
  ASSERT_TRUE(RunPipelined(writers, kEach));
  for (ExperienceWriter* writer : writers) {
    EXPECT_EQ(writer->stats().committed, kEach);
    EXPECT_EQ(writer->next_sequence(), kEach);
    EXPECT_EQ(writer->stats().latency.count(), writer->stats().flushes);
  }
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().inserted == kWriters * kEach; }))
      << server->ReadStats().inserted;
  const protocol::StatsBlock stats = server->ReadStats();
  EXPECT_EQ(stats.ingest_cursor, kWriters * kEach);
  EXPECT_EQ(stats.torn_slots + stats.overrun_slots, 0u);
}

TEST_F(ExperienceWriterTest, PipelinedBatchesCutByADroppedConnectionAreIngestedExactlyOnce) {
  auto server = StartServer(server_host_.get(), SmallServerOptions());
  // Every connection drops after the control block READ and a few more
  // requests, with batches in flight: each reconnection resumes the lease
  // after its last placed commit and writes the rest again.
  client::ClientSessionOptions o = SessionOptions(*server, Role::kActor, 1);
  o.qp.faults.drop_after_ops = 1 + 7;
  auto session = *ClientSession::Connect(actor_host_.get(), o);
  ExperienceWriterOptions wo;
  wo.max_batch = kPipelinedBatch;
  wo.max_in_flight = 4;
  wo.max_reconnects_per_flush = 1000;
  auto writer = *ExperienceWriter::Create(session.get(), wo);
  constexpr uint64_t kCount = 64;
  ASSERT_TRUE(RunPipelined({writer.get()}, kCount));
  EXPECT_GE(writer->stats().reconnects, 1u);
  EXPECT_EQ(writer->stats().committed, kCount);
  EXPECT_EQ(writer->stats().abandoned, 0u);
  EXPECT_EQ(writer->next_sequence(), kCount);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().ingest_cursor == kCount; }))
      << server->ReadStats().ingest_cursor;
  const protocol::StatsBlock stats = server->ReadStats();
  EXPECT_EQ(stats.inserted, kCount);
  EXPECT_EQ(stats.torn_slots + stats.overrun_slots, 0u);
}

// The records of kind `kind` in the verification log at `path`, with the
// kind dropped ("I 3 41 ...abc" -> "3 41 ...abc"); P records also lose
// their epoch, so they compare with I records.
std::multiset<std::string> Records(const std::string& path, char kind) {
  std::ifstream in(path);
  std::multiset<std::string> records;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != kind) continue;
    std::string rest = line.substr(2);
    if (kind == 'P') rest = rest.substr(rest.find(' ') + 1);
    records.insert(rest);
  }
  return records;
}

std::string TempLog(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::remove(path.c_str());
  return path;
}

TEST_F(ExperienceWriterTest, EveryCommitTheActorRecordsIsOneTheServerIngested) {
  // Both sides log: the server what it ingested, the actor what it saw
  // committed, through flushes and through pipelined batches cut by dropped
  // connections (commits confirmed by the next grant).
  const std::string server_log_path = TempLog("writer_server.vlog");
  const std::string actor_log_path = TempLog("writer_actor.vlog");
  std::unique_ptr<VerificationLog> server_log = *VerificationLog::Open(server_log_path);
  std::unique_ptr<VerificationLog> actor_log = *VerificationLog::Open(actor_log_path);
  ReplayServerOptions so = SmallServerOptions();
  so.core.ingest.verification_log = server_log.get();
  auto server = StartServer(server_host_.get(), so);
  client::ClientSessionOptions o = SessionOptions(*server, Role::kActor, 1);
  o.qp.faults.drop_after_ops = 1 + 7;
  auto session = *ClientSession::Connect(actor_host_.get(), o);
  ExperienceWriterOptions wo;
  wo.max_batch = kPipelinedBatch;
  wo.max_in_flight = 4;
  wo.max_reconnects_per_flush = 1000;
  wo.verification_log = actor_log.get();
  auto writer = *ExperienceWriter::Create(session.get(), wo);
  constexpr uint64_t kCount = 64;
  ASSERT_TRUE(RunPipelined({writer.get()}, kCount));
  Insert(writer.get(), kCount, 9);  // and a synchronous flush
  EXPECT_GE(writer->stats().reconnects, 1u);
  ASSERT_TRUE(WaitFor([&] { return server->ReadStats().ingest_cursor == kCount + 9; }))
      << server->ReadStats().ingest_cursor;
  const std::multiset<std::string> committed = Records(actor_log_path, 'P');
  EXPECT_EQ(committed.size(), kCount + 9);
  EXPECT_EQ(committed, Records(server_log_path, 'I'));
  std::ifstream in(actor_log_path);
  std::string kind;
  uint64_t epoch = 0;
  ASSERT_TRUE(in >> kind >> epoch);
  EXPECT_EQ(epoch, server->epoch());
}

}  // namespace
}  // namespace dreplay::actor
