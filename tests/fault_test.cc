// Copyright dreplay authors.
//
// Faulty actors against the real replay_server process: connections dropped
// mid-batch and WRITEs torn by the soft provider's fault injection, and an
// actor that commits corrupt slots. The server never inserts torn data (it
// counts the torn sequences), a reconnecting actor resumes in its own lease
// where the server says so (nothing lost, nothing ingested twice), the other
// actors and the learner carry on undisturbed, and the server keeps serving.

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
#include "learner_client/batch_reader.h"
#include "learner_client/priority_writer.h"
#include "protocol/layout.h"
#include "testing/in_process_service.h"
#include "testing/server_process.h"
#include "testing/stats_monitor.h"

namespace dreplay::tests {
namespace {

using client::ClientSession;
using protocol::RegionKind;
using protocol::Role;
using protocol::StatsBlock;
using testing::PayloadTag;
using testing::SoftProvider;
using testing::TaggedPayload;

constexpr uint32_t kPayloadBytes = 128;
constexpr int kGoodWriters = 3;
constexpr uint64_t kPerGoodWriter = 1200;
constexpr int kTagShift = 32;

// Actor ids.
constexpr uint32_t kDroppedActor = 3;
constexpr uint32_t kPrefixTornActor = 4;
constexpr uint32_t kOutOfOrderActor = 5;
constexpr uint32_t kForgingActor = 6;
constexpr uint32_t kLateActor = 7;

uint64_t Tag(uint32_t actor, uint64_t i) { return (uint64_t{actor} << kTagShift) | i; }

// The server: leases (16384 / 8 = 2048 slots each) large enough that no
// slot is reused during the test.
std::vector<std::string> ServerFlags() {
  return {"--capacity=16384",     "--slot_size=168", "--batch_size=16",
          "--staging_depth=4",    "--leases=8",      "--heartbeat_interval_s=0.1",
          "--stats_interval_s=0", "--seed=5"};
}

struct WriterRun {
  absl::Status status;
  actor::ExperienceWriterStats stats;
};

// Writes `batches` full batches of `max_batch` transitions as `actor_id`
// over a connection with `faults` (every connection of the session has
// them).
WriterRun RunWriter(verbs::Provider* host, const testing::ServerProcess& server, uint32_t actor_id,
                    const verbs::FaultOptions& faults, uint32_t max_batch, uint32_t batches) {
  WriterRun run;
  client::ClientSessionOptions options = testing::ClientOptions(server, Role::kActor, actor_id);
  options.qp.faults = faults;
  auto session = ClientSession::Connect(host, options);
  if (!session.ok()) {
    run.status = session.status();
    return run;
  }
  actor::ExperienceWriterOptions wo;
  wo.max_batch = max_batch;
  auto writer = actor::ExperienceWriter::Create(session->get(), wo);
  if (!writer.ok()) {
    run.status = writer.status();
    return run;
  }
  for (uint64_t i = 0; i < uint64_t{max_batch} * batches && run.status.ok(); ++i) {
    run.status = (*writer)->Append(TaggedPayload(Tag(actor_id, i), kPayloadBytes), 1.0f);
  }
  if (run.status.ok()) run.status = (*writer)->Flush();
  run.stats = (*writer)->stats();
  return run;
}

// An actor that follows the protocol but commits two corrupt slots: one
// whose payload no longer matches its checksum, one whose header names
// another sequence. Returns the first of the two sequences.
absl::StatusOr<uint64_t> CommitCorruptSlots(verbs::Provider* host,
                                            const testing::ServerProcess& server) {
  auto session =
      ClientSession::Connect(host, testing::ClientOptions(server, Role::kActor, kForgingActor));
  if (!session.ok()) return session.status();
  ClientSession* s = session->get();
  const protocol::LayoutConfig& c = s->config();
  constexpr uint32_t kSlots = 2;
  auto buffer = client::RegisteredBuffer::Create(
      host, uint64_t{kSlots} * c.slot_size + (kSlots + 1) * sizeof(uint64_t));
  if (!buffer.ok()) return buffer.status();
  uint8_t* slots = (*buffer)->data();
  auto* commits = reinterpret_cast<uint64_t*>(slots + uint64_t{kSlots} * c.slot_size);
  absl::StatusOr<int> sink = s->AddSink();
  if (!sink.ok()) return sink.status();
  absl::StatusOr<verbs::RemoteRegion> ring = s->Region(RegionKind::kSlots);
  absl::StatusOr<verbs::RemoteRegion> words = s->Region(RegionKind::kCommits);
  if (!ring.ok() || !words.ok()) return absl::InternalError("actor keys missing");
  // The forger's own lease, from where the handshake says to resume.
  const uint64_t q = s->directory().resume_sequence;
  const uint64_t lease_slots = protocol::LeaseSlots(c);
  absl::Status st;
  if (q % lease_slots + kSlots > lease_slots) {
    return absl::InternalError("the corrupt slots would wrap; the test's ring is too small");
  }

  const std::vector<uint8_t> payload = TaggedPayload(Tag(kForgingActor, 0), kPayloadBytes);
  // Slot q: sealed, then one payload byte flipped.
  st = protocol::SealSlot(slots, c.slot_size, q, kForgingActor, 1.0f, 0, payload.data(),
                          kPayloadBytes);
  if (!st.ok()) return st;
  slots[sizeof(protocol::SlotHeader) + 5] ^= 0xff;
  // Slot q + 1: whole, but sealed for another sequence.
  st = protocol::SealSlot(slots + c.slot_size, c.slot_size, q + 1 + c.capacity, kForgingActor, 1.0f,
                          0, payload.data(), kPayloadBytes);
  if (!st.ok()) return st;
  commits[0] = protocol::CommitValue(q);
  commits[1] = protocol::CommitValue(q + 1);

  verbs::WorkRequest writes[2];
  writes[0].wr_id = ClientSession::WrId(*sink, 2);
  writes[0].signaled = false;
  writes[0].local = (*buffer)->mr();
  writes[0].local_addr = slots;
  writes[0].length = kSlots * c.slot_size;
  writes[0].remote_addr = ring->addr + (q % lease_slots) * c.slot_size;
  writes[0].rkey = ring->rkey;
  writes[1] = writes[0];
  writes[1].wr_id = ClientSession::WrId(*sink, 3);
  writes[1].signaled = true;
  writes[1].local_addr = commits;
  writes[1].length = kSlots * sizeof(uint64_t);
  writes[1].remote_addr = words->addr + (q % lease_slots) * sizeof(uint64_t);
  writes[1].rkey = words->rkey;
  st = s->Post(absl::MakeConstSpan(writes, 2));
  if (st.ok()) st = s->Wait(*sink, writes[1].wr_id, absl::Seconds(20));
  if (!st.ok()) return st;
  return q;
}

// The learner: answers every batch, checks every entry. Runs until `stop`.
struct LearnerRun {
  absl::Status status;
  uint64_t batches = 0;
  uint64_t bad_entries = 0;
  std::string first_bad;
};

void RunLearner(verbs::Provider* host, const testing::ServerProcess& server,
                const std::atomic<bool>& stop, std::atomic<uint64_t>* batches, LearnerRun* run) {
  auto session = ClientSession::Connect(host, testing::ClientOptions(server, Role::kLearner));
  if (!session.ok()) {
    run->status = session.status();
    return;
  }
  auto reader = learner::BatchReader::Create(session->get(), {});
  auto priorities = learner::PriorityWriter::Create(session->get());
  if (!reader.ok() || !priorities.ok()) {
    run->status = reader.ok() ? priorities.status() : reader.status();
    return;
  }
  while (!stop) {
    absl::StatusOr<learner::StagedBatch> batch = (*reader)->Next(absl::Milliseconds(100));
    if (absl::IsDeadlineExceeded(batch.status())) continue;
    if (!batch.ok()) {
      run->status = batch.status();
      return;
    }
    for (uint32_t i = 0; i < batch->size(); ++i) {
      const absl::Span<const uint8_t> p = batch->payload(i);
      const uint64_t tag =
          p.size() == kPayloadBytes ? PayloadTag(p.data(), kPayloadBytes) : ~uint64_t{0};
      const protocol::SlotHeader& h = batch->slot_header(i);
      const bool ok = tag != ~uint64_t{0} && (tag >> kTagShift) == h.actor_id &&
                      h.actor_id != kForgingActor && h.sequence == batch->entry(i).slot_sequence;
      if (!ok && run->bad_entries++ == 0) {
        run->first_bad = absl::StrCat("batch ", batch->batch_number(), " entry ", i, ": sequence ",
                                      h.sequence, " actor ", h.actor_id, " tag ", tag);
      }
    }
    run->status = (*priorities)->Write(*batch, std::vector<float>(batch->size(), 0.5f));
    if (!run->status.ok()) return;
    ++run->batches;
    batches->store(run->batches);
  }
}

TEST(FaultTest, TornAndDroppedWritesAreNeverInsertedAndOtherClientsCarryOn) {
  testing::ServerProcessOptions options;
  options.flags = ServerFlags();
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
      testing::ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const testing::ServerProcess& srv = **server;

  // The learner samples throughout.
  auto learner_host = SoftProvider();
  std::atomic<bool> stop_learner{false};
  std::atomic<uint64_t> learner_batches{0};
  LearnerRun learner_run;
  std::thread learner(
      [&] { RunLearner(learner_host.get(), srv, stop_learner, &learner_batches, &learner_run); });

  // Well-behaved actors insert while the faulty ones fail.
  std::vector<std::unique_ptr<verbs::Provider>> good_hosts;
  for (int w = 0; w < kGoodWriters; ++w) good_hosts.push_back(SoftProvider());
  std::vector<WriterRun> good(kGoodWriters);
  std::vector<std::thread> good_writers;
  for (int w = 0; w < kGoodWriters; ++w) {
    good_writers.emplace_back([&, w] {
      good[w] = RunWriter(good_hosts[w].get(), srv, static_cast<uint32_t>(w), {}, 24,
                          kPerGoodWriter / 24);
    });
  }

  // 1. The connection drops mid-batch: each connection carries the control
  // block READ, then two requests per batch (slots WRITE, commits WRITE);
  // after 1 + 2 * 2 + 1 requests it is gone, so the third batch's slots are
  // written and its commit never is. The writer reconnects, gets its lease
  // back with the third batch's first sequence to resume at, and writes it
  // again: nothing is abandoned.
  auto faulty_host = SoftProvider();
  verbs::FaultOptions drop;
  drop.drop_after_ops = 1 + 2 * 2 + 1;
  const WriterRun dropped = RunWriter(faulty_host.get(), srv, kDroppedActor, drop, 4, 4);
  ASSERT_TRUE(dropped.status.ok()) << dropped.status;
  EXPECT_EQ(dropped.stats.committed, 4u * 4);
  EXPECT_EQ(dropped.stats.abandoned, 0u);
  EXPECT_EQ(dropped.stats.reconnects, 1u);

  // 2. A slot WRITE torn after its first half, in the middle of the slot's
  // payload (the queue pair dies): the third WRITE of every connection, i.e.
  // the second batch's slot. Its commit is never placed; after each
  // reconnection the batch is written again at the sequence the server
  // names, so every transition is committed once.
  verbs::FaultOptions prefix;
  prefix.tear = verbs::TearMode::kPrefix;
  prefix.tear_op_index = 2;
  const WriterRun torn = RunWriter(faulty_host.get(), srv, kPrefixTornActor, prefix, 1, 4);
  ASSERT_TRUE(torn.status.ok()) << torn.status;
  EXPECT_EQ(torn.stats.committed, 4u);
  EXPECT_EQ(torn.stats.abandoned, 0u);
  EXPECT_EQ(torn.stats.reconnects, 3u);

  // 3. A slots WRITE placed out of order (second half first, the first half
  // 10 ms later): its commit WRITE still lands after all of it.
  verbs::FaultOptions out_of_order;
  out_of_order.tear = verbs::TearMode::kOutOfOrder;
  out_of_order.tear_op_index = 0;
  const WriterRun reordered =
      RunWriter(faulty_host.get(), srv, kOutOfOrderActor, out_of_order, 8, 3);
  ASSERT_TRUE(reordered.status.ok()) << reordered.status;
  EXPECT_EQ(reordered.stats.committed, 8u * 3);
  EXPECT_EQ(reordered.stats.abandoned, 0u);

  // 4. Committed slots that fail their checks.
  absl::StatusOr<uint64_t> corrupt = CommitCorruptSlots(faulty_host.get(), srv);
  ASSERT_TRUE(corrupt.ok()) << corrupt.status();

  for (std::thread& t : good_writers) t.join();
  uint64_t good_committed = 0;
  for (int w = 0; w < kGoodWriters; ++w) {
    ASSERT_TRUE(good[w].status.ok()) << "actor " << w << ": " << good[w].status;
    EXPECT_EQ(good[w].stats.committed, kPerGoodWriter) << "actor " << w;
    EXPECT_EQ(good[w].stats.reconnects, 0u) << "actor " << w;
    EXPECT_EQ(good[w].stats.abandoned, 0u) << "actor " << w;
    good_committed += good[w].stats.committed;
  }

  // 5. The server keeps serving: a new actor inserts, the learner samples.
  auto late_host = SoftProvider();
  const WriterRun late = RunWriter(late_host.get(), srv, kLateActor, {}, 20, 5);
  ASSERT_TRUE(late.status.ok()) << late.status;

  const uint64_t expected_inserted = good_committed + dropped.stats.committed +
                                     torn.stats.committed + reordered.stats.committed +
                                     late.stats.committed;
  auto monitor_host = SoftProvider();
  auto monitor = testing::StatsMonitor::Connect(monitor_host.get(), srv);
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  absl::StatusOr<StatsBlock> stats =
      (*monitor)->WaitUntil("every reserved sequence handled", [&](const StatsBlock& s) {
        return s.inserted == expected_inserted && s.ingest_cursor == expected_inserted + 2;
      });
  ASSERT_TRUE(stats.ok()) << stats.status() << "\nserver log:\n" << srv.LogTail();
  EXPECT_EQ(stats->torn_slots, 2u);
  EXPECT_EQ(stats->overrun_slots, 0u);
  EXPECT_EQ(stats->size, expected_inserted);
  EXPECT_EQ(stats->ingest_cursor, expected_inserted + 2);  // and the two torn

  // The learner was never handed anything torn, and still gets batches.
  const uint64_t batches_now = learner_batches.load();
  auto learner_progress = (*monitor)->WaitUntil(
      "the learner keeps training",
      [&](const StatsBlock&) { return learner_batches.load() >= batches_now + 20; });
  stop_learner = true;
  learner.join();
  ASSERT_TRUE(learner_run.status.ok()) << learner_run.status;
  ASSERT_TRUE(learner_progress.ok()) << learner_progress.status();
  EXPECT_EQ(learner_run.bad_entries, 0u) << learner_run.first_bad;
  EXPECT_GT(learner_run.batches, 0u);
  EXPECT_TRUE((*server)->Running());
}

}  // namespace
}  // namespace dreplay::tests
