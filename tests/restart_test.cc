// Copyright dreplay authors.
//
// The replay server process stopped (SIGTERM: final checkpoint) or killed
// (SIGKILL: the last periodic checkpoint) and started again on the same port
// from its checkpoint directory: nothing committed before the checkpoint is
// lost, the epoch moves on, and clients reconnect and continue; after a
// SIGKILL no (lease, sequence) is handed out again.

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "actor_client/experience_writer.h"
#include "actor_client/param_fetcher.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "learner_client/batch_reader.h"
#include "learner_client/param_publisher.h"
#include "protocol/layout.h"
#include "testing/in_process_service.h"
#include "testing/server_process.h"
#include "testing/stats_monitor.h"

namespace dreplay::tests {
namespace {

using client::ClientSession;
using protocol::Role;
using protocol::StatsBlock;
using testing::PayloadTag;
using testing::SoftProvider;
using testing::TaggedPayload;

constexpr uint32_t kPayloadBytes = 128;
constexpr absl::Duration kBatchTimeout = absl::Seconds(20);
constexpr int kSigkillExitStatus = 128 + SIGKILL;

std::vector<std::string> ServerFlags(const std::string& checkpoint_dir) {
  return {"--capacity=4096",
          "--slot_size=168",
          "--batch_size=16",
          "--staging_depth=4",
          "--actor_ids=8",
          "--leases=1",  // one actor at a time: the whole ring
          "--heartbeat_interval_s=0.1",
          "--stats_interval_s=0",
          "--checkpoint_dir=" + checkpoint_dir};
}

class RestartTest : public ::testing::Test {
 protected:
  void SetUp() override { host_ = SoftProvider(); }

  void StartServer(const std::string& listen, const std::vector<std::string>& flags) {
    testing::ServerProcessOptions options;
    options.listen = listen;
    options.flags = flags;
    absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
        testing::ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // A fresh monitor's view once `condition` holds.
  absl::StatusOr<StatsBlock> WaitForStats(const std::string& what,
                                          const std::function<bool(const StatsBlock&)>& condition) {
    absl::StatusOr<std::unique_ptr<testing::StatsMonitor>> monitor =
        testing::StatsMonitor::Connect(host_.get(), *server_);
    if (!monitor.ok()) return monitor.status();
    return (*monitor)->WaitUntil(what, condition);
  }

  static void Insert(actor::ExperienceWriter* writer, uint64_t first, uint64_t count) {
    for (uint64_t t = first; t < first + count; ++t) {
      ASSERT_TRUE(writer->Append(TaggedPayload(t, kPayloadBytes), 0.5f + t % 7).ok());
    }
    const absl::Status s = writer->Flush();
    ASSERT_TRUE(s.ok()) << s;
  }

  std::unique_ptr<verbs::Provider> host_;
  std::unique_ptr<testing::ServerProcess> server_;
};

TEST_F(RestartTest, AfterSigtermTheRestartedServerHoldsEveryCommittedTransitionAndWritersGoOn) {
  const std::string dir = testing::MakeTestDir("checkpoint");
  ASSERT_NO_FATAL_FAILURE(StartServer("127.0.0.1:0", ServerFlags(dir)));
  const uint16_t port = server_->port();

  auto session =
      ClientSession::Connect(host_.get(), testing::ClientOptions(*server_, Role::kActor, 2));
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ((*session)->epoch(), 1u);
  actor::ExperienceWriterOptions wo;
  wo.max_batch = 32;
  auto writer = actor::ExperienceWriter::Create(session->get(), wo);
  ASSERT_TRUE(writer.ok()) << writer.status();
  constexpr uint64_t kBefore = 600;
  ASSERT_NO_FATAL_FAILURE(Insert(writer->get(), 0, kBefore));
  absl::StatusOr<StatsBlock> before = WaitForStats(
      "the first transitions ingested", [&](const StatsBlock& s) { return s.inserted == kBefore; });
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->epoch, 1u);

  absl::StatusOr<int> exit_status = server_->Stop(SIGTERM, testing::kServerStopTimeout);
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  ASSERT_EQ(*exit_status, 0) << server_->LogTail();

  ASSERT_NO_FATAL_FAILURE(StartServer(absl::StrCat("127.0.0.1:", port), ServerFlags(dir)));
  absl::StatusOr<StatsBlock> restored = WaitForStats(
      "the restored server published its stats", [](const StatsBlock& s) { return s.epoch == 2; });
  ASSERT_TRUE(restored.ok()) << restored.status() << "\nserver log:\n" << server_->LogTail();
  EXPECT_EQ(restored->inserted, kBefore);
  EXPECT_EQ(restored->size, kBefore);
  EXPECT_EQ(restored->ingest_cursor, kBefore);
  EXPECT_EQ(restored->restore_dropped, 0u);

  // The same writer goes on: its next insert reconnects to the new epoch.
  constexpr uint64_t kAfter = 400;
  ASSERT_NO_FATAL_FAILURE(Insert(writer->get(), kBefore, kAfter));
  EXPECT_EQ((*writer)->stats().reconnects, 1u);
  EXPECT_EQ((*writer)->stats().abandoned, 0u);
  EXPECT_EQ((*session)->epoch(), 2u);
  absl::StatusOr<StatsBlock> after =
      WaitForStats("the new transitions ingested",
                   [&](const StatsBlock& s) { return s.inserted == kBefore + kAfter; });
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->size, kBefore + kAfter);
  EXPECT_EQ(after->torn_slots, 0u);
  EXPECT_EQ(after->overrun_slots, 0u);

  // A learner gets batches of the new epoch, holding valid transitions from
  // both sides of the restart.
  auto learner =
      ClientSession::Connect(host_.get(), testing::ClientOptions(*server_, Role::kLearner));
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto reader = learner::BatchReader::Create(learner->get(), {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<learner::StagedBatch> batch = (*reader)->Next(kBatchTimeout);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->epoch(), 2u);
  EXPECT_EQ(batch->batch_number(), 0u);
  for (uint32_t i = 0; i < batch->size(); ++i) {
    const absl::Span<const uint8_t> p = batch->payload(i);
    ASSERT_EQ(p.size(), kPayloadBytes);
    EXPECT_EQ(PayloadTag(p.data(), kPayloadBytes), batch->entry(i).slot_sequence)
        << "one writer: the tag is the sequence";
  }

  exit_status = server_->Stop(SIGTERM, testing::kServerStopTimeout);
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_EQ(*exit_status, 0) << server_->LogTail();
}

TEST_F(RestartTest, AfterSigkillTheServerRestoresTheLastPeriodicCheckpoint) {
  const std::string dir = testing::MakeTestDir("periodic");
  std::vector<std::string> flags = ServerFlags(dir);
  flags.push_back("--checkpoint_interval_s=0.2");
  ASSERT_NO_FATAL_FAILURE(StartServer("127.0.0.1:0", flags));
  const uint16_t port = server_->port();

  auto session =
      ClientSession::Connect(host_.get(), testing::ClientOptions(*server_, Role::kActor, 0));
  ASSERT_TRUE(session.ok()) << session.status();
  auto writer = actor::ExperienceWriter::Create(session->get(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  constexpr uint64_t kCheckpointed = 300;
  ASSERT_NO_FATAL_FAILURE(Insert(writer->get(), 0, kCheckpointed));
  absl::StatusOr<StatsBlock> ingested = WaitForStats(
      "the transitions ingested", [&](const StatsBlock& s) { return s.inserted == kCheckpointed; });
  ASSERT_TRUE(ingested.ok()) << ingested.status();
  // A checkpoint is counted when its write ends, and its cut is taken when
  // the previous one has ended: the second counted after this snapshot was
  // cut after it, and holds every transition it counts.
  const uint64_t checkpoints = ingested->checkpoints_written;
  absl::StatusOr<StatsBlock> saved =
      WaitForStats("a checkpoint cut after the inserts",
                   [&](const StatsBlock& s) { return s.checkpoints_written > checkpoints + 1; });
  ASSERT_TRUE(saved.ok()) << saved.status();
  // More inserts the next checkpoint may or may not catch.
  constexpr uint64_t kMaybe = 100;
  ASSERT_NO_FATAL_FAILURE(Insert(writer->get(), kCheckpointed, kMaybe));

  absl::StatusOr<int> exit_status = server_->Stop(SIGKILL, testing::kServerStopTimeout);
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_EQ(*exit_status, kSigkillExitStatus);

  ASSERT_NO_FATAL_FAILURE(StartServer(absl::StrCat("127.0.0.1:", port), flags));
  absl::StatusOr<StatsBlock> restored = WaitForStats(
      "the restored server published its stats", [](const StatsBlock& s) { return s.epoch == 2; });
  ASSERT_TRUE(restored.ok()) << restored.status() << "\nserver log:\n" << server_->LogTail();
  EXPECT_GE(restored->inserted, kCheckpointed);
  EXPECT_LE(restored->inserted, kCheckpointed + kMaybe);
  EXPECT_EQ(restored->size, restored->inserted);
  EXPECT_EQ(restored->restore_dropped, 0u);

  // The writer reconnects and continues after what the server restored.
  ASSERT_NO_FATAL_FAILURE(Insert(writer->get(), kCheckpointed + kMaybe, 50));
  EXPECT_EQ((*writer)->stats().reconnects, 1u);
  EXPECT_EQ((*session)->epoch(), 2u);
  const uint64_t expected = restored->inserted + 50;
  absl::StatusOr<StatsBlock> after =
      WaitForStats("the writer's new transitions ingested",
                   [&](const StatsBlock& s) { return s.inserted == expected; });
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->torn_slots, 0u);
}

// The server is killed after a periodic checkpoint that holds two actors'
// leases and a parameter version: after the restart each actor id gets its
// own lease back (whatever order they reconnect in) at the sequence after
// its last one, and an actor READs the parameters before any learner is
// back.
TEST_F(RestartTest, AfterSigkillActorsGetTheirLeasesBackAndTheLastParamsAtOnce) {
  const std::string dir = testing::MakeTestDir("leases");
  std::vector<std::string> flags = ServerFlags(dir);
  flags.push_back("--leases=2");
  flags.push_back("--param_bytes=4096");
  flags.push_back("--checkpoint_interval_s=0.2");
  ASSERT_NO_FATAL_FAILURE(StartServer("127.0.0.1:0", flags));
  const uint16_t port = server_->port();

  constexpr uint32_t kFirst = 5, kSecond = 3;        // actor ids, in connection order
  constexpr uint64_t kFirstN = 300, kSecondN = 200;  // transitions each writes
  uint32_t lease_of_first = 0, lease_of_second = 0;
  for (const auto& [actor_id, count, lease] :
       {std::tuple<uint32_t, uint64_t, uint32_t*>{kFirst, kFirstN, &lease_of_first},
        {kSecond, kSecondN, &lease_of_second}}) {
    auto session = ClientSession::Connect(host_.get(),
                                          testing::ClientOptions(*server_, Role::kActor, actor_id));
    ASSERT_TRUE(session.ok()) << session.status();
    *lease = (*session)->directory().lease;
    auto writer = actor::ExperienceWriter::Create(session->get(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_NO_FATAL_FAILURE(Insert(writer->get(), 0, count));
  }
  ASSERT_NE(lease_of_first, lease_of_second);
  auto learner =
      ClientSession::Connect(host_.get(), testing::ClientOptions(*server_, Role::kLearner));
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto publisher = learner::ParamPublisher::Create(learner->get());
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  const std::vector<uint8_t> params = TaggedPayload(77, 1000);
  absl::StatusOr<uint64_t> version = (*publisher)->Publish(params);
  ASSERT_TRUE(version.ok()) << version.status();
  absl::StatusOr<StatsBlock> ingested =
      WaitForStats("both actors' transitions ingested",
                   [&](const StatsBlock& s) { return s.inserted == kFirstN + kSecondN; });
  ASSERT_TRUE(ingested.ok()) << ingested.status();
  const uint64_t checkpoints = ingested->checkpoints_written;
  ASSERT_TRUE(WaitForStats("a checkpoint cut after them", [&](const StatsBlock& s) {
                return s.checkpoints_written > checkpoints + 1;
              }).ok());

  absl::StatusOr<int> exit_status = server_->Stop(SIGKILL, testing::kServerStopTimeout);
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_EQ(*exit_status, kSigkillExitStatus);
  ASSERT_NO_FATAL_FAILURE(StartServer(absl::StrCat("127.0.0.1:", port), flags));

  // The other order this time: each id still gets its own lease.
  std::vector<std::unique_ptr<ClientSession>> sessions;
  for (const auto& [actor_id, count, lease] :
       {std::tuple<uint32_t, uint64_t, uint32_t>{kSecond, kSecondN, lease_of_second},
        {kFirst, kFirstN, lease_of_first}}) {
    auto session = ClientSession::Connect(host_.get(),
                                          testing::ClientOptions(*server_, Role::kActor, actor_id));
    ASSERT_TRUE(session.ok()) << session.status();
    EXPECT_EQ((*session)->epoch(), 2u);
    EXPECT_EQ((*session)->directory().lease, lease) << "actor " << actor_id;
    // Above every sequence written before (reservations: see the test below).
    EXPECT_GE((*session)->directory().resume_sequence, count) << "actor " << actor_id;
    sessions.push_back(std::move(*session));
  }
  auto fetcher = actor::ParamFetcher::Create(sessions[0].get(), {});
  ASSERT_TRUE(fetcher.ok()) << fetcher.status();
  std::vector<uint8_t> fetched;
  absl::StatusOr<bool> fresh = (*fetcher)->FetchIfNewer(&fetched);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE(*fresh) << "the restored server holds the published parameters";
  EXPECT_EQ((*fetcher)->version(), *version);
  EXPECT_EQ(fetched, params);

  // Both go on from there; nothing is counted torn or overrun.
  for (auto& session : sessions) {
    auto writer = actor::ExperienceWriter::Create(session.get(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_NO_FATAL_FAILURE(Insert(writer->get(), 1000, 50));
  }
  absl::StatusOr<StatsBlock> after =
      WaitForStats("the new transitions ingested",
                   [&](const StatsBlock& s) { return s.inserted == kFirstN + kSecondN + 100; });
  ASSERT_TRUE(after.ok()) << after.status() << "\nserver log:\n" << server_->LogTail();
  EXPECT_EQ(after->torn_slots, 0u);
  EXPECT_EQ(after->overrun_slots, 0u);
  EXPECT_EQ(after->restore_dropped, 0u);
}

// An actor writes past the last checkpoint (requested with SIGUSR1) and the
// server is killed: the restarted server restores the checkpoint's cursor,
// but the lease resumes above every sequence the killed server handed out
// (its reservation mark), so the actor's new sequences are all greater than
// any it wrote before, and what the checkpoint held is there exactly once.
TEST_F(RestartTest, AfterSigkillNoSequenceWrittenBeforeTheKillIsHandedOutAgain) {
  const std::string dir = testing::MakeTestDir("reservations");
  const std::vector<std::string> flags = ServerFlags(dir);  // no periodic checkpoint
  ASSERT_NO_FATAL_FAILURE(StartServer("127.0.0.1:0", flags));
  const uint16_t port = server_->port();

  auto session =
      ClientSession::Connect(host_.get(), testing::ClientOptions(*server_, Role::kActor, 4));
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_EQ((*session)->directory().resume_sequence, 0u);
  auto writer = actor::ExperienceWriter::Create(session->get(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  constexpr uint64_t kCheckpointed = 300;
  ASSERT_NO_FATAL_FAILURE(Insert(writer->get(), 0, kCheckpointed));
  ASSERT_TRUE(WaitForStats("the first transitions ingested", [&](const StatsBlock& s) {
                return s.inserted == kCheckpointed;
              }).ok());
  ASSERT_EQ(kill(server_->pid(), SIGUSR1), 0);
  absl::StatusOr<StatsBlock> saved = WaitForStats(
      "the requested checkpoint", [](const StatsBlock& s) { return s.checkpoints_written >= 1; });
  ASSERT_TRUE(saved.ok()) << saved.status() << "\nserver log:\n" << server_->LogTail();
  ASSERT_EQ(saved->checkpoints_written, 1u);

  // Past the checkpoint: ingested by the server about to be killed.
  constexpr uint64_t kLost = 200;
  ASSERT_NO_FATAL_FAILURE(Insert(writer->get(), kCheckpointed, kLost));
  ASSERT_TRUE(WaitForStats("the later transitions ingested", [&](const StatsBlock& s) {
                return s.inserted == kCheckpointed + kLost;
              }).ok());
  const uint64_t last_written = kCheckpointed + kLost - 1;  // one writer: tag == sequence

  absl::StatusOr<int> exit_status = server_->Stop(SIGKILL, testing::kServerStopTimeout);
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_EQ(*exit_status, kSigkillExitStatus);

  ASSERT_NO_FATAL_FAILURE(StartServer(absl::StrCat("127.0.0.1:", port), flags));
  absl::StatusOr<StatsBlock> restored = WaitForStats(
      "the restored server published its stats", [](const StatsBlock& s) { return s.epoch == 2; });
  ASSERT_TRUE(restored.ok()) << restored.status() << "\nserver log:\n" << server_->LogTail();
  EXPECT_EQ(restored->inserted, kCheckpointed) << "the checkpoint's, not the killed server's";
  EXPECT_EQ(restored->size, kCheckpointed);
  EXPECT_EQ(restored->restore_dropped, 0u);
  EXPECT_GT(restored->ingest_cursor, last_written) << "the cursor moved up to the mark";
  EXPECT_NE(server_->LogTail(20000).find("sequences_skipped_after_restart"), std::string::npos)
      << server_->LogTail();

  // The writer reconnects: its lease resumes above everything it wrote.
  constexpr uint64_t kAfter = 50, kFirstTagAfter = 1000;
  ASSERT_NO_FATAL_FAILURE(Insert(writer->get(), kFirstTagAfter, kAfter));
  EXPECT_EQ((*writer)->stats().reconnects, 1u);
  EXPECT_EQ((*session)->epoch(), 2u);
  const uint64_t resume = (*session)->directory().resume_sequence;
  EXPECT_GT(resume, last_written) << "a sequence of the killed server handed out again";
  absl::StatusOr<StatsBlock> after =
      WaitForStats("the new transitions ingested",
                   [&](const StatsBlock& s) { return s.inserted == kCheckpointed + kAfter; });
  ASSERT_TRUE(after.ok()) << after.status() << "\nserver log:\n" << server_->LogTail();
  EXPECT_EQ(after->size, kCheckpointed + kAfter) << "each transition held once";
  EXPECT_EQ(after->torn_slots, 0u);
  EXPECT_EQ(after->overrun_slots, 0u);

  // Batches hold the checkpointed transitions under their own sequences and
  // the new ones under sequences from `resume` on, never a mix.
  auto learner =
      ClientSession::Connect(host_.get(), testing::ClientOptions(*server_, Role::kLearner));
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto reader = learner::BatchReader::Create(learner->get(), {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (int b = 0; b < 4; ++b) {  // staging_depth batches: no update needed
    absl::StatusOr<learner::StagedBatch> batch = (*reader)->Next(kBatchTimeout);
    ASSERT_TRUE(batch.ok()) << batch.status();
    for (uint32_t i = 0; i < batch->size(); ++i) {
      const absl::Span<const uint8_t> p = batch->payload(i);
      ASSERT_EQ(p.size(), kPayloadBytes);
      const uint64_t sequence = batch->entry(i).slot_sequence;
      const uint64_t tag = PayloadTag(p.data(), kPayloadBytes);
      if (sequence < kCheckpointed) {
        EXPECT_EQ(tag, sequence);
      } else {
        ASSERT_GE(sequence, resume);
        ASSERT_LT(sequence, resume + kAfter);
        EXPECT_EQ(tag, kFirstTagAfter + (sequence - resume));
      }
    }
  }
}

}  // namespace
}  // namespace dreplay::tests
