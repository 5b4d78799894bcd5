// Copyright dreplay authors.
//
// The replay server process and an actor on the same host, linked by shared
// memory (--soft_transport=auto): the actor's slot and commit-word segments
// are mapped writable into the actor's process. The first session's
// connection closes while its process keeps the mappings, and a second
// session with the same actor id takes the lease back (the server grants it
// only once the first connection is gone); the first writes on through its
// kept mappings, sealing slots with valid checksums and committing them, as
// a stalled or zombie process would. None of that is ingested,
// and the new session's transitions are ingested and stay intact: the
// server's queue pair of the first session took the memory behind its
// mappings with it (verbs/soft/shared_path.h, "Revocation"), as a device's
// memory windows die with their queue pair.

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gtest/gtest.h"
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
using testing::TaggedPayload;

constexpr uint32_t kActorId = 1;
constexpr uint32_t kPayloadBytes = 128;
constexpr uint32_t kSlotSize = 168;
constexpr uint64_t kLeaseSlots = 512;  // --capacity / --leases: whole pages per lease
constexpr uint64_t kBatch = 8;
// Tags: the first session's, the second's, and the stale writes'.
constexpr uint64_t kFirstTags = 1000;
constexpr uint64_t kSecondTags = 2000;
constexpr uint64_t kStaleTags = 0xbad000;
constexpr absl::Duration kMappingTimeout = absl::Seconds(20);

// The writable same-host mappings in this process: start address -> length.
std::map<uintptr_t, size_t> WritableSharedMappings() {
  std::map<uintptr_t, size_t> out;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (!absl::StrContains(line, "memfd:dreplay-shm ") || !absl::StrContains(line, " rw-s "))
      continue;
    const std::vector<std::string> range = absl::StrSplit(line.substr(0, line.find(' ')), '-');
    uint64_t begin = 0, end = 0;
    if (range.size() == 2 && absl::SimpleHexAtoi(range[0], &begin) &&
        absl::SimpleHexAtoi(range[1], &end)) {
      out[begin] = end - begin;
    }
  }
  return out;
}

class SameHostTakeoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::ServerProcessOptions options;
    options.provider = "soft";
    options.flags = {"--capacity=4096",
                     absl::StrCat("--slot_size=", kSlotSize),
                     absl::StrCat("--batch_size=", kBatch),
                     "--staging_depth=4",
                     "--leases=8",
                     "--soft_transport=auto",
                     "--heartbeat_interval_s=0.1",
                     "--stats_interval_s=0"};
    auto server = testing::ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    host_ = testing::SoftProvider();
    auto monitor = testing::StatsMonitor::Connect(host_.get(), *server_);
    ASSERT_TRUE(monitor.ok()) << monitor.status();
    monitor_ = std::move(*monitor);
  }

  absl::StatusOr<std::unique_ptr<ClientSession>> Connect(Role role, bool learner_placement) {
    client::ClientSessionOptions o =
        testing::ClientOptions(*server_, role, role == Role::kActor ? kActorId : 0);
    o.learner_placement = learner_placement;
    return ClientSession::Connect(host_.get(), o);
  }

  // Appends `count` transitions tagged from `first_tag` and flushes them.
  static void Append(actor::ExperienceWriter* writer, uint64_t first_tag, uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) {
      ASSERT_TRUE(writer->Append(TaggedPayload(first_tag + i, kPayloadBytes), 1.0f).ok());
    }
    ASSERT_TRUE(writer->Flush().ok());
  }

  void WaitInserted(uint64_t expected, const std::string& what) {
    absl::StatusOr<StatsBlock> s = monitor_->WaitUntil(
        what, [expected](const StatsBlock& s) { return s.inserted == expected; });
    ASSERT_TRUE(s.ok()) << s.status();
  }

  // Seals the sequences [from, to) with stale tags through the kept
  // mappings and commits them, as the lease's previous session would.
  void WriteStale(uint64_t from, uint64_t to) {
    for (uint64_t q = from; q < to; ++q) {
      const std::vector<uint8_t> payload = TaggedPayload(kStaleTags + q, kPayloadBytes);
      ASSERT_TRUE(protocol::SealSlot(stale_slots_ + (q % kLeaseSlots) * kSlotSize, kSlotSize, q,
                                     kActorId, 1.0f, 0, payload.data(), kPayloadBytes)
                      .ok());
      __atomic_store_n(&stale_commits_[q % kLeaseSlots], protocol::CommitValue(q),
                       __ATOMIC_RELEASE);
    }
  }

  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<verbs::Provider> host_;
  std::unique_ptr<testing::StatsMonitor> monitor_;
  char* stale_slots_ = nullptr;
  uint64_t* stale_commits_ = nullptr;
};

TEST_F(SameHostTakeoverTest, AClosedSessionsKeptMappingsWriteNothingThatIsIngested) {
  // The first session writes until its slot and commit-word segments are
  // mapped into this process.
  const std::map<uintptr_t, size_t> before = WritableSharedMappings();
  auto first = Connect(Role::kActor, false);
  ASSERT_TRUE(first.ok()) << first.status();
  auto first_writer = actor::ExperienceWriter::Create(first->get(), {});
  ASSERT_TRUE(first_writer.ok()) << first_writer.status();
  std::map<uintptr_t, size_t> mapped;
  uint64_t written = 0;
  const absl::Time deadline = absl::Now() + kMappingTimeout;
  while (mapped.size() < 2 && absl::Now() < deadline && written + kBatch < kLeaseSlots / 2) {
    Append(first_writer->get(), kFirstTags + written, kBatch);
    written += kBatch;
    mapped.clear();
    for (const auto& [at, length] : WritableSharedMappings()) {
      if (before.count(at) == 0) mapped[at] = length;
    }
  }
  ASSERT_EQ(mapped.size(), 2u) << "the lease was not mapped after " << written << " transitions";
  WaitInserted(written, "the first session's transitions ingested");

  // It keeps mappings of the same memory that outlive its queue pair.
  for (const auto& [at, length] : mapped) {
    void* kept = mremap(reinterpret_cast<void*>(at), 0, length, MREMAP_MAYMOVE);
    ASSERT_NE(kept, MAP_FAILED) << std::strerror(errno);
    if (length == kLeaseSlots * kSlotSize) stale_slots_ = static_cast<char*>(kept);
    if (length == kLeaseSlots * sizeof(uint64_t)) stale_commits_ = static_cast<uint64_t*>(kept);
  }
  ASSERT_NE(stale_slots_, nullptr);
  ASSERT_NE(stale_commits_, nullptr);

  // The first session's connection closes (its process lives on, with the
  // kept mappings); a second session with the same actor id takes the lease
  // back once the server has seen it go.
  const uint32_t first_lease = (*first)->directory().lease;
  first_writer->reset();
  first->reset();
  auto second = Connect(Role::kActor, false);
  ASSERT_TRUE(second.ok()) << second.status();
  const protocol::RegionDirectory& directory = (*second)->directory();
  ASSERT_EQ(directory.lease, first_lease);
  const uint64_t resume = directory.resume_sequence;
  ASSERT_EQ(resume, written);
  auto second_writer = actor::ExperienceWriter::Create(second->get(), {});
  ASSERT_TRUE(second_writer.ok()) << second_writer.status();

  // The first writes on ahead of the second, then over what the second
  // wrote and ahead of it again.
  WriteStale(resume, resume + 3 * kBatch);
  Append(second_writer->get(), kSecondTags, kBatch);
  WaitInserted(written + kBatch, "the second session's first batch ingested, nothing else");
  WriteStale(resume, resume + 4 * kBatch);
  Append(second_writer->get(), kSecondTags + kBatch, kBatch);
  WaitInserted(written + 2 * kBatch, "the second session's second batch ingested, nothing else");
  absl::StatusOr<StatsBlock> stats = monitor_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->inserted, written + 2 * kBatch);
  EXPECT_EQ(stats->torn_slots, 0u);
  EXPECT_EQ(stats->overrun_slots, 0u);

  // The lease holds both sessions' transitions as they wrote them.
  auto learner = Connect(Role::kLearner, /*learner_placement=*/true);
  ASSERT_TRUE(learner.ok()) << learner.status();
  const uint64_t end = resume + 2 * kBatch;
  auto buffer = client::RegisteredBuffer::Create(host_.get(), end * kSlotSize);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const uint64_t lease_base = protocol::LeaseSlotIndex((*learner)->config(), directory.lease, 0);
  ASSERT_TRUE((*learner)
                  ->ReadSync(RegionKind::kSlots, lease_base * kSlotSize,
                             static_cast<uint32_t>(end * kSlotSize), (*buffer)->mr(),
                             (*buffer)->data())
                  .ok());
  for (uint64_t q = 0; q < end; ++q) {
    const uint8_t* slot = (*buffer)->data() + q * kSlotSize;
    ASSERT_EQ(protocol::VerifySlot(slot, kSlotSize, q), protocol::SlotCheck::kOk) << q;
    const uint64_t tag = PayloadTag(slot + sizeof(protocol::SlotHeader), kPayloadBytes);
    EXPECT_EQ(tag, q < resume ? kFirstTags + q : kSecondTags + (q - resume)) << "sequence " << q;
  }
}

}  // namespace
}  // namespace dreplay::tests
