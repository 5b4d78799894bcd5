// Copyright dreplay authors.
//
// Tests of what verbs.h promises about atomics and ordering on the soft
// provider: misaligned atomics are refused locally, and the order in which
// the responder executes requests.

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "verbs/soft/provider.h"
#include "verbs/soft/provider_fixture.h"
#include "verbs/soft/test_util.h"

namespace dreplay::verbs {
namespace {

using ::dreplay::verbs::testing::Buffer;
using ::dreplay::verbs::testing::CompareSwap;
using ::dreplay::verbs::testing::ConnectPair;
using ::dreplay::verbs::testing::FetchAdd;
using ::dreplay::verbs::testing::kAllRemote;
using ::dreplay::verbs::testing::MakeBuffer;
using ::dreplay::verbs::testing::PollCompletions;
using ::dreplay::verbs::testing::QpPair;
using ::dreplay::verbs::testing::Read;
using ::dreplay::verbs::testing::SoftProviderTest;
using ::dreplay::verbs::testing::Write;

class SoftRcSemanticsTest : public SoftProviderTest {
 protected:
  void SetUp() override {
    SoftProviderTest::SetUp();
    auto pair = ConnectPair(client_.get(), server_.get());
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = std::move(*pair);
    auto local = MakeBuffer(client_.get(), 4096, kLocalWrite);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = std::move(*local);
    auto remote = MakeBuffer(server_.get(), 4096, kAllRemote);
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = std::move(*remote);
  }

  QpPair pair_;
  std::unique_ptr<Buffer> local_;
  std::unique_ptr<Buffer> remote_;
};

TEST_F(SoftRcSemanticsTest, MisalignedAtomicIsRefusedLocallyAndPostsNothing) {
  // A WRITE ahead of it in the same span must not be posted either.
  const WorkRequest span[2] = {Write(1, local_.get(), 64, 8, *remote_, 64),
                               CompareSwap(2, local_.get(), 0, *remote_, 4, 0, 1)};
  EXPECT_EQ(pair_.client->PostSend(span).code(), absl::StatusCode::kInvalidArgument);
  const WorkRequest add = FetchAdd(3, local_.get(), 0, *remote_, 12, 1);
  EXPECT_EQ(pair_.client->PostSend({&add, 1}).code(), absl::StatusCode::kInvalidArgument);
  // The queue pair is unharmed: an aligned atomic runs, and it is the only
  // completion.
  EXPECT_EQ(pair_.client->state(), QpState::kReady);
  const WorkRequest aligned = FetchAdd(4, local_.get(), 0, *remote_, 16, 5);
  ASSERT_TRUE(pair_.client->PostSend({&aligned, 1}).ok());
  const std::vector<Completion> done = PollCompletions(pair_.client.get(), 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].wr_id, 4u);
  EXPECT_TRUE(done[0].ok()) << done[0].ToStatus();
  EXPECT_TRUE(PollCompletions(pair_.client.get(), 1, absl::Milliseconds(50)).empty());
  uint64_t word = 0;
  std::memcpy(&word, remote_->data() + 16, sizeof(word));
  EXPECT_EQ(word, 5u);
  EXPECT_EQ(pair_.server->state(), QpState::kReady);
}

// The soft responder executes every request after all earlier ones, so it
// honours a fence always; these pin down that a fenced request after a READ
// or atomic sees the order verbs.h promises with the fence.
TEST_F(SoftRcSemanticsTest, FencedWriteAfterAReadDoesNotChangeWhatTheReadReturns) {
  constexpr uint32_t kLen = 256;
  std::memset(remote_->data(), 0xaa, kLen);
  std::memset(local_->data() + kLen, 0x55, kLen);  // the WRITE's source
  WorkRequest span[2] = {Read(1, local_.get(), 0, kLen, *remote_, 0),
                         Write(2, local_.get(), kLen, kLen, *remote_, 0)};
  span[1].fence = true;
  ASSERT_TRUE(pair_.client->PostSend(span).ok());
  const std::vector<Completion> done = PollCompletions(pair_.client.get(), 2);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_TRUE(done[0].ok()) << done[0].ToStatus();
  EXPECT_EQ(done[0].byte_len, kLen);
  EXPECT_EQ(done[1].wr_id, 2u);
  EXPECT_TRUE(done[1].ok()) << done[1].ToStatus();
  for (uint32_t i = 0; i < kLen; ++i) {
    ASSERT_EQ(local_->data()[i], 0xaa) << "the READ saw the later WRITE at byte " << i;
    ASSERT_EQ(remote_->data()[i], 0x55) << "the WRITE was not placed at byte " << i;
  }
}

TEST_F(SoftRcSemanticsTest, FencedReadAfterAnAtomicSeesItsResult) {
  WorkRequest span[3] = {FetchAdd(1, local_.get(), 0, *remote_, 64, 3),
                         CompareSwap(2, local_.get(), 8, *remote_, 64, 3, 10),
                         Read(3, local_.get(), 16, 8, *remote_, 64)};
  span[1].fence = true;
  span[2].fence = true;
  ASSERT_TRUE(pair_.client->PostSend(span).ok());
  const std::vector<Completion> done = PollCompletions(pair_.client.get(), 3);
  ASSERT_EQ(done.size(), 3u);
  for (const Completion& c : done) EXPECT_TRUE(c.ok()) << c.ToStatus();
  uint64_t old_add = 1, old_swap = 1, read = 0;
  std::memcpy(&old_add, local_->data(), 8);
  std::memcpy(&old_swap, local_->data() + 8, 8);
  std::memcpy(&read, local_->data() + 16, 8);
  EXPECT_EQ(old_add, 0u);
  EXPECT_EQ(old_swap, 3u);  // saw the FETCH_ADD, so it swapped
  EXPECT_EQ(read, 10u);     // saw the COMPARE_SWAP
}

// The inline contract of verbs.h: a WRITE of at most max_inline_data bytes
// is copied at PostSend, even when it cannot be sent yet.
TEST(SoftInlineContractTest, AnInlineWriteCarriesTheBytesItHadAtPostTime) {
  auto client = CreateSoftProvider(testing::TestProviderOptions());
  ASSERT_TRUE(client.ok()) << client.status();
  auto server = CreateSoftProvider(testing::TestProviderOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  // One READ credit and a long link: a second READ waits for the first
  // one's response, and the WRITE posted behind it waits too.
  QueuePairOptions options;
  options.max_rd_atomic = 1;
  options.link.one_way_delay = absl::Milliseconds(50);
  auto pair = ConnectPair(client->get(), server->get(), options);
  ASSERT_TRUE(pair.ok()) << pair.status();
  ASSERT_GE(pair->client->max_inline_data(), 64u);
  auto local = MakeBuffer(client->get(), 4096, kLocalWrite);
  ASSERT_TRUE(local.ok()) << local.status();
  auto remote = MakeBuffer(server->get(), 4096, kAllRemote);
  ASSERT_TRUE(remote.ok()) << remote.status();
  std::memset((*local)->data() + 1024, 0xab, 64);

  const WorkRequest span[3] = {Read(1, local->get(), 0, 8, **remote, 0),
                               Read(2, local->get(), 8, 8, **remote, 8),
                               Write(3, local->get(), 1024, 64, **remote, 2048)};
  ASSERT_TRUE(pair->client->PostSend(span).ok());
  // Reused at once, as the contract allows.
  std::memset((*local)->data() + 1024, 0xcd, 64);

  const std::vector<Completion> done = PollCompletions(pair->client.get(), 3);
  ASSERT_EQ(done.size(), 3u);
  for (const Completion& c : done) EXPECT_TRUE(c.ok()) << c.ToStatus();
  for (int i = 0; i < 64; ++i) {
    ASSERT_EQ((*remote)->data()[2048 + i], 0xab) << "byte " << i;
  }
}

}  // namespace
}  // namespace dreplay::verbs
