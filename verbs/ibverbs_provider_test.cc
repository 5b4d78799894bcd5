// Copyright dreplay authors.
//
// Tests of the libibverbs provider. Those that need an RDMA device (RoCE or
// Soft-RoCE: tools/launch/softroce_setup.sh) skip with "no RDMA device: ..." when
// there is none; the rest run everywhere.

#include "verbs/ibverbs_provider.h"

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verbs/tcp_channel.h"
#include "verbs/verbs.h"

namespace dreplay::verbs {
namespace {

using ::testing::HasSubstr;

constexpr char kLoopback[] = "127.0.0.1";
// Bound on anything that should happen at once on a local device.
constexpr absl::Duration kTimeout = absl::Seconds(10);
// Per-test accept timeout for the listener thread.
constexpr absl::Duration kAcceptTimeout = absl::Seconds(10);
constexpr size_t kRegionBytes = 1 << 20;

// ---------------------------------------------------------------------------
// Without a device.
// ---------------------------------------------------------------------------

TEST(IbverbsDeviceAvailableTest, AlwaysGivesAOneLineReason) {
  std::string why;
  const bool available = IbverbsDeviceAvailable(&why);
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  if (!available) {
    EXPECT_THAT(why, HasSubstr("no RDMA device"));
  }
  // Null `why` is allowed.
  EXPECT_EQ(IbverbsDeviceAvailable(nullptr), available);
}

TEST(CreateIbverbsProviderTest, ReturnsACleanErrorWhenThereIsNoDevice) {
  std::string why;
  if (IbverbsDeviceAvailable(&why)) {
    // With a device, the same promise for a device that does not exist.
    ProviderOptions options;
    options.ib_device = "no_such_rdma_device";
    auto provider = CreateIbverbsProvider(options);
    ASSERT_FALSE(provider.ok());
    EXPECT_TRUE(absl::IsNotFound(provider.status())) << provider.status();
    EXPECT_THAT(std::string(provider.status().message()), HasSubstr("no_such_rdma_device"));
    return;
  }
  auto provider = CreateIbverbsProvider(ProviderOptions());
  ASSERT_FALSE(provider.ok());
  EXPECT_TRUE(absl::IsNotFound(provider.status())) << provider.status();
  EXPECT_THAT(std::string(provider.status().message()), HasSubstr("no RDMA device"));
}

TEST(CreateIbverbsProviderTest, RefusesInvalidOptionsBeforeTouchingADevice) {
  ProviderOptions options;
  options.ib_port = 0;
  auto provider = CreateIbverbsProvider(options);
  ASSERT_FALSE(provider.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(provider.status())) << provider.status();
}

// ---------------------------------------------------------------------------
// With a device.
// ---------------------------------------------------------------------------

// Two providers on the local device (a "server" and a "client" host) and
// helpers to connect them.
class IbverbsDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!IbverbsDeviceAvailable(&why)) GTEST_SKIP() << why;
    auto server = CreateIbverbsProvider(ProviderOptions());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto client = CreateIbverbsProvider(ProviderOptions());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    auto listener = server_->Listen(kLoopback, 0);
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = std::move(*listener);
  }

  struct Connected {
    std::unique_ptr<QueuePair> client;
    std::unique_ptr<QueuePair> server;
    std::string reply;         // what the client got back
    std::string seen_payload;  // what the server saw
  };

  // Connects a client QP to a server QP through listener_; the server thread
  // accepts with `reply`.
  Connected Connect(const std::string& payload = "hello", const std::string& reply = "welcome",
                    QueuePairOptions options = QueuePairOptions()) {
    Connected c;
    absl::Status server_status;
    std::thread server([&] {
      auto pending = listener_->Accept(kAcceptTimeout);
      if (!pending.ok()) {
        server_status = pending.status();
        return;
      }
      c.seen_payload = (*pending)->payload();
      auto qp = (*pending)->Accept(reply, options);
      if (!qp.ok()) {
        server_status = qp.status();
        return;
      }
      c.server = std::move(*qp);
    });
    auto conn = client_->Connect(kLoopback, listener_->port(), payload, options);
    server.join();
    EXPECT_TRUE(conn.ok()) << conn.status();
    EXPECT_TRUE(server_status.ok()) << server_status;
    if (conn.ok()) {
      c.client = std::move(conn->qp);
      c.reply = conn->reply;
    }
    return c;
  }

  // Polls `qp` until `n` completions arrived or kTimeout passed.
  static std::vector<Completion> PollN(QueuePair* qp, size_t n) {
    std::vector<Completion> got;
    const absl::Time deadline = absl::Now() + kTimeout;
    std::vector<Completion> batch(16);
    while (got.size() < n && absl::Now() < deadline) {
      const int k = qp->Poll(absl::MakeSpan(batch));
      for (int i = 0; i < k; ++i) got.push_back(batch[i]);
    }
    EXPECT_EQ(got.size(), n) << "completions within " << kTimeout;
    return got;
  }

  // A registered buffer.
  struct Buffer {
    std::vector<uint64_t> words;
    std::unique_ptr<MemoryRegion> mr;
    char* bytes() { return reinterpret_cast<char*>(words.data()); }
  };
  static Buffer Register(Provider* p, uint32_t access) {
    Buffer b;
    b.words.assign(kRegionBytes / sizeof(uint64_t), 0);
    auto mr = p->RegisterMemory(b.words.data(), kRegionBytes, access);
    EXPECT_TRUE(mr.ok()) << mr.status();
    if (mr.ok()) b.mr = std::move(*mr);
    return b;
  }

  // What the window tests use: a server region reachable only through
  // windows (no remote access of its own), a client region the server's
  // settling WRITE lands in, and the client's local buffer.
  struct WindowBuffers {
    Buffer served;
    Buffer target;
    Buffer local;
  };
  WindowBuffers RegisterForWindows() {
    return WindowBuffers{Register(server_.get(), kLocalWrite | kMemoryWindowBind),
                         Register(client_.get(), kLocalWrite | kRemoteWrite),
                         Register(client_.get(), kLocalWrite)};
  }

  std::unique_ptr<Provider> server_;
  std::unique_ptr<Provider> client_;
  std::unique_ptr<Listener> listener_;
};

TEST_F(IbverbsDeviceTest, RegistersMemoryAndRefusesBadArguments) {
  std::vector<char> buffer(4096);
  auto mr = client_->RegisterMemory(buffer.data(), buffer.size(), kLocalWrite | kRemoteRead);
  ASSERT_TRUE(mr.ok()) << mr.status();
  EXPECT_EQ((*mr)->addr(), buffer.data());
  EXPECT_EQ((*mr)->length(), buffer.size());
  EXPECT_EQ((*mr)->access(), kLocalWrite | kRemoteRead);
  EXPECT_EQ((*mr)->remote().rkey, (*mr)->rkey());
  EXPECT_TRUE(
      absl::IsInvalidArgument(client_->RegisterMemory(nullptr, 4096, kLocalWrite).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(client_->RegisterMemory(buffer.data(), 0, kLocalWrite).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      client_->RegisterMemory(buffer.data(), buffer.size(), 1u << 20).status()));
  EXPECT_EQ(client_->name(), "ibverbs");
}

TEST_F(IbverbsDeviceTest, ConnectsOverLoopbackAndExchangesPayloads) {
  Connected c = Connect("actor 7", "slot ring at 0x1000");
  ASSERT_NE(c.client, nullptr);
  ASSERT_NE(c.server, nullptr);
  EXPECT_EQ(c.seen_payload, "actor 7");
  EXPECT_EQ(c.reply, "slot ring at 0x1000");
  EXPECT_EQ(c.client->state(), QpState::kReady);
  EXPECT_TRUE(c.client->error().ok());
  EXPECT_GE(c.client->max_rd_atomic(), 1);
  EXPECT_LE(c.client->max_rd_atomic(), QueuePairOptions().max_rd_atomic);
  EXPECT_EQ(c.client->max_send_wr(), QueuePairOptions().max_send_wr);
  EXPECT_THAT(c.client->Describe(), HasSubstr("ibverbs"));
}

TEST_F(IbverbsDeviceTest, RejectReachesThePeerAsPermissionDeniedWithTheReason) {
  std::thread server([&] {
    auto pending = listener_->Accept(kAcceptTimeout);
    ASSERT_TRUE(pending.ok()) << pending.status();
    (*pending)->Reject("layout version 3 is not supported");
  });
  auto conn = client_->Connect(kLoopback, listener_->port(), "v3", QueuePairOptions());
  server.join();
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(conn.status())) << conn.status();
  EXPECT_THAT(std::string(conn.status().message()), HasSubstr("layout version 3 is not supported"));
}

TEST_F(IbverbsDeviceTest, ConnectWithNobodyListeningIsUnavailable) {
  const uint16_t port = listener_->port();
  listener_.reset();
  auto conn = client_->Connect(kLoopback, port, "", QueuePairOptions());
  EXPECT_TRUE(absl::IsUnavailable(conn.status())) << conn.status();
}

TEST_F(IbverbsDeviceTest, RefusesLinkModelAndFaultsAsSoftProviderOnly) {
  QueuePairOptions with_link;
  with_link.link.one_way_delay = absl::Microseconds(50);
  auto conn = client_->Connect(kLoopback, listener_->port(), "", with_link);
  EXPECT_TRUE(absl::IsInvalidArgument(conn.status())) << conn.status();
  EXPECT_THAT(std::string(conn.status().message()), HasSubstr("soft provider only"));

  QueuePairOptions with_faults;
  with_faults.faults.drop_after_ops = 3;
  conn = client_->Connect(kLoopback, listener_->port(), "", with_faults);
  EXPECT_TRUE(absl::IsInvalidArgument(conn.status())) << conn.status();
  EXPECT_THAT(std::string(conn.status().message()), HasSubstr("soft provider only"));
}

TEST_F(IbverbsDeviceTest, ListenerSurvivesGarbageAndHangUps) {
  // A peer that hangs up at once, and one that sends an HTTP request.
  {
    auto quitter = TcpConnection::Connect(kLoopback, listener_->port(), absl::Now() + kTimeout);
    ASSERT_TRUE(quitter.ok()) << quitter.status();
  }
  auto garbage = TcpConnection::Connect(kLoopback, listener_->port(), absl::Now() + kTimeout);
  ASSERT_TRUE(garbage.ok()) << garbage.status();
  const char request[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_GT(send((*garbage)->fd(), request, sizeof(request) - 1, 0), 0);
  // A well-formed frame that is not a setup message.
  ASSERT_TRUE((*garbage)->SendFrame("not a hello", absl::Now() + kTimeout).ok());
  // Then an honest peer is still served by the same Accept() loop.
  Connected c = Connect("honest");
  EXPECT_NE(c.client, nullptr);
  EXPECT_EQ(c.seen_payload, "honest");
}

TEST_F(IbverbsDeviceTest, ShutdownWakesABlockedAccept) {
  absl::Status accepted;
  std::thread waiter([&] { accepted = listener_->Accept(kAcceptTimeout).status(); });
  listener_->Shutdown();
  waiter.join();
  EXPECT_TRUE(absl::IsCancelled(accepted)) << accepted;
}

TEST_F(IbverbsDeviceTest, WriteThenReadRoundTripsALargeBuffer) {
  Connected c = Connect();
  ASSERT_NE(c.client, nullptr);
  Buffer remote = Register(server_.get(), kLocalWrite | kRemoteRead | kRemoteWrite);
  Buffer local = Register(client_.get(), kLocalWrite);
  constexpr uint32_t kBytes = 256 * 1024;
  for (uint32_t i = 0; i < kBytes; ++i) local.bytes()[i] = static_cast<char>(i * 7 + 1);

  WorkRequest write;
  write.wr_id = 1;
  write.opcode = Opcode::kWrite;
  write.local = local.mr.get();
  write.local_addr = local.bytes();
  write.length = kBytes;
  write.remote_addr = remote.mr->remote().addr;
  write.rkey = remote.mr->rkey();
  // Read it back after the write (same QP: executed in order).
  WorkRequest read = write;
  read.wr_id = 2;
  read.opcode = Opcode::kRead;
  read.local_addr = local.bytes() + kBytes;
  const WorkRequest wrs[] = {write, read};
  ASSERT_TRUE(c.client->PostSend(wrs).ok());
  std::vector<Completion> done = PollN(c.client.get(), 2);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_TRUE(done[0].ok()) << done[0].ToStatus();
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[0].opcode, Opcode::kWrite);
  EXPECT_TRUE(done[1].ok()) << done[1].ToStatus();
  EXPECT_EQ(done[1].wr_id, 2u);
  EXPECT_EQ(done[1].opcode, Opcode::kRead);
  EXPECT_EQ(done[1].byte_len, kBytes);
  EXPECT_EQ(std::memcmp(remote.bytes(), local.bytes(), kBytes), 0);
  EXPECT_EQ(std::memcmp(local.bytes() + kBytes, local.bytes(), kBytes), 0);
}

// The server binds a type-2 window over a region that has no remote access
// of its own, and makes sure the bind executed: a fenced, signalled WRITE
// posted after it has completed.
RemoteRegion BindAndSettle(QueuePair* server_qp, const MemoryRegion& mr, uint64_t offset,
                           uint64_t length, const MemoryRegion& client_target) {
  absl::StatusOr<RemoteRegion> window =
      server_qp->BindWindow(mr, offset, length, kRemoteRead | kRemoteWrite);
  EXPECT_TRUE(window.ok()) << window.status();
  if (!window.ok()) return RemoteRegion{};
  WorkRequest settle;
  settle.wr_id = 99;
  settle.opcode = Opcode::kWrite;
  settle.fence = true;
  settle.local = &mr;
  settle.local_addr = mr.addr();
  settle.length = 8;
  settle.remote_addr = client_target.remote().addr;
  settle.rkey = client_target.rkey();
  EXPECT_TRUE(server_qp->PostSend({&settle, 1}).ok());
  Completion c;
  const absl::Time deadline = absl::Now() + kTimeout;
  while (server_qp->Poll({&c, 1}) == 0 && absl::Now() < deadline) {
  }
  EXPECT_TRUE(c.ok() && c.wr_id == 99u) << c.ToStatus();
  return *window;
}

// One signalled request of `opcode` from `qp` through `key`; its completion.
Completion OneThroughWindow(QueuePair* qp, Opcode opcode, const MemoryRegion& local,
                            uint64_t remote_addr, uint32_t rkey, uint32_t length) {
  WorkRequest wr;
  wr.wr_id = 5;
  wr.opcode = opcode;
  wr.local = &local;
  wr.local_addr = local.addr();
  wr.length = length;
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  EXPECT_TRUE(qp->PostSend({&wr, 1}).ok());
  Completion c;
  c.wr_id = 0;
  const absl::Time deadline = absl::Now() + kTimeout;
  while (qp->Poll({&c, 1}) == 0 && absl::Now() < deadline) {
  }
  return c;
}

TEST_F(IbverbsDeviceTest, TheDeviceAdmitsAWindowsKeyOnItsQueuePairOnly) {
  Connected a = Connect();
  Connected b = Connect();
  ASSERT_NE(a.client, nullptr);
  ASSERT_NE(b.client, nullptr);
  WindowBuffers w = RegisterForWindows();
  const RemoteRegion window = BindAndSettle(a.server.get(), *w.served.mr, 4096, 4096, *w.target.mr);
  ASSERT_NE(window.rkey, 0u);
  std::memset(w.local.bytes(), 0x5a, 64);
  const Completion ok =
      OneThroughWindow(a.client.get(), Opcode::kWrite, *w.local.mr, window.addr, window.rkey, 64);
  EXPECT_TRUE(ok.ok()) << ok.ToStatus();
  EXPECT_EQ(w.served.bytes()[4096], 0x5a);
  // The same key on another connection: refused by the device.
  const Completion stolen =
      OneThroughWindow(b.client.get(), Opcode::kWrite, *w.local.mr, window.addr, window.rkey, 8);
  EXPECT_FALSE(stolen.ok());
  EXPECT_EQ(stolen.status, WcStatus::kRemoteAccessError) << stolen.ToStatus();
}

// rxe (Debian's 6.1) checks a window key's range against the region under
// the window, not the window itself: a READ 60 KiB past a window's end but
// inside its region completes. What every device refuses is a request past
// the region; the server therefore registers each range it grants as its
// own region (docs/roce.md, "Kernel Soft-RoCE in a VM").
TEST_F(IbverbsDeviceTest, AWindowsKeyNeverReachesPastItsRegion) {
  Connected c = Connect();
  ASSERT_NE(c.client, nullptr);
  WindowBuffers w = RegisterForWindows();
  const RemoteRegion window =
      BindAndSettle(c.server.get(), *w.served.mr, kRegionBytes - 4096, 4096, *w.target.mr);
  ASSERT_NE(window.rkey, 0u);
  const Completion past = OneThroughWindow(c.client.get(), Opcode::kRead, *w.local.mr,
                                           window.addr + 4090, window.rkey, 64);
  EXPECT_FALSE(past.ok());
  EXPECT_EQ(past.status, WcStatus::kRemoteAccessError) << past.ToStatus();
}

TEST_F(IbverbsDeviceTest, AWindowDiesWithItsRegionAndTheQueuePairGoesPromptlyAfter) {
  Connected c = Connect();
  ASSERT_NE(c.client, nullptr);
  WindowBuffers w = RegisterForWindows();
  const RemoteRegion window = BindAndSettle(c.server.get(), *w.served.mr, 0, 4096, *w.target.mr);
  ASSERT_NE(window.rkey, 0u);
  // Deregistering the region takes its window along (a device refuses to
  // deregister a region with a window bound); the memory itself stays.
  w.served.mr.reset();
  const Completion after =
      OneThroughWindow(c.client.get(), Opcode::kRead, *w.local.mr, window.addr, window.rkey, 8);
  EXPECT_FALSE(after.ok()) << "a key outlived its region";
  // A queue pair with windows bound through it is destroyed at once (on a
  // fresh connection: the failed READ may have failed both ends).
  Connected d = Connect();
  ASSERT_NE(d.server, nullptr);
  Buffer more = Register(server_.get(), kLocalWrite | kMemoryWindowBind);
  for (int i = 0; i < 4; ++i) {
    ASSERT_NE(BindAndSettle(d.server.get(), *more.mr, 4096 * i, 4096, *w.target.mr).rkey, 0u);
  }
  const absl::Time start = absl::Now();
  d.server.reset();
  EXPECT_LT(absl::Now() - start, kTimeout);
}

TEST_F(IbverbsDeviceTest, APeerThatGoesAwayFailsTheQueuePairPromptly) {
  Connected c = Connect();
  ASSERT_NE(c.client, nullptr);
  c.client.reset();
  // The server sends nothing, so no retry would ever notice: the closed
  // control connection does, within a few checks.
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  Completion none;
  while (c.server->state() != QpState::kError && absl::Now() < deadline) {
    EXPECT_EQ(c.server->Poll({&none, 1}), 0);
  }
  EXPECT_EQ(c.server->state(), QpState::kError);
  EXPECT_TRUE(absl::IsUnavailable(c.server->error())) << c.server->error();
  EXPECT_THAT(std::string(c.server->error().message()), HasSubstr("closed its connection"));
}

TEST_F(IbverbsDeviceTest, SmallWritesAreInlinedAtPostTime) {
  Connected c = Connect();
  ASSERT_NE(c.client, nullptr);
  if (c.client->max_inline_data() < 32) {
    GTEST_SKIP() << "device offers max_inline_data " << c.client->max_inline_data();
  }
  Buffer remote = Register(server_.get(), kLocalWrite | kRemoteWrite);
  Buffer local = Register(client_.get(), kLocalWrite);
  std::memset(local.bytes(), 'a', 32);
  WorkRequest write;
  write.wr_id = 5;
  write.local = local.mr.get();
  write.local_addr = local.bytes();
  write.length = 32;
  write.remote_addr = remote.mr->remote().addr;
  write.rkey = remote.mr->rkey();
  ASSERT_TRUE(c.client->PostSend({&write, 1}).ok());
  // Inline data was copied into the WQE: changing the source now cannot
  // change what lands.
  std::memset(local.bytes(), 'b', 32);
  std::vector<Completion> done = PollN(c.client.get(), 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].ok()) << done[0].ToStatus();
  EXPECT_EQ(std::string(remote.bytes(), 32), std::string(32, 'a'));
}

TEST_F(IbverbsDeviceTest, FetchAddAndCompareSwapAreAtomicOnRemoteWords) {
  Connected c = Connect();
  ASSERT_NE(c.client, nullptr);
  Buffer remote = Register(server_.get(), kLocalWrite | kRemoteAtomic | kRemoteRead);
  Buffer local = Register(client_.get(), kLocalWrite);
  remote.words[0] = 100;
  remote.words[1] = 7;

  WorkRequest add;
  add.wr_id = 10;
  add.opcode = Opcode::kFetchAdd;
  add.local = local.mr.get();
  add.local_addr = &local.words[0];
  add.length = 8;
  add.remote_addr = reinterpret_cast<uint64_t>(&remote.words[0]);
  add.rkey = remote.mr->rkey();
  add.compare_add = 5;
  WorkRequest cas_hit = add;
  cas_hit.wr_id = 11;
  cas_hit.opcode = Opcode::kCompareSwap;
  cas_hit.local_addr = &local.words[1];
  cas_hit.remote_addr = reinterpret_cast<uint64_t>(&remote.words[1]);
  cas_hit.compare_add = 7;
  cas_hit.swap = 42;
  WorkRequest cas_miss = cas_hit;
  cas_miss.wr_id = 12;
  cas_miss.local_addr = &local.words[2];
  cas_miss.compare_add = 7;  // the word is 42 by now
  cas_miss.swap = 99;
  const WorkRequest wrs[] = {add, cas_hit, cas_miss};
  ASSERT_TRUE(c.client->PostSend(wrs).ok());
  std::vector<Completion> done = PollN(c.client.get(), 3);
  ASSERT_EQ(done.size(), 3u);
  for (const Completion& d : done) EXPECT_TRUE(d.ok()) << d.ToStatus();
  EXPECT_EQ(local.words[0], 100u);  // old value
  EXPECT_EQ(remote.words[0], 105u);
  EXPECT_EQ(local.words[1], 7u);
  EXPECT_EQ(local.words[2], 42u);
  EXPECT_EQ(remote.words[1], 42u);
}

TEST_F(IbverbsDeviceTest, AtomicWithWrongLengthIsRefusedLocally) {
  Connected c = Connect();
  ASSERT_NE(c.client, nullptr);
  Buffer local = Register(client_.get(), kLocalWrite);
  WorkRequest add;
  add.opcode = Opcode::kFetchAdd;
  add.local = local.mr.get();
  add.local_addr = local.bytes();
  add.length = 4;
  EXPECT_TRUE(absl::IsInvalidArgument(c.client->PostSend({&add, 1})));
  WorkRequest recv_as_send;
  recv_as_send.opcode = Opcode::kRecv;
  EXPECT_TRUE(absl::IsInvalidArgument(c.client->PostSend({&recv_as_send, 1})));
  EXPECT_EQ(c.client->state(), QpState::kReady);
}

TEST_F(IbverbsDeviceTest, UnsignalledBatchesNeverWedgeTheSendQueue) {
  QueuePairOptions options;
  options.max_send_wr = 64;
  Connected c = Connect("", "", options);
  ASSERT_NE(c.client, nullptr);
  Buffer remote = Register(server_.get(), kLocalWrite | kRemoteWrite);
  Buffer local = Register(client_.get(), kLocalWrite);
  // 100 batches of 16 unsignalled 64-byte writes, 25 times the queue depth;
  // the provider's forced signals must keep retiring them.
  constexpr int kBatches = 100;
  constexpr int kBatch = 16;
  std::vector<WorkRequest> batch(kBatch);
  for (int i = 0; i < kBatch; ++i) {
    batch[i].wr_id = i;
    batch[i].signaled = false;
    batch[i].local = local.mr.get();
    batch[i].local_addr = local.bytes() + 64 * i;
    batch[i].length = 64;
    batch[i].remote_addr = remote.mr->remote().addr + 64 * i;
    batch[i].rkey = remote.mr->rkey();
  }
  std::vector<Completion> scratch(16);
  const absl::Time deadline = absl::Now() + kTimeout;
  int posted = 0;
  while (posted < kBatches && absl::Now() < deadline) {
    const absl::Status s = c.client->PostSend(batch);
    if (absl::IsResourceExhausted(s)) {
      // Unsignalled successes produce no completions, but polling lets the
      // provider retire them.
      EXPECT_EQ(c.client->Poll(absl::MakeSpan(scratch)), 0);
      continue;
    }
    ASSERT_TRUE(s.ok()) << s;
    ++posted;
  }
  EXPECT_EQ(posted, kBatches);
  // One signalled write at the end completes, and nothing else reports.
  WorkRequest last = batch[0];
  last.wr_id = 999;
  last.signaled = true;
  absl::Status s;
  while (absl::IsResourceExhausted(s = c.client->PostSend({&last, 1})) && absl::Now() < deadline) {
    c.client->Poll(absl::MakeSpan(scratch));
  }
  ASSERT_TRUE(s.ok()) << s;
  std::vector<Completion> done = PollN(c.client.get(), 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].wr_id, 999u);
  EXPECT_TRUE(done[0].ok()) << done[0].ToStatus();
}

TEST_F(IbverbsDeviceTest, RemoteAccessErrorKillsTheQueuePairAndFlushesTheRest) {
  Connected c = Connect();
  ASSERT_NE(c.client, nullptr);
  // Read-only at the server: a WRITE must fail.
  Buffer remote = Register(server_.get(), kLocalWrite | kRemoteRead);
  Buffer local = Register(client_.get(), kLocalWrite);
  WorkRequest bad;
  bad.wr_id = 1;
  bad.local = local.mr.get();
  bad.local_addr = local.bytes();
  bad.length = 4096;
  bad.remote_addr = remote.mr->remote().addr;
  bad.rkey = remote.mr->rkey();
  WorkRequest unsignalled_after = bad;
  unsignalled_after.wr_id = 2;
  unsignalled_after.opcode = Opcode::kRead;
  unsignalled_after.signaled = false;
  WorkRequest after = unsignalled_after;
  after.wr_id = 3;
  after.signaled = true;
  const WorkRequest wrs[] = {bad, unsignalled_after, after};
  ASSERT_TRUE(c.client->PostSend(wrs).ok());
  std::vector<Completion> done = PollN(c.client.get(), 3);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[0].status, WcStatus::kRemoteAccessError) << done[0].ToStatus();
  EXPECT_THAT(done[0].detail, HasSubstr(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)));
  EXPECT_EQ(done[1].wr_id, 2u);
  EXPECT_EQ(done[1].status, WcStatus::kFlushed);
  EXPECT_EQ(done[2].wr_id, 3u);
  EXPECT_EQ(done[2].status, WcStatus::kFlushed);
  EXPECT_EQ(c.client->state(), QpState::kError);
  EXPECT_FALSE(c.client->error().ok());

  // Requests posted later are accepted and flushed; receives too.
  WorkRequest later = after;
  later.wr_id = 4;
  later.signaled = false;
  ASSERT_TRUE(c.client->PostSend({&later, 1}).ok());
  const RecvRequest recv{5};
  ASSERT_TRUE(c.client->PostRecv({&recv, 1}).ok());
  done = PollN(c.client.get(), 2);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].wr_id, 4u);
  EXPECT_EQ(done[0].status, WcStatus::kFlushed);
  EXPECT_EQ(done[1].wr_id, 5u);
  EXPECT_EQ(done[1].opcode, Opcode::kRecv);
  EXPECT_EQ(done[1].status, WcStatus::kFlushed);
}

TEST_F(IbverbsDeviceTest, WriteWithImmConsumesAReceiveAndDeliversTheImmediate) {
  Connected c = Connect();
  ASSERT_NE(c.client, nullptr);
  Buffer remote = Register(server_.get(), kLocalWrite | kRemoteWrite);
  Buffer local = Register(client_.get(), kLocalWrite);
  const RecvRequest recv{77};
  ASSERT_TRUE(c.server->PostRecv({&recv, 1}).ok());
  std::memcpy(local.bytes(), "priority", 8);
  WorkRequest write;
  write.wr_id = 8;
  write.opcode = Opcode::kWriteWithImm;
  write.local = local.mr.get();
  write.local_addr = local.bytes();
  write.length = 8;
  write.remote_addr = remote.mr->remote().addr;
  write.rkey = remote.mr->rkey();
  write.imm_data = 0xdeadbeef;
  ASSERT_TRUE(c.client->PostSend({&write, 1}).ok());
  std::vector<Completion> sent = PollN(c.client.get(), 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].ok()) << sent[0].ToStatus();
  std::vector<Completion> got = PollN(c.server.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].ok()) << got[0].ToStatus();
  EXPECT_EQ(got[0].wr_id, 77u);
  EXPECT_EQ(got[0].opcode, Opcode::kRecv);
  EXPECT_EQ(got[0].imm_data, 0xdeadbeefu);
  EXPECT_EQ(got[0].byte_len, 8u);
  EXPECT_EQ(std::string(remote.bytes(), 8), "priority");
}

TEST_F(IbverbsDeviceTest, FullSendQueueIsResourceExhaustedAndPostsNothing) {
  QueuePairOptions options;
  options.max_send_wr = 8;
  Connected c = Connect("", "", options);
  ASSERT_NE(c.client, nullptr);
  Buffer remote = Register(server_.get(), kLocalWrite | kRemoteWrite);
  Buffer local = Register(client_.get(), kLocalWrite);
  std::vector<WorkRequest> wrs(9);
  for (size_t i = 0; i < wrs.size(); ++i) {
    wrs[i].wr_id = i;
    wrs[i].local = local.mr.get();
    wrs[i].local_addr = local.bytes();
    wrs[i].length = 8;
    wrs[i].remote_addr = remote.mr->remote().addr;
    wrs[i].rkey = remote.mr->rkey();
  }
  EXPECT_TRUE(absl::IsResourceExhausted(c.client->PostSend(wrs)));
  ASSERT_TRUE(c.client->PostSend(absl::MakeSpan(wrs).subspan(0, 8)).ok());
  std::vector<Completion> done = PollN(c.client.get(), 8);
  ASSERT_EQ(done.size(), 8u);
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].wr_id, i);
    EXPECT_TRUE(done[i].ok()) << done[i].ToStatus();
  }
}

}  // namespace
}  // namespace dreplay::verbs
