// Copyright dreplay authors.
//
// Tests of the soft provider's memory windows (verbs.h, BindWindow): a
// window's key works only on the queue pair it was bound on, only within its
// range and rights, and only while its region is registered; a region
// registered without remote access is reachable through windows alone.

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verbs/soft/provider.h"
#include "verbs/soft/provider_fixture.h"
#include "verbs/soft/test_util.h"

namespace dreplay::verbs {
namespace {

using ::dreplay::verbs::testing::Buffer;
using ::dreplay::verbs::testing::MakeBuffer;
using ::dreplay::verbs::testing::PollUntilError;
using ::dreplay::verbs::testing::QpPair;
using ::dreplay::verbs::testing::SoftProviderTest;
using ::testing::HasSubstr;

constexpr size_t kBytes = 4096;
// The server's memory: no remote access of its own.
constexpr uint32_t kWindowOnly = kLocalWrite | kMemoryWindowBind;

class WindowTest : public SoftProviderTest {
 protected:
  void SetUp() override {
    SoftProviderTest::SetUp();
    auto memory = MakeBuffer(server_.get(), kBytes, kWindowOnly);
    ASSERT_TRUE(memory.ok()) << memory.status();
    memory_ = std::move(*memory);
    for (size_t i = 0; i < kBytes; ++i) memory_->data()[i] = static_cast<uint8_t>(i * 7);
    auto local = MakeBuffer(client_.get(), kBytes, kLocalWrite);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = std::move(*local);
  }

  WorkRequest Request(Opcode op, const RemoteRegion& window, uint64_t offset, uint32_t length) {
    WorkRequest wr;
    wr.wr_id = 1;
    wr.opcode = op;
    wr.local = local_->mr.get();
    wr.local_addr = local_->data();
    wr.length = length;
    wr.remote_addr = window.addr + offset;
    wr.rkey = window.rkey;
    return wr;
  }

  // Posts one request on `qp` and returns its completion.
  std::unique_ptr<Buffer> memory_, local_;
};

TEST_F(WindowTest, WindowReadsAndWritesItsRangeOnItsQueuePair) {
  QpPair pair = Connect();
  auto window = pair.server->BindWindow(*memory_->mr, 1024, 512, kRemoteRead | kRemoteWrite);
  ASSERT_TRUE(window.ok()) << window.status();
  EXPECT_EQ(window->addr, memory_->addr() + 1024);
  EXPECT_EQ(window->length, 512u);
  EXPECT_NE(window->rkey, 0u);
  EXPECT_NE(window->rkey, memory_->rkey());

  Completion read = RunOne(pair.client.get(), Request(Opcode::kRead, *window, 0, 512));
  ASSERT_TRUE(read.ok()) << read.ToStatus();
  EXPECT_EQ(std::memcmp(local_->data(), memory_->data() + 1024, 512), 0);

  std::memset(local_->data(), 0xab, 64);
  Completion write = RunOne(pair.client.get(), Request(Opcode::kWrite, *window, 448, 64));
  ASSERT_TRUE(write.ok()) << write.ToStatus();
  EXPECT_EQ(memory_->data()[1024 + 448], 0xab);
  EXPECT_EQ(memory_->data()[1024 + 511], 0xab);
}

TEST_F(WindowTest, RegionWithoutRemoteAccessIsRefusedByItsOwnKey) {
  QpPair pair = Connect();
  RemoteRegion whole = memory_->mr->remote();
  Completion read = RunOne(pair.client.get(), Request(Opcode::kRead, whole, 0, 8));
  EXPECT_EQ(read.status, WcStatus::kRemoteAccessError);
}

TEST_F(WindowTest, KeyOfOneQueuePairIsRefusedOnAnother) {
  QpPair a = Connect();
  QpPair b = Connect();
  auto window_a = a.server->BindWindow(*memory_->mr, 0, kBytes, kRemoteRead | kRemoteWrite);
  ASSERT_TRUE(window_a.ok()) << window_a.status();
  Completion stolen = RunOne(b.client.get(), Request(Opcode::kWrite, *window_a, 0, 8));
  EXPECT_EQ(stolen.status, WcStatus::kRemoteAccessError);
  EXPECT_THAT(stolen.detail, HasSubstr("rkey"));
  PollUntilError(b.server.get());
  EXPECT_EQ(b.server->state(), QpState::kError);
  // A's own use of the key is unaffected.
  Completion own = RunOne(a.client.get(), Request(Opcode::kRead, *window_a, 0, 8));
  EXPECT_TRUE(own.ok()) << own.ToStatus();
}

TEST_F(WindowTest, SameRangeOnTwoQueuePairsGetsDistinctKeys) {
  std::set<uint32_t> keys;
  std::vector<QpPair> pairs;
  for (int i = 0; i < 8; ++i) {
    pairs.push_back(Connect());
    auto window = pairs.back().server->BindWindow(*memory_->mr, 0, 64, kRemoteRead);
    ASSERT_TRUE(window.ok()) << window.status();
    keys.insert(window->rkey);
  }
  EXPECT_EQ(keys.size(), 8u);
}

TEST_F(WindowTest, OutsideTheWindowOrBeyondItsRightsIsRefused) {
  QpPair pair = Connect();
  auto read_only = pair.server->BindWindow(*memory_->mr, 0, 256, kRemoteRead);
  ASSERT_TRUE(read_only.ok()) << read_only.status();
  Completion write = RunOne(pair.client.get(), Request(Opcode::kWrite, *read_only, 0, 8));
  EXPECT_EQ(write.status, WcStatus::kRemoteAccessError);
  EXPECT_THAT(write.detail, HasSubstr("does not grant remote write"));

  QpPair second = Connect();
  auto small = second.server->BindWindow(*memory_->mr, 0, 256, kRemoteRead);
  ASSERT_TRUE(small.ok()) << small.status();
  Completion beyond = RunOne(second.client.get(), Request(Opcode::kRead, *small, 192, 128));
  EXPECT_EQ(beyond.status, WcStatus::kRemoteAccessError);
  EXPECT_THAT(beyond.detail, HasSubstr("outside window"));
}

TEST_F(WindowTest, WindowDiesWithItsRegion) {
  QpPair pair = Connect();
  auto other = MakeBuffer(server_.get(), 256, kWindowOnly);
  ASSERT_TRUE(other.ok()) << other.status();
  auto window = pair.server->BindWindow(*(*other)->mr, 0, 256, kRemoteRead);
  ASSERT_TRUE(window.ok()) << window.status();
  (*other)->mr.reset();
  Completion read = RunOne(pair.client.get(), Request(Opcode::kRead, *window, 0, 8));
  EXPECT_EQ(read.status, WcStatus::kRemoteAccessError);
}

TEST_F(WindowTest, BindRefusesBadArguments) {
  QpPair pair = Connect();
  EXPECT_TRUE(absl::IsInvalidArgument(
      pair.server->BindWindow(*memory_->mr, kBytes - 8, 16, kRemoteRead).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(pair.server->BindWindow(*memory_->mr, 0, 0, kRemoteRead).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(pair.server->BindWindow(*memory_->mr, 0, 8, 0).status()));
  auto plain = MakeBuffer(server_.get(), 64, kLocalWrite | kRemoteRead);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const absl::Status no_bind = pair.server->BindWindow(*(*plain)->mr, 0, 64, kRemoteRead).status();
  EXPECT_TRUE(absl::IsInvalidArgument(no_bind)) << no_bind;
  auto read_only = MakeBuffer(server_.get(), 64, kMemoryWindowBind);
  ASSERT_TRUE(read_only.ok()) << read_only.status();
  EXPECT_TRUE(absl::IsInvalidArgument(
      pair.server->BindWindow(*(*read_only)->mr, 0, 64, kRemoteWrite).status()));
}

TEST_F(WindowTest, BindOnAFailedQueuePairIsRefused) {
  QpPair pair = Connect();
  pair.client.reset();
  PollUntilError(pair.server.get());
  ASSERT_EQ(pair.server->state(), QpState::kError);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      pair.server->BindWindow(*memory_->mr, 0, 64, kRemoteRead).status()));
}

}  // namespace
}  // namespace dreplay::verbs
