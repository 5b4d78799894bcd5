// Copyright dreplay authors.
//
// Fault injection of the soft provider: dropped connections (after N
// requests or N payload bytes), stalls, and torn WRITEs.

#include <cstring>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "verbs/soft/provider.h"
#include "verbs/soft/test_util.h"

namespace dreplay::verbs {
namespace {

using ::dreplay::verbs::testing::Buffer;
using ::dreplay::verbs::testing::ConnectPair;
using ::dreplay::verbs::testing::kTestTimeout;
using ::dreplay::verbs::testing::MakeBuffer;
using ::dreplay::verbs::testing::PollCompletions;
using ::dreplay::verbs::testing::PollUntilError;
using ::dreplay::verbs::testing::QpPair;
using ::dreplay::verbs::testing::Read;
using ::dreplay::verbs::testing::Write;

constexpr uint32_t kRemoteAccess = kLocalWrite | kRemoteRead | kRemoteWrite;
constexpr size_t kSlot = 1024;
constexpr int kSlots = 8;

class SoftFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = *CreateSoftProvider(ProviderOptions{});
    server_ = *CreateSoftProvider(ProviderOptions{});
    source_ = *MakeBuffer(client_.get(), kSlots * kSlot, kLocalWrite);
    view_ = *MakeBuffer(client_.get(), kSlots * kSlot, kLocalWrite);
    remote_ = *MakeBuffer(server_.get(), kSlots * kSlot, kRemoteAccess);
    for (size_t i = 0; i < kSlots * kSlot; ++i) {
      source_->data()[i] = static_cast<uint8_t>(1 + i % 251);
    }
  }

  QpPair Connect(const FaultOptions& faults) {
    QueuePairOptions options;
    options.faults = faults;
    auto pair = ConnectPair(client_.get(), server_.get(), options, {});
    EXPECT_TRUE(pair.ok()) << pair.status();
    return pair.ok() ? std::move(*pair) : QpPair{};
  }

  // Reads the whole remote buffer through a fresh, fault-free connection.
  void ReadRemote() {
    QpPair reader = Connect(FaultOptions{});
    ASSERT_NE(reader.client, nullptr);
    WorkRequest wr = Read(1, view_.get(), 0, kSlots * kSlot, *remote_, 0);
    ASSERT_TRUE(reader.client->PostSend({&wr, 1}).ok());
    auto done = PollCompletions(reader.client.get(), 1);
    ASSERT_EQ(done.size(), 1u);
    ASSERT_TRUE(done[0].ok()) << done[0].ToStatus();
  }

  bool SlotEquals(int slot, size_t from, size_t to, bool written) {
    for (size_t i = from; i < to; ++i) {
      const uint8_t expected = written ? source_->data()[slot * kSlot + i] : 0;
      if (view_->data()[slot * kSlot + i] != expected) return false;
    }
    return true;
  }

  // One WRITE of a whole slot per slot index.
  std::vector<WorkRequest> SlotWrites(int count) {
    std::vector<WorkRequest> wrs;
    for (int i = 0; i < count; ++i) {
      wrs.push_back(Write(i, source_.get(), i * kSlot, kSlot, *remote_, i * kSlot));
    }
    return wrs;
  }

  std::unique_ptr<Provider> client_;
  std::unique_ptr<Provider> server_;
  std::unique_ptr<Buffer> source_;
  std::unique_ptr<Buffer> view_;
  std::unique_ptr<Buffer> remote_;
};

TEST_F(SoftFaultTest, DropAfterOpsDeliversExactlyThatManyRequests) {
  FaultOptions faults;
  faults.drop_after_ops = 3;
  QpPair pair = Connect(faults);
  ASSERT_NE(pair.client, nullptr);
  ASSERT_TRUE(pair.client->PostSend(SlotWrites(5)).ok());
  auto done = PollUntilError(pair.client.get());
  ASSERT_EQ(done.size(), 5u);
  // The sender cannot know which requests landed: the first outstanding one
  // reports the lost connection, the rest are flushed.
  EXPECT_EQ(done[0].status, WcStatus::kRetryExceeded);
  EXPECT_NE(done[0].detail.find("fault injection"), std::string::npos);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(done[i].status, WcStatus::kFlushed);
  PollUntilError(pair.server.get());
  EXPECT_EQ(pair.server->state(), QpState::kError);
  ReadRemote();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(SlotEquals(i, 0, kSlot, true)) << i;
  for (int i = 3; i < 5; ++i) EXPECT_TRUE(SlotEquals(i, 0, kSlot, false)) << i;
}

TEST_F(SoftFaultTest, DropAfterBytesCutsAWriteShort) {
  FaultOptions faults;
  faults.drop_after_bytes = kSlot + 300;
  QpPair pair = Connect(faults);
  ASSERT_NE(pair.client, nullptr);
  ASSERT_TRUE(pair.client->PostSend(SlotWrites(3)).ok());
  auto done = PollUntilError(pair.client.get());
  ASSERT_EQ(done.size(), 3u);
  PollUntilError(pair.server.get());
  EXPECT_EQ(pair.server->state(), QpState::kError);
  ReadRemote();
  // Slot 0 whole; slot 1 only its first 300 bytes (a partial placement, as a
  // NIC may leave when a link fails mid-message); slot 2 untouched.
  EXPECT_TRUE(SlotEquals(0, 0, kSlot, true));
  EXPECT_TRUE(SlotEquals(1, 0, 300, true));
  EXPECT_TRUE(SlotEquals(1, 300, kSlot, false));
  EXPECT_TRUE(SlotEquals(2, 0, kSlot, false));
}

TEST_F(SoftFaultTest, StallHoldsLaterRequestsForTheGivenTime) {
  constexpr absl::Duration kStall = absl::Milliseconds(200);
  FaultOptions faults;
  faults.stall_after_ops = 2;
  faults.stall_for = kStall;
  QpPair pair = Connect(faults);
  ASSERT_NE(pair.client, nullptr);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(pair.client->PostSend(SlotWrites(4)).ok());
  std::vector<absl::Duration> when;
  const absl::Time deadline = start + kTestTimeout;
  Completion c;
  while (when.size() < 4 && absl::Now() < deadline) {
    if (pair.client->Poll({&c, 1}) == 1) {
      ASSERT_TRUE(c.ok()) << c.ToStatus();
      ASSERT_EQ(c.wr_id, when.size());
      when.push_back(absl::Now() - start);
    }
  }
  ASSERT_EQ(when.size(), 4u);
  EXPECT_GE(when[2], kStall);
  EXPECT_GE(when[3], kStall);
  // The first two did not wait for the stall.
  EXPECT_LT(when[1], when[2] - kStall / 2);
  EXPECT_EQ(pair.client->state(), QpState::kReady);
  ReadRemote();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(SlotEquals(i, 0, kSlot, true));
}

TEST_F(SoftFaultTest, TornPrefixPlacesHalfAWriteAndKillsTheQueuePair) {
  FaultOptions faults;
  faults.tear = TearMode::kPrefix;
  faults.tear_op_index = 1;
  QpPair pair = Connect(faults);
  ASSERT_NE(pair.client, nullptr);
  ASSERT_TRUE(pair.client->PostSend(SlotWrites(3)).ok());
  auto done = PollUntilError(pair.client.get());
  ASSERT_EQ(done.size(), 3u);
  EXPECT_FALSE(done[1].ok());
  EXPECT_FALSE(done[2].ok());
  EXPECT_EQ(pair.client->state(), QpState::kError);
  PollUntilError(pair.server.get());
  ReadRemote();
  EXPECT_TRUE(SlotEquals(0, 0, kSlot, true));
  EXPECT_TRUE(SlotEquals(1, 0, kSlot / 2, true));
  EXPECT_TRUE(SlotEquals(1, kSlot / 2, kSlot, false));
  EXPECT_TRUE(SlotEquals(2, 0, kSlot, false));
}

// The torn WRITE places its second half first; an observer on another queue
// pair sees the tail without the head; later the head lands and the WRITE
// completes normally.
TEST_F(SoftFaultTest, TornOutOfOrderWriteShowsTheTailBeforeTheHead) {
  constexpr absl::Duration kGap = absl::Milliseconds(150);
  FaultOptions faults;
  faults.tear = TearMode::kOutOfOrder;
  faults.tear_op_index = 0;
  faults.stall_for = kGap;
  QpPair writer = Connect(faults);
  QpPair observer = Connect(FaultOptions{});
  ASSERT_NE(writer.client, nullptr);
  ASSERT_NE(observer.client, nullptr);
  const absl::Time start = absl::Now();
  WorkRequest wr = SlotWrites(1)[0];
  ASSERT_TRUE(writer.client->PostSend({&wr, 1}).ok());
  bool saw_tail_without_head = false;
  bool saw_head_without_tail = false;
  bool complete = false;
  const absl::Time deadline = start + kTestTimeout;
  while (!complete && absl::Now() < deadline) {
    WorkRequest read = Read(1, view_.get(), 0, kSlot, *remote_, 0);
    ASSERT_TRUE(observer.client->PostSend({&read, 1}).ok());
    auto done = PollCompletions(observer.client.get(), 1);
    ASSERT_EQ(done.size(), 1u);
    ASSERT_TRUE(done[0].ok());
    const bool head = SlotEquals(0, 0, kSlot / 2, true);
    const bool tail = SlotEquals(0, kSlot / 2, kSlot, true);
    if (tail && !head) saw_tail_without_head = true;
    if (head && !tail) saw_head_without_tail = true;
    complete = head && tail;
  }
  EXPECT_TRUE(complete);
  EXPECT_TRUE(saw_tail_without_head);
  EXPECT_FALSE(saw_head_without_tail);
  auto done = PollCompletions(writer.client.get(), 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].ok()) << done[0].ToStatus();
  EXPECT_GE(absl::Now() - start, kGap);
  EXPECT_EQ(writer.client->state(), QpState::kReady);
}

// A stall injected into one queue pair holds that queue pair's requests,
// not the link it shares with the other queue pairs to the same host.
TEST(SoftSharedLinkFaultTest, AStalledQueuePairDoesNotHoldTheSharedLink) {
  constexpr absl::Duration kStall = absl::Seconds(5);
  auto client = CreateSoftProvider(ProviderOptions{});
  ASSERT_TRUE(client.ok()) << client.status();
  auto server = CreateSoftProvider(ProviderOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  QueuePairOptions link_only;
  link_only.link.bandwidth_gbps = 10;
  QueuePairOptions stalling = link_only;
  stalling.faults.stall_after_ops = 1;
  stalling.faults.stall_for = kStall;
  auto stalled = ConnectPair(client->get(), server->get(), stalling);
  ASSERT_TRUE(stalled.ok()) << stalled.status();
  auto other = ConnectPair(client->get(), server->get(), link_only);
  ASSERT_TRUE(other.ok()) << other.status();
  auto local = MakeBuffer(client->get(), 4096, kLocalWrite);
  ASSERT_TRUE(local.ok());
  auto remote = MakeBuffer(server->get(), 4096, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(remote.ok());

  const WorkRequest two[2] = {Write(1, local->get(), 0, 512, **remote, 0),
                              Write(2, local->get(), 0, 512, **remote, 512)};
  ASSERT_TRUE(stalled->client->PostSend(two).ok());  // the second one stalls
  ASSERT_EQ(PollCompletions(stalled->client.get(), 1).size(), 1u);
  const absl::Time start = absl::Now();
  const WorkRequest wr = Write(3, local->get(), 0, 512, **remote, 1024);
  ASSERT_TRUE(other->client->PostSend({&wr, 1}).ok());
  const std::vector<Completion> done = PollCompletions(other->client.get(), 1, kStall);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].ok()) << done[0].ToStatus();
  EXPECT_LT(absl::Now() - start, kStall / 2);
}

}  // namespace
}  // namespace dreplay::verbs
