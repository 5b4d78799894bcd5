// Copyright dreplay authors.
//
// The replay service end to end across processes: the real replay_server
// binary, several actor writers (threads, each its own provider and queue
// pair) and a learner (batch reader + priority writer) in this process.

#include <cstdint>
#include <map>
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
using protocol::Role;
using protocol::StatsBlock;
using testing::PayloadTag;
using testing::SoftProvider;
using testing::TaggedPayload;

constexpr int kWriters = 4;
constexpr uint64_t kPerWriter = 1900;
constexpr uint32_t kPayloadBytes = 128;
constexpr uint32_t kMaxBatch = 24;  // does not divide kPerWriter: partial flushes too
constexpr absl::Duration kBatchTimeout = absl::Seconds(20);
// Tags: writer w's transition i is (w << 32) | i.
constexpr int kTagShift = 32;

uint64_t Tag(int writer, uint64_t i) {
  return (uint64_t{static_cast<uint32_t>(writer)} << kTagShift) | i;
}

// Server flags: a lease of 2048 slots per writer, room for every transition
// (no slot is ever reused, so (slot, sequence) names one transition for the
// whole test).
std::vector<std::string> ServerFlags() {
  return {"--capacity=8192",
          "--slot_size=168",
          "--batch_size=16",
          "--staging_depth=4",
          "--actor_ids=8",
          "--leases=4",
          "--heartbeat_interval_s=0.1",
          "--stats_interval_s=0",
          "--seed=3"};
}

// What the learner saw, checked as it goes.
struct Seen {
  // Keyed by (slot index, sequence): sequences are per lease.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> tag_of_sequence;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> sequence_of_tag;
  uint64_t batches = 0;
  uint64_t entries = 0;
};

// Checks one batch: every entry a valid transition of a writer, the
// sequence <-> transition mapping one to one across batches.
void CheckBatch(const learner::StagedBatch& batch, Seen* seen) {
  ASSERT_GT(batch.size(), 0u);
  for (uint32_t i = 0; i < batch.size(); ++i) {
    const protocol::BatchEntry& e = batch.entry(i);
    const protocol::SlotHeader& h = batch.slot_header(i);
    ASSERT_EQ(h.sequence, e.slot_sequence) << "batch " << batch.batch_number() << " entry " << i;
    ASSERT_GT(e.priority_alpha, 0.0f);
    ASSERT_GT(batch.weight(i), 0.0f);
    ASSERT_LE(batch.weight(i), 1.0f);
    const absl::Span<const uint8_t> p = batch.payload(i);
    ASSERT_EQ(p.size(), kPayloadBytes);
    const uint64_t tag = PayloadTag(p.data(), kPayloadBytes);
    ASSERT_NE(tag, ~uint64_t{0}) << "payload of sequence " << e.slot_sequence << " corrupted";
    const uint64_t writer = tag >> kTagShift;
    ASSERT_LT(writer, static_cast<uint64_t>(kWriters));
    ASSERT_LT(tag & ((uint64_t{1} << kTagShift) - 1), kPerWriter);
    ASSERT_EQ(h.actor_id, writer) << "sequence " << e.slot_sequence;
    const std::pair<uint64_t, uint64_t> key{e.slot_index, e.slot_sequence};
    const auto [t, new_sequence] = seen->tag_of_sequence.emplace(key, tag);
    ASSERT_EQ(t->second, tag) << "sequence " << e.slot_sequence << " holds two transitions";
    const auto [s, new_tag] = seen->sequence_of_tag.emplace(tag, key);
    ASSERT_EQ(s->second, key) << "transition " << tag << " was ingested under two sequences";
  }
  ++seen->batches;
  seen->entries += batch.size();
}

TEST(ServiceTest, EveryCommittedTransitionIsIngestedOnceAndSampledBatchesHoldOnlyValidOnes) {
  testing::ServerProcessOptions options;
  options.flags = ServerFlags();
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
      testing::ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();

  auto learner_host = SoftProvider();
  auto learner_session =
      ClientSession::Connect(learner_host.get(), testing::ClientOptions(**server, Role::kLearner));
  ASSERT_TRUE(learner_session.ok()) << learner_session.status();
  auto reader = learner::BatchReader::Create(learner_session->get(), {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto priorities = learner::PriorityWriter::Create(learner_session->get());
  ASSERT_TRUE(priorities.ok()) << priorities.status();

  // Writers, each on its own emulated host.
  std::vector<std::unique_ptr<verbs::Provider>> hosts;
  for (int w = 0; w < kWriters; ++w) hosts.push_back(SoftProvider());
  std::vector<absl::Status> writer_status(kWriters);
  std::vector<actor::ExperienceWriterStats> writer_stats(kWriters);
  std::atomic<int> writers_done{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      writer_status[w] = [&]() -> absl::Status {
        auto session = ClientSession::Connect(
            hosts[w].get(),
            testing::ClientOptions(**server, Role::kActor, static_cast<uint32_t>(w)));
        if (!session.ok()) return session.status();
        actor::ExperienceWriterOptions wo;
        wo.max_batch = kMaxBatch;
        auto writer = actor::ExperienceWriter::Create(session->get(), wo);
        if (!writer.ok()) return writer.status();
        for (uint64_t i = 0; i < kPerWriter; ++i) {
          const absl::Status s =
              (*writer)->Append(TaggedPayload(Tag(w, i), kPayloadBytes), 0.1f + (i % 13));
          if (!s.ok()) return s;
        }
        const absl::Status s = (*writer)->Flush();
        writer_stats[w] = (*writer)->stats();
        return s;
      }();
      ++writers_done;
    });
  }

  // The learner trains (answers every batch with new priorities) while the
  // writers insert, and some more after they are done.
  Seen seen;
  uint64_t batches_after_writers = 0;
  constexpr uint64_t kBatchesAfterWriters = 100;
  uint32_t priority_seed = 1;
  while (batches_after_writers < kBatchesAfterWriters) {
    if (writers_done.load() == kWriters) ++batches_after_writers;
    absl::StatusOr<learner::StagedBatch> batch = (*reader)->Next(kBatchTimeout);
    ASSERT_TRUE(batch.ok()) << batch.status() << "\nserver log:\n" << (*server)->LogTail();
    ASSERT_EQ(batch->epoch(), 1u);
    ASSERT_NO_FATAL_FAILURE(CheckBatch(*batch, &seen));
    std::vector<float> td(batch->size());
    for (float& p : td) {
      priority_seed = priority_seed * 1103515245u + 12345u;
      p = 0.01f + static_cast<float>(priority_seed % 1000) / 100.0f;
    }
    ASSERT_TRUE((*priorities)->Write(*batch, td).ok());
  }
  for (std::thread& t : writers) t.join();
  uint64_t committed = 0;
  for (int w = 0; w < kWriters; ++w) {
    ASSERT_TRUE(writer_status[w].ok()) << "writer " << w << ": " << writer_status[w];
    EXPECT_EQ(writer_stats[w].committed, kPerWriter);
    EXPECT_EQ(writer_stats[w].abandoned, 0u);
    EXPECT_EQ(writer_stats[w].reconnects, 0u);
    committed += writer_stats[w].committed;
  }
  ASSERT_TRUE((*priorities)->Flush().ok());

  // The stats region, READ by a monitor: every committed transition
  // ingested once, nothing dropped.
  auto monitor_host = SoftProvider();
  auto monitor = testing::StatsMonitor::Connect(monitor_host.get(), **server);
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  absl::StatusOr<StatsBlock> stats =
      (*monitor)->WaitUntil("every reserved sequence handled",
                            [&](const StatsBlock& s) { return s.ingest_cursor == committed; });
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->inserted, committed);
  EXPECT_EQ(stats->size, committed);
  EXPECT_EQ(stats->torn_slots, 0u);
  EXPECT_EQ(stats->overrun_slots, 0u);
  EXPECT_EQ(stats->mailbox_rejects, 0u);
  EXPECT_EQ(stats->priority_updates_invalid, 0u);
  EXPECT_GE(stats->batches_staged, seen.batches);
  EXPECT_EQ(stats->epoch, 1u);

  // The learner saw a good part of the memory, every sequence below the tail.
  EXPECT_GT(seen.sequence_of_tag.size(), committed / 10) << "distinct transitions sampled";
  for (const auto& [key, tag] : seen.tag_of_sequence) {
    EXPECT_LT(key.second, kPerWriter) << "a lease's sequence beyond what its writer committed";
  }
  EXPECT_EQ((*reader)->stats().bad_slots, 0u);
  EXPECT_EQ((*reader)->stats().reconnects, 0u);
  EXPECT_EQ((*reader)->stats().epoch_changes, 0u);
  EXPECT_EQ((*reader)->stats().redelivered, 0u);

  absl::StatusOr<int> exit_status = (*server)->Stop(SIGTERM, testing::kServerStopTimeout);
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  EXPECT_EQ(*exit_status, 0) << (*server)->LogTail();
}

}  // namespace
}  // namespace dreplay::tests
