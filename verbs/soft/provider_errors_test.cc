// Copyright dreplay authors.
//
// Tests of the soft provider's access checks, errors and flushing, credit
// limits, connection setup and teardown. Data, ordering and atomicity:
// provider_test.cc.

#include "verbs/soft/provider.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verbs/soft/provider_fixture.h"
#include "verbs/soft/test_util.h"

namespace dreplay::verbs {
namespace {

using ::dreplay::verbs::testing::FetchAdd;
using ::dreplay::verbs::testing::kAllRemote;
using ::dreplay::verbs::testing::kTestTimeout;
using ::dreplay::verbs::testing::PollCompletions;
using ::dreplay::verbs::testing::PollUntilError;
using ::dreplay::verbs::testing::QpPair;
using ::dreplay::verbs::testing::Read;
using ::dreplay::verbs::testing::SoftProviderTest;
using ::dreplay::verbs::testing::Write;
using ::testing::HasSubstr;

struct AccessCase {
  const char* name;
  uint32_t access;  // of the remote region
  Opcode op;
  int64_t offset;  // from the remote region's start
  uint32_t length;
  bool bad_rkey;
  WcStatus expected;
};

class SoftProviderAccessTest : public SoftProviderTest,
                               public ::testing::WithParamInterface<AccessCase> {};

TEST_P(SoftProviderAccessTest, BadRemoteAccessFailsAndKillsOnlyThatQueuePair) {
  const AccessCase& tc = GetParam();
  QpPair victim = Connect();
  QpPair bystander = Connect();
  ASSERT_NE(victim.client, nullptr);
  ASSERT_NE(bystander.client, nullptr);
  auto local = Make(client_.get(), 8192, kLocalWrite);
  auto remote = Make(server_.get(), 4096, tc.access);
  auto good = Make(server_.get(), 4096, kAllRemote);
  WorkRequest wr;
  wr.wr_id = 11;
  wr.opcode = tc.op;
  wr.local = local->mr.get();
  wr.local_addr = local->data();
  wr.length = tc.length;
  wr.remote_addr = remote->addr() + tc.offset;
  wr.rkey = tc.bad_rkey ? remote->rkey() ^ 0x5a5a5a5a : remote->rkey();
  // Behind it: requests that must be flushed.
  WorkRequest later[3] = {Write(12, local.get(), 0, 8, *good, 0),
                          Read(13, local.get(), 0, 8, *good, 0),
                          Write(14, local.get(), 0, 8, *good, 0)};
  later[2].signaled = false;
  ASSERT_TRUE(victim.client->PostSend({&wr, 1}).ok());
  ASSERT_TRUE(victim.client->PostSend(later).ok());
  auto done = PollUntilError(victim.client.get());
  ASSERT_EQ(done.size(), 4u);
  EXPECT_EQ(done[0].wr_id, 11u);
  EXPECT_EQ(done[0].status, tc.expected) << WcStatusName(done[0].status) << ": " << done[0].detail;
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(done[i].wr_id, static_cast<uint64_t>(11 + i));
    EXPECT_EQ(done[i].status, WcStatus::kFlushed);
  }
  EXPECT_EQ(victim.client->state(), QpState::kError);
  EXPECT_FALSE(victim.client->error().ok());
  // Posting to a QP in error flushes.
  WorkRequest more = Write(15, local.get(), 0, 8, *good, 0);
  ASSERT_TRUE(victim.client->PostSend({&more, 1}).ok());
  auto flushed = PollCompletions(victim.client.get(), 1);
  ASSERT_EQ(flushed.size(), 1u);
  EXPECT_EQ(flushed[0].status, WcStatus::kFlushed);
  EXPECT_EQ(flushed[0].ToStatus().code(), absl::StatusCode::kAborted);
  // The responder's side of the QP dies too.
  PollUntilError(victim.server.get());
  EXPECT_EQ(victim.server->state(), QpState::kError);
  // Another QP to the same server still works.
  Completion c = RunOne(bystander.client.get(), Write(1, local.get(), 0, 64, *good, 0));
  EXPECT_TRUE(c.ok()) << c.ToStatus();
  EXPECT_EQ(bystander.client->state(), QpState::kReady);
}

TEST_F(SoftProviderTest, WhoeverPollsAnErrorCompletionFindsTheQueuePairInError) {
  // As on a device: the queue pair is in error by the time its error
  // completion can be polled (a caller checks state() right after it).
  auto local = Make(client_.get(), 64, kLocalWrite);
  auto remote = Make(server_.get(), 64, kAllRemote);
  for (int round = 0; round < 50; ++round) {
    QpPair pair = Connect();
    ASSERT_NE(pair.client, nullptr);
    std::vector<WorkRequest> wrs(64, Write(2, local.get(), 0, 8, *remote, 0));
    wrs[0] = Read(1, local.get(), 0, 8, *remote, 0);
    wrs[0].rkey ^= 0x5a5a5a5a;  // refused; the writes behind it are flushed
    ASSERT_TRUE(pair.client->PostSend(wrs).ok());
    Completion first;
    const absl::Time deadline = absl::Now() + kTestTimeout;
    while (pair.client->Poll(absl::MakeSpan(&first, 1)) == 0 && absl::Now() < deadline) {
    }
    ASSERT_EQ(first.wr_id, 1u) << "round " << round;
    ASSERT_EQ(first.status, WcStatus::kRemoteAccessError) << first.detail;
    ASSERT_EQ(pair.client->state(), QpState::kError) << "round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SoftProviderAccessTest,
    ::testing::Values(AccessCase{"WriteWithoutRemoteWrite", kLocalWrite | kRemoteRead,
                                 Opcode::kWrite, 0, 64, false, WcStatus::kRemoteAccessError},
                      AccessCase{"ReadWithoutRemoteRead", kLocalWrite | kRemoteWrite, Opcode::kRead,
                                 0, 64, false, WcStatus::kRemoteAccessError},
                      AccessCase{"AtomicWithoutRemoteAtomic", kAllRemote & ~kRemoteAtomic,
                                 Opcode::kFetchAdd, 0, 8, false, WcStatus::kRemoteAccessError},
                      AccessCase{"WriteWithWrongRkey", kAllRemote, Opcode::kWrite, 0, 64, true,
                                 WcStatus::kRemoteAccessError},
                      AccessCase{"ReadPastTheEnd", kAllRemote, Opcode::kRead, 4090, 64, false,
                                 WcStatus::kRemoteAccessError},
                      AccessCase{"WriteBeforeTheStart", kAllRemote, Opcode::kWrite, -8, 16, false,
                                 WcStatus::kRemoteAccessError}),
    [](const ::testing::TestParamInfo<AccessCase>& info) { return info.param.name; });

TEST_F(SoftProviderTest, LocalBufferOutsideItsRegionFailsWithProtectionError) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 64, kLocalWrite);
  auto remote = Make(server_.get(), 4096, kAllRemote);
  WorkRequest ok = Write(1, local.get(), 0, 8, *remote, 0);
  WorkRequest bad = Write(2, local.get(), 32, 64, *remote, 0);  // past end
  WorkRequest after = Write(3, local.get(), 0, 8, *remote, 0);
  WorkRequest wrs[3] = {ok, bad, after};
  ASSERT_TRUE(pair.client->PostSend(wrs).ok());
  auto done = PollUntilError(pair.client.get());
  ASSERT_EQ(done.size(), 3u);
  EXPECT_TRUE(done[0].ok());  // requests before the bad one complete
  EXPECT_EQ(done[1].status, WcStatus::kLocalProtectionError);
  EXPECT_EQ(done[2].status, WcStatus::kFlushed);
}

TEST_F(SoftProviderTest, ReadIntoARegionWithoutLocalWriteFails) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 64, kRemoteRead);
  auto remote = Make(server_.get(), 64, kAllRemote);
  Completion c = RunOne(pair.client.get(), Read(1, local.get(), 0, 8, *remote, 0));
  EXPECT_EQ(c.status, WcStatus::kLocalProtectionError);
}

TEST_F(SoftProviderTest, MalformedRequestsAreRefusedWhenPosted) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 64, kLocalWrite);
  auto remote = Make(server_.get(), 64, kAllRemote);
  WorkRequest atomic = FetchAdd(1, local.get(), 0, *remote, 0, 1);
  atomic.length = 4;
  EXPECT_EQ(pair.client->PostSend({&atomic, 1}).code(), absl::StatusCode::kInvalidArgument);
  WorkRequest recv_op = Write(2, local.get(), 0, 8, *remote, 0);
  recv_op.opcode = Opcode::kRecv;
  EXPECT_EQ(pair.client->PostSend({&recv_op, 1}).code(), absl::StatusCode::kInvalidArgument);
  WorkRequest no_region = Write(3, local.get(), 0, 8, *remote, 0);
  no_region.local = nullptr;
  EXPECT_EQ(pair.client->PostSend({&no_region, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pair.client->state(), QpState::kReady);
}

TEST_F(SoftProviderTest, FullSendQueueIsResourceExhaustedAndPostsNothing) {
  QueuePairOptions options;
  options.max_send_wr = 4;
  QpPair pair = Connect(options);
  ASSERT_NE(pair.client, nullptr);
  EXPECT_EQ(pair.client->max_send_wr(), 4);
  auto local = Make(client_.get(), 64, kLocalWrite);
  auto remote = Make(server_.get(), 64, kAllRemote);
  std::vector<WorkRequest> wrs(5, Write(1, local.get(), 0, 8, *remote, 0));
  EXPECT_EQ(pair.client->PostSend(wrs).code(), absl::StatusCode::kResourceExhausted);
  wrs.resize(4);
  EXPECT_TRUE(pair.client->PostSend(wrs).ok());
  EXPECT_EQ(PollCompletions(pair.client.get(), 4).size(), 4u);
}

TEST_F(SoftProviderTest, MaxRdAtomicIsTheMinimumOfBothSides) {
  QueuePairOptions client_options;
  client_options.max_rd_atomic = 8;
  QueuePairOptions server_options;
  server_options.max_rd_atomic = 3;
  QpPair pair = Connect(client_options, server_options);
  ASSERT_NE(pair.client, nullptr);
  EXPECT_EQ(pair.client->max_rd_atomic(), 3);
  EXPECT_EQ(pair.server->max_rd_atomic(), 3);
}

// With 10 ms round trips, 8 READs take about 4 round trips when only 2 may
// be outstanding, and about one when 8 may. (The lower bound is physics; the
// upper one leaves 15 ms for a busy machine.)
TEST_F(SoftProviderTest, ReadCreditsLimitOutstandingReads) {
  constexpr absl::Duration kOneWay = absl::Milliseconds(5);
  auto run = [&](int credits) -> absl::Duration {
    QueuePairOptions options;
    options.max_rd_atomic = credits;
    options.link.one_way_delay = kOneWay;
    QpPair pair = Connect(options);
    if (pair.client == nullptr) return absl::ZeroDuration();
    auto local = Make(client_.get(), 64, kLocalWrite);
    auto remote = Make(server_.get(), 64, kAllRemote);
    std::vector<WorkRequest> wrs;
    for (int i = 0; i < 8; ++i) wrs.push_back(Read(i, local.get(), 0, 8, *remote, 0));
    const absl::Time start = absl::Now();
    EXPECT_TRUE(pair.client->PostSend(wrs).ok());
    auto done = PollCompletions(pair.client.get(), 8);
    EXPECT_EQ(done.size(), 8u);
    return absl::Now() - start;
  };
  const absl::Duration rtt = 2 * kOneWay;
  const absl::Duration two = run(2);
  const absl::Duration eight = run(8);
  EXPECT_GE(two, 4 * rtt);
  EXPECT_GE(eight, rtt);
  EXPECT_LT(eight, rtt * 2.5);
}

TEST_F(SoftProviderTest, RejectedConnectionFailsWithTheReason) {
  auto listener = server_->Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  absl::StatusOr<Connection> result = absl::UnknownError("not run");
  std::thread connector(
      [&] { result = client_->Connect("127.0.0.1", (*listener)->port(), "let me in", {}); });
  auto pending = (*listener)->Accept(kTestTimeout);
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ((*pending)->payload(), "let me in");
  (*pending)->Reject("wrong layout version 7");
  connector.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(result.status().message(), HasSubstr("wrong layout version 7"));
}

TEST_F(SoftProviderTest, ConnectingToAClosedPortIsUnavailable) {
  uint16_t port;
  {
    auto listener = server_->Listen("127.0.0.1", 0);
    ASSERT_TRUE(listener.ok());
    port = (*listener)->port();
  }
  auto result = client_->Connect("127.0.0.1", port, "", {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SoftProviderTest, ConnectTimesOutWhenNobodyAccepts) {
  auto listener = server_->Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  QueuePairOptions options;
  options.connect_timeout = absl::Milliseconds(200);
  auto result = client_->Connect("127.0.0.1", (*listener)->port(), "", options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(SoftProviderTest, AcceptTimesOutAndShutdownCancels) {
  auto listener = server_->Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  EXPECT_EQ((*listener)->Accept(absl::Milliseconds(50)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(50));
    (*listener)->Shutdown();
  });
  EXPECT_EQ((*listener)->Accept(kTestTimeout).status().code(), absl::StatusCode::kCancelled);
  stopper.join();
}

TEST_F(SoftProviderTest, OversizedSetupPayloadIsRefused) {
  auto listener = server_->Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const std::string huge(1 << 20, 'x');
  EXPECT_EQ(client_->Connect("127.0.0.1", (*listener)->port(), huge, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SoftProviderTest, InvalidQueuePairOptionsAreRefused) {
  QueuePairOptions options;
  options.max_rd_atomic = 0;
  EXPECT_EQ(client_->Connect("127.0.0.1", 1, "", options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SoftProviderTest, DestroyingThePeerQueuePairFailsOutstandingRequests) {
  QueuePairOptions options;
  options.link.one_way_delay = absl::Milliseconds(20);
  QpPair pair = Connect(options);
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 64, kLocalWrite);
  auto remote = Make(server_.get(), 64, kAllRemote);
  WorkRequest wrs[2] = {Read(1, local.get(), 0, 8, *remote, 0),
                        Read(2, local.get(), 8, 8, *remote, 0)};
  ASSERT_TRUE(pair.client->PostSend(wrs).ok());
  pair.server.reset();
  auto done = PollUntilError(pair.client.get());
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(done[1].status, WcStatus::kFlushed);
}

TEST_F(SoftProviderTest, DestroyingTheProviderFirstLeavesQueuePairsInError) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 64, kLocalWrite);
  client_.reset();
  EXPECT_EQ(pair.client->state(), QpState::kError);
  WorkRequest wr = Write(1, local.get(), 0, 8, *local, 0);
  ASSERT_TRUE(pair.client->PostSend({&wr, 1}).ok());
  auto done = PollCompletions(pair.client.get(), 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, WcStatus::kFlushed);
  PollUntilError(pair.server.get());
  EXPECT_EQ(pair.server->state(), QpState::kError);
}

TEST_F(SoftProviderTest, DeregisteringARegionInUseKillsTheQueuePair) {
  QueuePairOptions options;
  options.link.one_way_delay = absl::Milliseconds(20);
  QpPair pair = Connect(options);
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 64, kLocalWrite);
  auto remote = Make(server_.get(), 64, kAllRemote);
  WorkRequest wr = Read(1, local.get(), 0, 8, *remote, 0);
  ASSERT_TRUE(pair.client->PostSend({&wr, 1}).ok());
  local->mr.reset();
  auto done = PollUntilError(pair.client.get());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, WcStatus::kLocalProtectionError);
}

}  // namespace
}  // namespace dreplay::verbs
