// Copyright dreplay authors.
//
// The replay server process against clients that hold valid credentials and
// misbehave: keys carried from one connection to another (each connection's
// keys are memory windows bound to its own queue pair), a monitor that
// forges, actors that use another lease's keys, a buffer-placement learner
// that READs the slots with keys not its own, and a learner that sends
// NaN and infinite priorities or oversized and malformed mailbox entries.
// Each is refused by the provider or counted and contained; an honest actor
// writing at the same time carries on without reconnecting.
//
// It runs on the soft provider, or with DREPLAY_TEST_PROVIDER=ibverbs on a
// real device (tools/rxe_vm/suite.sh runs it so on rxe), where the keys are
// type-2 memory windows and the device itself refuses the misuse.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "learner_client/batch_reader.h"
#include "learner_client/priority_writer.h"
#include "protocol/handshake.h"
#include "protocol/layout.h"
#include "protocol/mailbox.h"
#include "testing/in_process_service.h"
#include "testing/server_process.h"
#include "testing/stats_monitor.h"

namespace dreplay::tests {
namespace {

using client::ClientSession;
using protocol::RegionKind;
using protocol::Role;
using protocol::StatsBlock;
using testing::TaggedPayload;
using testing::TestProvider;

constexpr char kToken[] = "adversarial test token";
constexpr uint32_t kPayloadBytes = 128;
constexpr uint32_t kBatchSize = 8;
constexpr absl::Duration kCompletionTimeout = absl::Seconds(20);
constexpr char kReplayTop[] = "tools/replay_top";

class AdversarialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::MakeTestDir("adversarial");
    const std::string token_file = dir + "/token";
    testing::WriteSecretFile(token_file, std::string(kToken) + "\n");
    testing::ServerProcessOptions options;
    options.provider = testing::TestProviderName();
    options.flags = {"--capacity=4096",
                     "--slot_size=168",
                     absl::StrCat("--batch_size=", kBatchSize),
                     "--staging_depth=4",
                     "--leases=8",
                     "--heartbeat_interval_s=0.1",
                     "--stats_interval_s=0",
                     "--auth_token_file=" + token_file};
    absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
        testing::ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    host_ = TestProvider();
    auto monitor = testing::StatsMonitor::Connect(host_.get(), *server_, kToken);
    ASSERT_TRUE(monitor.ok()) << monitor.status();
    monitor_ = std::move(*monitor);
    auto buffer = client::RegisteredBuffer::Create(host_.get(), 1 << 16);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    buffer_ = std::move(*buffer);
    // The honest actor, writing through every test.
    auto honest = Connect(Role::kActor, 0);
    ASSERT_TRUE(honest.ok()) << honest.status();
    honest_session_ = std::move(*honest);
    auto writer = actor::ExperienceWriter::Create(honest_session_.get(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    honest_ = std::move(*writer);
    InsertAndWait(100);
  }

  absl::StatusOr<std::unique_ptr<ClientSession>> Connect(Role role, uint32_t actor_id = 0) {
    client::ClientSessionOptions o = testing::ClientOptions(*server_, role, actor_id, kToken);
    o.connect_deadline = absl::ZeroDuration();
    return ClientSession::Connect(host_.get(), o);
  }

  // A learner, in the learner placement or not. It waits (retryable
  // refusals) while the server has yet to notice an earlier learner gone.
  absl::StatusOr<std::unique_ptr<ClientSession>> ConnectLearner(bool learner_placement) {
    client::ClientSessionOptions o = testing::ClientOptions(*server_, Role::kLearner, 0, kToken);
    o.connect_deadline = kCompletionTimeout;
    o.learner_placement = learner_placement;
    return ClientSession::Connect(host_.get(), o);
  }

  // The honest actor inserts `count` more transitions; they are ingested.
  void InsertAndWait(uint64_t count) {
    for (uint64_t i = 0; i < count; ++i, ++inserted_) {
      ASSERT_TRUE(honest_->Append(TaggedPayload(inserted_, kPayloadBytes), 1.0f).ok());
    }
    ASSERT_TRUE(honest_->Flush().ok());
    const uint64_t expected = inserted_;
    absl::StatusOr<StatsBlock> s =
        monitor_->WaitUntil("the honest actor's transitions ingested",
                            [expected](const StatsBlock& s) { return s.inserted == expected; });
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(honest_->stats().reconnects, 0u);
  }

  // Posts `wr` on `session` (a fresh sink) and returns its completion.
  verbs::Completion PostOne(ClientSession* session, verbs::WorkRequest wr) {
    const int sink = *session->AddSink();
    wr.wr_id = ClientSession::WrId(sink, 1);
    wr.signaled = true;
    EXPECT_TRUE(session->Post(absl::MakeConstSpan(&wr, 1)).ok());
    verbs::Completion c;
    c.status = verbs::WcStatus::kGeneralError;
    c.detail = "no completion within the timeout";
    const absl::Time deadline = absl::Now() + kCompletionTimeout;
    while (absl::Now() < deadline) {
      if (session->Poll(sink, absl::MakeSpan(&c, 1)) == 1) break;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return c;
  }

  verbs::WorkRequest Request(verbs::Opcode op, const verbs::RemoteRegion& target, uint64_t offset,
                             uint32_t length) {
    verbs::WorkRequest wr;
    wr.opcode = op;
    wr.local = buffer_->mr();
    wr.local_addr = buffer_->data();
    wr.length = length;
    wr.remote_addr = target.addr + offset;
    wr.rkey = target.rkey;
    return wr;
  }

  // `wr` on `session` fails with a remote access error and takes only that
  // connection down.
  void ExpectRefused(ClientSession* session, const verbs::WorkRequest& wr,
                     const std::string& what) {
    const verbs::Completion c = PostOne(session, wr);
    EXPECT_EQ(c.status, verbs::WcStatus::kRemoteAccessError) << what << ": " << c.ToStatus();
    EXPECT_EQ(session->qp()->state(), verbs::QpState::kError) << what;
  }

  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<verbs::Provider> host_;
  std::unique_ptr<testing::StatsMonitor> monitor_;
  std::unique_ptr<client::RegisteredBuffer> buffer_;
  std::unique_ptr<ClientSession> honest_session_;
  std::unique_ptr<actor::ExperienceWriter> honest_;
  uint64_t inserted_ = 0;
};

TEST_F(AdversarialTest, AKeyOfOneConnectionIsRefusedOnAnother) {
  // Two monitors: B uses A's stats key. A itself can still READ with it.
  auto a = Connect(Role::kMonitor);
  auto b = Connect(Role::kMonitor);
  ASSERT_TRUE(a.ok() && b.ok());
  const verbs::RemoteRegion stats_a = *(*a)->Region(RegionKind::kStats);
  EXPECT_NE(stats_a.rkey, (*b)->Region(RegionKind::kStats)->rkey)
      << "two connections were given the same key";
  ExpectRefused(b->get(), Request(verbs::Opcode::kRead, stats_a, 0, 64),
                "READ with another monitor's stats key");
  const verbs::Completion own = PostOne(a->get(), Request(verbs::Opcode::kRead, stats_a, 0, 64));
  EXPECT_TRUE(own.ok()) << own.ToStatus();

  // A key dies with its connection: actor 1's key after it reconnected.
  auto first = Connect(Role::kActor, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  const verbs::RemoteRegion old_slots = *(*first)->Region(RegionKind::kSlots);
  ASSERT_TRUE((*first)->Reconnect((*first)->generation(), absl::UnavailableError("test")).ok());
  ExpectRefused(first->get(), Request(verbs::Opcode::kWrite, old_slots, 0, 64),
                "WRITE with the key of the actor's previous connection");
  InsertAndWait(50);
}

TEST_F(AdversarialTest, AnActorCannotUseAnotherLeasesKeys) {
  auto victim = Connect(Role::kActor, 2);
  ASSERT_TRUE(victim.ok()) << victim.status();
  std::memset(buffer_->data(), 0xee, 4096);
  for (RegionKind kind : {RegionKind::kSlots, RegionKind::kCommits, RegionKind::kActors}) {
    auto forger = Connect(Role::kActor, 3);
    ASSERT_TRUE(forger.ok()) << forger.status();
    const verbs::RemoteRegion theirs = *(*victim)->Region(kind);
    ExpectRefused(forger->get(), Request(verbs::Opcode::kWrite, theirs, 0, 8),
                  absl::StrCat("WRITE with actor 2's ", protocol::RegionKindName(kind), " key"));
  }
  // Nothing forged reached the server: no torn or overrun slot, and the
  // victim's connection still works.
  InsertAndWait(50);
  absl::StatusOr<StatsBlock> s = monitor_->Stats();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->torn_slots, 0u);
  EXPECT_EQ(s->overrun_slots, 0u);
  const verbs::Completion read = PostOne(
      victim->get(), Request(verbs::Opcode::kRead, *(*victim)->Region(RegionKind::kLeases), 0, 64));
  EXPECT_TRUE(read.ok()) << read.ToStatus();
}

TEST_F(AdversarialTest, AForgingMonitorIsRefusedByTheProvider) {
  // A learner's slot key (READ) and the monitor's own stats key (READ only).
  auto learner = ConnectLearner(/*learner_placement=*/true);
  ASSERT_TRUE(learner.ok()) << learner.status();
  const verbs::RemoteRegion slots = *(*learner)->Region(RegionKind::kSlots);
  {
    auto forger = Connect(Role::kMonitor);
    ASSERT_TRUE(forger.ok());
    EXPECT_EQ((*forger)->Region(RegionKind::kSlots).status().code(),
              absl::StatusCode::kFailedPrecondition);
    ExpectRefused(forger->get(), Request(verbs::Opcode::kRead, slots, 0, 64),
                  "a monitor READs slots with the learner's key");
  }
  {
    auto forger = Connect(Role::kMonitor);
    ASSERT_TRUE(forger.ok());
    std::memset(buffer_->data(), 0xee, 64);
    ExpectRefused(forger->get(),
                  Request(verbs::Opcode::kWrite, *(*forger)->Region(RegionKind::kStats), 0, 64),
                  "a monitor WRITEs the stats region");
  }
  InsertAndWait(50);
  absl::StatusOr<StatsBlock> s = monitor_->Stats();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->capacity, 4096u) << "the stats region was overwritten";
  EXPECT_TRUE(server_->Running());
}

TEST_F(AdversarialTest, OnlyALearnerPlacementLearnerReadsTheSlots) {
  const uint32_t lease = honest_session_->directory().lease;
  const protocol::LayoutConfig config = honest_session_->config();
  const uint64_t slot = protocol::LeaseSlotIndex(config, lease, 0);
  verbs::RemoteRegion placement_slots;
  {
    // The learner placement: READs the honest actor's first slot, its
    // commit word and the journal.
    auto learner = ConnectLearner(/*learner_placement=*/true);
    ASSERT_TRUE(learner.ok()) << learner.status();
    placement_slots = *(*learner)->Region(RegionKind::kSlots);
    std::memset(buffer_->data(), 0, config.slot_size);
    ASSERT_TRUE(PostOne(learner->get(), Request(verbs::Opcode::kRead, placement_slots,
                                                slot * config.slot_size, config.slot_size))
                    .ok());
    EXPECT_EQ(protocol::VerifySlot(buffer_->data(), config.slot_size, 0), protocol::SlotCheck::kOk);
    const verbs::RemoteRegion commits = *(*learner)->Region(RegionKind::kCommits);
    ASSERT_TRUE(PostOne(learner->get(), Request(verbs::Opcode::kRead, commits, slot * 8, 8)).ok());
    uint64_t commit = 0;
    std::memcpy(&commit, buffer_->data(), sizeof(commit));
    EXPECT_EQ(commit, protocol::CommitValue(0));
    const verbs::RemoteRegion leases = *(*learner)->Region(RegionKind::kLeases);
    ASSERT_GE(leases.length, 64u);  // the journal is at its end
    EXPECT_TRUE(
        PostOne(learner->get(), Request(verbs::Opcode::kRead, leases, leases.length - 64, 64))
            .ok());
  }
  // The buffer placement (its successor): no slot, commit-word or journal
  // range, nor a key to them.
  auto learner = ConnectLearner(/*learner_placement=*/false);
  ASSERT_TRUE(learner.ok()) << learner.status();
  for (RegionKind kind : {RegionKind::kSlots, RegionKind::kCommits, RegionKind::kLeases}) {
    EXPECT_FALSE((*learner)->directory().Has(kind)) << protocol::RegionKindName(kind);
    EXPECT_EQ((*learner)->Region(kind).status().code(), absl::StatusCode::kFailedPrecondition)
        << protocol::RegionKindName(kind);
  }
  EXPECT_TRUE((*learner)->directory().Has(RegionKind::kStaging));
  // Other connections' slot keys: the honest actor's (live, bound to its
  // queue pair), then the previous learner's.
  ExpectRefused(learner->get(),
                Request(verbs::Opcode::kRead, *honest_session_->Region(RegionKind::kSlots), 0, 64),
                "a buffer-placement learner READs slots with the actor's key");
  ASSERT_TRUE((*learner)->Reconnect((*learner)->generation(), absl::UnavailableError("test")).ok());
  ExpectRefused(learner->get(),
                Request(verbs::Opcode::kRead, placement_slots, slot * config.slot_size, 64),
                "a buffer-placement learner READs slots with the previous learner's key");
  InsertAndWait(50);
  EXPECT_TRUE(server_->Running());
}

TEST_F(AdversarialTest, AMaliciousLearnerIsCountedAndTheCoreCarriesOn) {
  InsertAndWait(200);
  auto learner = Connect(Role::kLearner);
  ASSERT_TRUE(learner.ok()) << learner.status();
  auto reader = learner::BatchReader::Create(learner->get(), {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto priorities = learner::PriorityWriter::Create(learner->get());
  ASSERT_TRUE(priorities.ok()) << priorities.status();
  const protocol::LayoutConfig config = (*learner)->config();

  // Batches 0 and 1: every priority NaN, then every one infinite.
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    absl::StatusOr<learner::StagedBatch> batch = (*reader)->Next(absl::Seconds(20));
    ASSERT_TRUE(batch.ok()) << batch.status();
    const std::vector<float> values(batch->size(), bad);
    ASSERT_TRUE((*priorities)->Write(*batch, values).ok());
  }
  ASSERT_TRUE((*priorities)->Flush().ok());
  absl::StatusOr<StatsBlock> s = monitor_->WaitUntil(
      "the invalid priority records counted",
      [](const StatsBlock& s) { return s.priority_updates_invalid >= 2 * kBatchSize; });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->priority_updates_applied, 0u);

  // Batch 2: an oversized entry (more records than a batch holds, with a
  // checksum that matches them); batch 3: a malformed one (bad checksum).
  const verbs::RemoteRegion mailbox = *(*learner)->Region(RegionKind::kMailbox);
  const uint64_t stride = protocol::MailboxEntryStride(config);
  for (uint64_t n : {uint64_t{2}, uint64_t{3}}) {
    absl::StatusOr<learner::StagedBatch> batch = (*reader)->Next(absl::Seconds(20));
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_EQ(batch->batch_number(), n);
    uint8_t* entry = buffer_->data();
    std::vector<protocol::PriorityRecord> records(batch->size());
    for (uint32_t i = 0; i < batch->size(); ++i) {
      records[i] = {batch->entry(i).slot_sequence, batch->entry(i).slot_index, 1.0f};
    }
    ASSERT_TRUE(protocol::EncodePriorityUpdate(config, n, batch->epoch(), batch->incarnation(),
                                               records, absl::MakeSpan(entry, stride))
                    .ok());
    protocol::MailboxHeader header;
    std::memcpy(&header, entry, sizeof(header));
    if (n == 2) {
      header.count = 1000 * kBatchSize;
      std::memcpy(entry, &header, sizeof(header));
      header.checksum = protocol::MailboxChecksum(config, entry, header.count);
    } else {
      header.checksum ^= 0x5a5a;
    }
    std::memcpy(entry, &header, sizeof(header));
    const uint64_t at = protocol::MailboxEntryOffset(config, n);
    verbs::WorkRequest body = Request(verbs::Opcode::kWrite, mailbox, at,
                                      static_cast<uint32_t>(protocol::MailboxCommitOffset(config)));
    verbs::WorkRequest commit =
        Request(verbs::Opcode::kWrite, mailbox, at + protocol::MailboxCommitOffset(config), 8);
    commit.local_addr = entry + protocol::MailboxCommitOffset(config);
    ASSERT_TRUE(PostOne(learner->get(), body).ok());
    ASSERT_TRUE(PostOne(learner->get(), commit).ok());
    const uint64_t rejects = n == 2 ? 1 : 2;
    s = monitor_->WaitUntil("the bad mailbox entry rejected", [rejects](const StatsBlock& s) {
      return s.mailbox_rejects >= rejects;
    });
    ASSERT_TRUE(s.ok()) << s.status();
  }
  // A WRITE beyond the mailbox is refused by the provider.
  ExpectRefused(learner->get(), Request(verbs::Opcode::kWrite, mailbox, mailbox.length - 8, 64),
                "a learner WRITE past the end of the mailbox");

  // The core carries on: the honest actor's transitions are ingested.
  InsertAndWait(100);
  EXPECT_TRUE(server_->Running());
  // The server warned about the invalid priorities in its log, and
  // replay_top shows the warning.
  EXPECT_TRUE(testing::WaitFor([&] {
    return absl::StrContains(server_->LogTail(100000), "every one was invalid (NaN, infinite");
  })) << server_->LogTail();
  absl::StatusOr<testing::CommandResult> top = testing::RunCommand(
      {kReplayTop, "--provider=" + testing::TestProviderName(), "--server=" + server_->address(),
       absl::StrCat("--auth_token=", kToken), "--once", "--interval_s=0.2"});
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->exit_status, 0) << top->err;
  EXPECT_TRUE(
      absl::StrContains(top->out, "were invalid (NaN, infinite, negative or not of the batch)"))
      << top->out;
}

}  // namespace
}  // namespace dreplay::tests
