// Copyright dreplay authors.
//
// Tests of the soft provider's same-host transport (provider.h): WRITEs and
// READs on shareable memory are executed by the requester on a mapping of
// the peer's memory, within the rights and ranges the key grants, in RC
// order with the TCP path, no earlier than the link model allows; TCP stays
// the authority for everything else, and --soft_transport=tcp never maps.
//
// Whether the peer's memory is mapped is read from /proc/self/maps: each
// memfd segment shows once for its owner and once more for each mapping a
// peer made of it.

#include <sched.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "verbs/shareable_memory.h"
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

constexpr uint32_t kServerAccess = kLocalWrite | kRemoteRead | kRemoteWrite | kMemoryWindowBind;

// Mappings of shareable memory segments in this process.
int SegmentMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("memfd:dreplay-shm ") != std::string::npos) ++n;
  }
  return n;
}

class SharedPathTest : public ::testing::Test {
 protected:
  void Start(SoftTransport transport, const LinkModel& link = {}, int max_rd_atomic = 16) {
    ProviderOptions options;
    options.soft_transport = transport;
    auto client = CreateSoftProvider(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    auto server = CreateSoftProvider(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    page_ = ShareableMemory::PageBytes();
    auto memory = ShareableMemory::Allocate(4 * page_, 2 * page_, false);
    ASSERT_TRUE(memory.ok()) << memory.status();
    memory_ = std::move(*memory);
    auto mr = server_->RegisterMemory(memory_.data(), memory_.size(), kServerAccess);
    ASSERT_TRUE(mr.ok()) << mr.status();
    mr_ = std::move(*mr);
    auto local = MakeBuffer(client_.get(), 4 * page_, kLocalWrite);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = std::move(*local);
    QueuePairOptions client_options;
    client_options.link = link;
    client_options.max_rd_atomic = max_rd_atomic;
    auto pair = ConnectPair(client_.get(), server_.get(), client_options);
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = std::move(*pair);
    baseline_ = SegmentMappings();
  }

  WorkRequest Request(uint64_t id, Opcode op, uint32_t rkey, uint64_t remote_offset,
                      uint64_t local_offset, uint32_t length) {
    WorkRequest wr;
    wr.wr_id = id;
    wr.opcode = op;
    wr.local = local_->mr.get();
    wr.local_addr = local_->data() + local_offset;
    wr.length = length;
    wr.remote_addr = reinterpret_cast<uint64_t>(memory_.data()) + remote_offset;
    wr.rkey = rkey;
    return wr;
  }

  // Posts `wr` and waits for its completion.
  Completion Run(const WorkRequest& wr) {
    EXPECT_TRUE(pair_.client->PostSend({&wr, 1}).ok());
    std::vector<Completion> c = PollCompletions(pair_.client.get(), 1);
    EXPECT_EQ(c.size(), 1u);
    return c.empty() ? Completion{} : c[0];
  }

  // Repeats `wr` until the client has mapped `segments` more segments;
  // false on timeout.
  bool WaitForMapping(const WorkRequest& wr, int segments) {
    const absl::Time deadline = absl::Now() + kTestTimeout;
    while (absl::Now() < deadline) {
      if (!Run(wr).ok()) return false;
      if (SegmentMappings() >= baseline_ + segments) return true;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return false;
  }

  std::unique_ptr<Provider> client_;
  std::unique_ptr<Provider> server_;
  size_t page_ = 0;
  ShareableMemory memory_;
  std::unique_ptr<MemoryRegion> mr_;
  std::unique_ptr<Buffer> local_;
  QpPair pair_;
  int baseline_ = 0;
};

TEST_F(SharedPathTest, WritesAndReadsThroughTheMapping) {
  Start(SoftTransport::kAuto);
  for (size_t i = 0; i < page_; ++i) local_->data()[i] = static_cast<uint8_t>(i * 3 + 1);
  ASSERT_TRUE(WaitForMapping(Request(1, Opcode::kWrite, mr_->rkey(), 0, 0, 64), 2));
  EXPECT_EQ(SegmentMappings(), baseline_ + 2);
  // Now on the mapping: a WRITE lands at once, a READ sees the server's bytes.
  ASSERT_TRUE(Run(Request(2, Opcode::kWrite, mr_->rkey(), page_ + 8, 0, 1000)).ok());
  EXPECT_EQ(std::memcmp(memory_.data() + page_ + 8, local_->data(), 1000), 0);
  for (size_t i = 0; i < 512; ++i) memory_.data()[3 * page_ + i] = static_cast<char>(i ^ 0x5a);
  const Completion read = Run(Request(3, Opcode::kRead, mr_->rkey(), 3 * page_, page_, 512));
  ASSERT_TRUE(read.ok()) << read.detail;
  EXPECT_EQ(read.byte_len, 512u);
  EXPECT_EQ(std::memcmp(local_->data() + page_, memory_.data() + 3 * page_, 512), 0);
  // The server's queue pair counts the client's bytes as the TCP path does.
  const QueuePairTraffic server = pair_.server->traffic();
  EXPECT_EQ(server.peer_out, 512u);
  EXPECT_EQ(server.peer_in, pair_.client->traffic().initiated_out);
}

TEST_F(SharedPathTest, ForcedTcpNeverMaps) {
  Start(SoftTransport::kTcp);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(Run(Request(i, Opcode::kWrite, mr_->rkey(), 0, 0, 64)).ok());
    ASSERT_TRUE(Run(Request(i, Opcode::kRead, mr_->rkey(), page_, 0, 64)).ok());
  }
  EXPECT_EQ(SegmentMappings(), baseline_);
}

TEST_F(SharedPathTest, WindowRangeIsEnforcedAndDiesWithTheQueuePair) {
  Start(SoftTransport::kAuto);
  // A window over the first segment only.
  auto window = pair_.server->BindWindow(*mr_, 0, 2 * page_, kRemoteWrite | kRemoteRead);
  ASSERT_TRUE(window.ok()) << window.status();
  ASSERT_TRUE(WaitForMapping(Request(1, Opcode::kWrite, window->rkey, 0, 0, 64), 1));
  memory_.data()[2 * page_] = 42;
  local_->data()[0] = 7;
  // Past the window: refused by the server over TCP, nothing written.
  const WorkRequest outside = Request(2, Opcode::kWrite, window->rkey, 2 * page_, 0, 8);
  ASSERT_TRUE(pair_.client->PostSend({&outside, 1}).ok());
  std::vector<Completion> c = PollUntilError(pair_.client.get());
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].status, WcStatus::kRemoteAccessError);
  EXPECT_EQ(memory_.data()[2 * page_], 42);
  // The queue pair is dead: a later WRITE into the window is flushed, and
  // the mapping is gone.
  const WorkRequest inside = Request(3, Opcode::kWrite, window->rkey, 0, 0, 8);
  memory_.data()[0] = 1;
  ASSERT_TRUE(pair_.client->PostSend({&inside, 1}).ok());
  c = PollCompletions(pair_.client.get(), 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kFlushed);
  EXPECT_EQ(memory_.data()[0], 1);
  EXPECT_EQ(SegmentMappings(), baseline_);
}

// A peer that keeps a writable mapping past its queue pair (a displaced or
// stalled process, or one slow to notice the end): the same segments mapped
// once more, as its own mapping would stay.
char* KeepMapping(const ShareableMemory& memory, size_t offset, size_t length) {
  const auto segments = ShareableMemory::FindSegments(memory.data() + offset, length);
  if (segments.size() != 1) return nullptr;
  void* at = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, segments[0].fd, 0);
  return at == MAP_FAILED ? nullptr : static_cast<char*>(at);
}

TEST_F(SharedPathTest, AMappingReachesNothingOnceItsQueuePairIsDestroyed) {
  Start(SoftTransport::kAuto);
  ASSERT_TRUE(WaitForMapping(Request(1, Opcode::kWrite, mr_->rkey(), 0, 0, 64), 2));
  char* kept = KeepMapping(memory_, 0, 2 * page_);
  ASSERT_NE(kept, nullptr);
  kept[100] = 1;
  ASSERT_EQ(memory_.data()[100], 1);  // live while the queue pair is
  pair_.server.reset();
  kept[100] = 2;
  kept[101] = 3;
  EXPECT_EQ(memory_.data()[100], 1);  // what landed before stays
  EXPECT_EQ(memory_.data()[101], 0);
  munmap(kept, 2 * page_);
  // The next connection is granted the memory as it is now, and writes it.
  pair_ = QpPair{};
  auto pair = ConnectPair(client_.get(), server_.get(), QueuePairOptions{});
  ASSERT_TRUE(pair.ok()) << pair.status();
  pair_ = std::move(*pair);
  baseline_ = SegmentMappings();
  local_->data()[0] = 9;
  ASSERT_TRUE(WaitForMapping(Request(2, Opcode::kWrite, mr_->rkey(), 100, 0, 1), 2));
  EXPECT_EQ(memory_.data()[100], 9);
}

// A device's peer whose queue pair is gone answers nothing: a READ or
// WRITE posted after it was destroyed fails. The requester's mapping would
// still show the old memory, so it is not used once the peer marked its
// side closed, even before the TCP close arrives.
TEST_F(SharedPathTest, NothingExecutesOnAMappingOnceThePeersQueuePairIsDestroyed) {
  Start(SoftTransport::kAuto);
  ASSERT_TRUE(WaitForMapping(Request(1, Opcode::kWrite, mr_->rkey(), 0, 0, 64), 2));
  memory_.data()[200] = 7;
  ASSERT_TRUE(Run(Request(2, Opcode::kRead, mr_->rkey(), 200, 0, 1)).ok());
  ASSERT_EQ(local_->data()[0], 7);  // through the mapping
  local_->data()[0] = 0;
  pair_.server.reset();
  // Posted at once, before the client can have noticed the TCP close.
  const WorkRequest read = Request(3, Opcode::kRead, mr_->rkey(), 200, 0, 1);
  ASSERT_TRUE(pair_.client->PostSend({&read, 1}).ok());
  const std::vector<Completion> c = PollCompletions(pair_.client.get(), 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].ok()) << "a READ after the peer's queue pair was destroyed succeeded";
  EXPECT_EQ(local_->data()[0], 0);
}

TEST_F(SharedPathTest, AMappingReachesNothingOnceItsQueuePairFailed) {
  Start(SoftTransport::kAuto);
  auto window = pair_.server->BindWindow(*mr_, 2 * page_, 2 * page_, kRemoteWrite);
  ASSERT_TRUE(window.ok()) << window.status();
  ASSERT_TRUE(WaitForMapping(Request(1, Opcode::kWrite, window->rkey, 2 * page_, 0, 64), 1));
  char* kept = KeepMapping(memory_, 2 * page_, 2 * page_);
  ASSERT_NE(kept, nullptr);
  const auto segment_fd = [&] {
    const auto segments = ShareableMemory::FindSegments(memory_.data() + 2 * page_, 2 * page_);
    return segments.size() == 1 ? segments[0].fd : -1;
  };
  const int granted_fd = segment_fd();
  // The peer's end goes; the server's queue pair fails when it notices, and
  // then (after publishing the error) renews what it had granted.
  pair_.client.reset();
  const absl::Time deadline = absl::Now() + kTestTimeout;
  while ((pair_.server->state() != QpState::kError || segment_fd() == granted_fd) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(pair_.server->state(), QpState::kError);
  ASSERT_NE(segment_fd(), granted_fd) << "the granted segment was not renewed";
  kept[5] = 4;
  EXPECT_EQ(memory_.data()[2 * page_ + 5], 0);
  munmap(kept, 2 * page_);
}

TEST_F(SharedPathTest, ReadOnlyWindowOverUnsealedMemoryStaysOnTcp) {
  Start(SoftTransport::kAuto);
  auto window = pair_.server->BindWindow(*mr_, 0, 4 * page_, kRemoteRead);
  ASSERT_TRUE(window.ok()) << window.status();
  for (int i = 0; i < 50; ++i) {
    memory_.data()[100] = static_cast<char>(i);
    ASSERT_TRUE(Run(Request(i, Opcode::kRead, window->rkey, 100, 0, 1)).ok());
    EXPECT_EQ(local_->data()[0], static_cast<uint8_t>(i));
  }
  EXPECT_EQ(SegmentMappings(), baseline_);
}

TEST_F(SharedPathTest, ReadOnlyWindowOverSealedMemoryIsMappedReadOnly) {
  Start(SoftTransport::kAuto);
  auto sealed = ShareableMemory::Allocate(page_, 0, /*remote_read_only=*/true);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  auto mr = server_->RegisterMemory(sealed->data(), sealed->size(),
                                    kLocalWrite | kRemoteRead | kMemoryWindowBind);
  ASSERT_TRUE(mr.ok()) << mr.status();
  sealed->data()[5] = 99;
  baseline_ = SegmentMappings();
  WorkRequest read = Request(1, Opcode::kRead, (*mr)->rkey(), 0, 0, 8);
  read.remote_addr = reinterpret_cast<uint64_t>(sealed->data());
  ASSERT_TRUE(WaitForMapping(read, 1));
  ASSERT_TRUE(Run(read).ok());
  EXPECT_EQ(local_->data()[5], 99);
  // A WRITE under the READ-only key still goes to the server and is refused.
  WorkRequest write = read;
  write.opcode = Opcode::kWrite;
  ASSERT_TRUE(pair_.client->PostSend({&write, 1}).ok());
  std::vector<Completion> c = PollUntilError(pair_.client.get());
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].status, WcStatus::kRemoteAccessError);
  EXPECT_EQ(sealed->data()[5], 99);
  pair_ = QpPair{};
  mr->reset();
}

TEST_F(SharedPathTest, WriteBehindATcpWriteLandsAfterIt) {
  Start(SoftTransport::kAuto);
  ASSERT_TRUE(WaitForMapping(Request(1, Opcode::kWrite, mr_->rkey(), 0, 0, 64), 2));
  // Plain server memory: the TCP path. A large WRITE there, then a marker
  // WRITE to mapped memory in the same post: the marker must not land first.
  constexpr size_t kLarge = 8 << 20;
  auto plain = MakeBuffer(server_.get(), kLarge, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto source = MakeBuffer(client_.get(), kLarge, kLocalWrite);
  ASSERT_TRUE(source.ok()) << source.status();
  std::memset((*source)->data(), 0xab, kLarge);
  WorkRequest large;
  large.wr_id = 10;
  large.local = (*source)->mr.get();
  large.local_addr = (*source)->data();
  large.length = kLarge;
  large.remote_addr = (*plain)->addr();
  large.rkey = (*plain)->rkey();
  local_->data()[0] = 1;
  memory_.data()[0] = 0;
  WorkRequest wrs[2] = {large, Request(11, Opcode::kWrite, mr_->rkey(), 0, 0, 1)};
  ASSERT_TRUE(pair_.client->PostSend(wrs).ok());
  const absl::Time deadline = absl::Now() + kTestTimeout;
  while (__atomic_load_n(&memory_.data()[0], __ATOMIC_ACQUIRE) == 0 && absl::Now() < deadline) {
  }
  ASSERT_EQ(memory_.data()[0], 1);
  EXPECT_EQ((*plain)->data()[kLarge - 1], 0xab);
  std::vector<Completion> c = PollCompletions(pair_.client.get(), 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 10u);
  EXPECT_EQ(c[1].wr_id, 11u);
}

TEST_F(SharedPathTest, CompletionWaitsForTheLinkModel) {
  LinkModel link;
  link.one_way_delay = absl::Milliseconds(1);
  link.bandwidth_gbps = 1;
  Start(SoftTransport::kAuto, link);
  ASSERT_TRUE(WaitForMapping(Request(1, Opcode::kRead, mr_->rkey(), 0, 0, 64), 2));
  constexpr uint32_t kLength = 8192;  // 65.5 us at 1 Gb/s
  const absl::Time start = absl::Now();
  const Completion read = Run(Request(2, Opcode::kRead, mr_->rkey(), 0, 0, kLength));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(read.ok()) << read.detail;
  EXPECT_GE(took, absl::Milliseconds(2) + absl::Nanoseconds((kLength + 64) * 8));
  EXPECT_EQ(SegmentMappings(), baseline_ + 2);  // it went on the mapping
}

TEST_F(SharedPathTest, ReadsBeyondTheCreditsWaitForAnAnswer) {
  LinkModel link;
  link.one_way_delay = absl::Milliseconds(1);
  Start(SoftTransport::kAuto, link, /*max_rd_atomic=*/2);
  ASSERT_TRUE(WaitForMapping(Request(1, Opcode::kRead, mr_->rkey(), 0, 0, 64), 2));
  // Four READs, two credits: the last two leave when the first two are
  // answered, so all four take two round trips.
  std::vector<WorkRequest> reads;
  for (int i = 0; i < 4; ++i)
    reads.push_back(Request(10 + i, Opcode::kRead, mr_->rkey(), 0, 0, 64));
  const absl::Time start = absl::Now();
  ASSERT_TRUE(pair_.client->PostSend(reads).ok());
  std::vector<Completion> c = PollCompletions(pair_.client.get(), 4);
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(c.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c[i].wr_id, 10u + i);
  EXPECT_GE(took, absl::Milliseconds(4));
  EXPECT_EQ(SegmentMappings(), baseline_ + 2);
}

// The listener answers from another network namespace, as a peer in a
// container or on another host would: its abstract socket cannot reach the
// offer, and the queue pair works over TCP without mapping anything.
TEST(SharedPathNamespaceTest, APeerInAnotherNetworkNamespaceKeepsTcp) {
  auto client = CreateSoftProvider(ProviderOptions{});
  ASSERT_TRUE(client.ok()) << client.status();
  auto server = CreateSoftProvider(ProviderOptions{});
  ASSERT_TRUE(server.ok()) << server.status();
  const size_t page = ShareableMemory::PageBytes();
  auto memory = ShareableMemory::Allocate(page, 0, false);
  ASSERT_TRUE(memory.ok()) << memory.status();
  auto mr = (*server)->RegisterMemory(memory->data(), memory->size(),
                                      kLocalWrite | kRemoteRead | kRemoteWrite);
  ASSERT_TRUE(mr.ok()) << mr.status();
  auto local = MakeBuffer(client->get(), page, kLocalWrite);
  ASSERT_TRUE(local.ok()) << local.status();
  auto listener = (*server)->Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int baseline = SegmentMappings();

  // The TCP sockets stay in this namespace; only the accepting thread moves.
  int unshare_errno = 0;
  std::unique_ptr<QueuePair> server_qp;
  std::thread acceptor([&] {
    if (unshare(CLONE_NEWNET) != 0) unshare_errno = errno;
    auto pending = (*listener)->Accept(kTestTimeout);
    if (!pending.ok()) return;
    auto qp = (*pending)->Accept("", QueuePairOptions{});
    if (qp.ok()) server_qp = std::move(*qp);
  });
  auto connection = (*client)->Connect("127.0.0.1", (*listener)->port(), "", QueuePairOptions{});
  acceptor.join();
  if (unshare_errno != 0) {
    GTEST_SKIP() << "unshare(CLONE_NEWNET) needs root: " << std::strerror(unshare_errno);
  }
  ASSERT_TRUE(connection.ok()) << connection.status();
  ASSERT_NE(server_qp, nullptr);
  for (int i = 0; i < 50; ++i) {
    (*local)->data()[0] = static_cast<uint8_t>(i);
    WorkRequest wr;
    wr.wr_id = i;
    wr.local = (*local)->mr.get();
    wr.local_addr = (*local)->data();
    wr.length = 8;
    wr.remote_addr = reinterpret_cast<uint64_t>(memory->data());
    wr.rkey = (*mr)->rkey();
    ASSERT_TRUE(connection->qp->PostSend({&wr, 1}).ok());
    std::vector<Completion> c = PollCompletions(connection->qp.get(), 1);
    ASSERT_EQ(c.size(), 1u);
    ASSERT_TRUE(c[0].ok()) << c[0].detail;
    EXPECT_EQ(memory->data()[0], static_cast<char>(i));
  }
  EXPECT_EQ(SegmentMappings(), baseline);
}

}  // namespace
}  // namespace dreplay::verbs
