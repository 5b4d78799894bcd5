// Copyright dreplay authors.
//
// A multi-threaded stress test of the soft provider, meant to be run under
// ThreadSanitizer too (bazel test --config=tsan //verbs/soft:stress_test):
// both sides of several queue pairs post mixed traffic at the same time
// (WRITE, READ back, FETCH_ADD, WRITE_WITH_IMM), while another thread keeps
// connecting, using and destroying queue pairs (some with requests in
// flight) and registering and deregistering memory.

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "verbs/soft/provider.h"
#include "verbs/soft/test_util.h"

namespace dreplay::verbs {
namespace {

using ::dreplay::verbs::testing::Buffer;
using ::dreplay::verbs::testing::ConnectPair;
using ::dreplay::verbs::testing::FetchAdd;
using ::dreplay::verbs::testing::kTestTimeout;
using ::dreplay::verbs::testing::MakeBuffer;
using ::dreplay::verbs::testing::PollCompletions;
using ::dreplay::verbs::testing::QpPair;
using ::dreplay::verbs::testing::Read;
using ::dreplay::verbs::testing::Write;

constexpr uint32_t kAllRemote = kLocalWrite | kRemoteRead | kRemoteWrite | kRemoteAtomic;
constexpr int kPairs = 3;
constexpr int kIterations = 1000;
constexpr int kImmEvery = 10;  // every 10th iteration also sends an immediate
constexpr int kImmCount = kIterations / kImmEvery;
constexpr int kChurnRounds = 60;
constexpr uint32_t kSizes[] = {8, 100, 256, 300, 4096, 20000};
constexpr size_t kRegionBytes = 32 * 1024;

// One side of a queue pair: writes into the peer's region, reads it back and
// checks, adds to the shared counter, and sends immediates to the peer.
struct Worker {
  QueuePair* qp = nullptr;
  Buffer* peer_region = nullptr;  // registered by the other provider
  Buffer* counter = nullptr;      // registered by the other provider
  std::unique_ptr<Buffer> local;  // [0, kRegionBytes): source; then: view
  int adds = 0;
  int imm_received = 0;

  void Run(uint32_t seed) {
    std::vector<Completion> pending;
    for (int it = 0; it < kIterations; ++it) {
      const uint32_t size = kSizes[(it + seed) % (sizeof(kSizes) / 4)];
      uint8_t* source = local->data();
      for (uint32_t i = 0; i < size; ++i) {
        source[i] = static_cast<uint8_t>(seed * 31 + it * 7 + i);
      }
      std::vector<WorkRequest> wrs;
      wrs.push_back(Write(1, local.get(), 0, size, *peer_region, 0));
      wrs.back().signaled = false;
      wrs.push_back(Read(2, local.get(), kRegionBytes, size, *peer_region, 0));
      wrs.push_back(FetchAdd(3, local.get(), 2 * kRegionBytes, *counter, 0, 1));
      int expected = 2;
      if (it % kImmEvery == 0) {
        WorkRequest imm = Write(4, local.get(), 0, 8, *peer_region, 64);
        imm.opcode = Opcode::kWriteWithImm;
        imm.imm_data = seed;
        wrs.push_back(imm);
        ++expected;
      }
      ASSERT_TRUE(qp->PostSend(wrs).ok());
      int seen = 0;
      const absl::Time deadline = absl::Now() + kTestTimeout;
      Completion batch[8];
      while (seen < expected && absl::Now() < deadline) {
        const int n = qp->Poll(absl::MakeSpan(batch));
        for (int i = 0; i < n; ++i) {
          ASSERT_TRUE(batch[i].ok()) << batch[i].ToStatus();
          if (batch[i].opcode == Opcode::kRecv) {
            ++imm_received;
            continue;
          }
          ++seen;
          if (batch[i].opcode == Opcode::kFetchAdd) ++adds;
        }
      }
      ASSERT_EQ(seen, expected);
      // The READ was posted after the WRITE on this queue pair: it sees it.
      ASSERT_EQ(std::memcmp(local->data() + kRegionBytes, source, size), 0)
          << "iteration " << it << " size " << size;
    }
    // The peer's immediates may still be on their way.
    const absl::Time deadline = absl::Now() + kTestTimeout;
    Completion c;
    while (imm_received < kImmCount && absl::Now() < deadline) {
      if (qp->Poll({&c, 1}) == 1) {
        ASSERT_TRUE(c.ok()) << c.ToStatus();
        ASSERT_EQ(c.opcode, Opcode::kRecv);
        ++imm_received;
      }
    }
  }
};

TEST(SoftStressTest, ConcurrentTrafficChurnAndRegistrationStayConsistent) {
  auto client = *CreateSoftProvider(testing::TestProviderOptions());
  auto server = *CreateSoftProvider(testing::TestProviderOptions());
  // Client-side workers add to the server's counter and the other way round.
  auto server_counter = *MakeBuffer(server.get(), 64, kAllRemote);
  auto client_counter = *MakeBuffer(client.get(), 64, kAllRemote);

  std::vector<QpPair> pairs;
  std::vector<std::unique_ptr<Buffer>> client_regions, server_regions;
  std::vector<Worker> workers(2 * kPairs);
  for (int p = 0; p < kPairs; ++p) {
    auto pair = ConnectPair(client.get(), server.get());
    ASSERT_TRUE(pair.ok()) << pair.status();
    pairs.push_back(std::move(*pair));
    client_regions.push_back(*MakeBuffer(client.get(), kRegionBytes, kAllRemote));
    server_regions.push_back(*MakeBuffer(server.get(), kRegionBytes, kAllRemote));
    Worker& c = workers[2 * p];
    c.qp = pairs[p].client.get();
    c.peer_region = server_regions[p].get();
    c.local = *MakeBuffer(client.get(), 3 * kRegionBytes, kLocalWrite);
    Worker& s = workers[2 * p + 1];
    s.qp = pairs[p].server.get();
    s.peer_region = client_regions[p].get();
    s.local = *MakeBuffer(server.get(), 3 * kRegionBytes, kLocalWrite);
    c.counter = server_counter.get();
    s.counter = client_counter.get();
    for (Worker* w : {&c, &s}) {
      std::vector<RecvRequest> recvs(kImmCount, RecvRequest{9});
      ASSERT_TRUE(w->qp->PostRecv(recvs).ok());
    }
  }

  std::atomic<bool> stop{false};
  std::atomic<int> churned{0};
  std::thread churn([&] {
    for (int round = 0; round < kChurnRounds && !stop; ++round) {
      auto pair = ConnectPair(client.get(), server.get());
      ASSERT_TRUE(pair.ok()) << pair.status();
      auto scratch = *MakeBuffer(server.get(), 4096, kAllRemote);
      auto local = *MakeBuffer(client.get(), 4096, kLocalWrite);
      WorkRequest wrs[2] = {Write(1, local.get(), 0, 4096, *scratch, 0),
                            Read(2, local.get(), 0, 4096, *scratch, 0)};
      ASSERT_TRUE(pair->client->PostSend(wrs).ok());
      if (round % 2 == 0) {
        ASSERT_EQ(PollCompletions(pair->client.get(), 2).size(), 2u);
      }
      // Odd rounds: destroyed with the requests in flight. Either way the
      // queue pairs go before the memory they name.
      pair->client.reset();
      pair->server.reset();
      ++churned;
    }
  });

  std::vector<std::thread> threads;
  for (size_t i = 0; i < workers.size(); ++i) {
    threads.emplace_back([&, i] { workers[i].Run(static_cast<uint32_t>(i + 1)); });
  }
  for (auto& t : threads) t.join();
  stop = true;
  churn.join();

  int adds = 0;
  for (const Worker& w : workers) {
    adds += w.adds;
    EXPECT_EQ(w.imm_received, kImmCount);
  }
  EXPECT_EQ(adds, 2 * kPairs * kIterations);
  EXPECT_GT(churned.load(), 0);
  // Each counter is read by the side that does not own it.
  uint64_t total = 0;
  for (int side = 0; side < 2; ++side) {
    QueuePair* qp = side == 0 ? pairs[0].client.get() : pairs[0].server.get();
    Provider* reader = side == 0 ? client.get() : server.get();
    const Buffer& target = side == 0 ? *server_counter : *client_counter;
    auto view = *MakeBuffer(reader, 8, kLocalWrite);
    WorkRequest read = Read(1, view.get(), 0, 8, target, 0);
    ASSERT_TRUE(qp->PostSend({&read, 1}).ok());
    auto done = PollCompletions(qp, 1);
    ASSERT_EQ(done.size(), 1u);
    ASSERT_TRUE(done[0].ok()) << done[0].ToStatus();
    uint64_t value;
    std::memcpy(&value, view->data(), 8);
    EXPECT_EQ(value, static_cast<uint64_t>(kPairs * kIterations));
    total += value;
  }
  EXPECT_EQ(total, static_cast<uint64_t>(adds));
}

}  // namespace
}  // namespace dreplay::verbs
