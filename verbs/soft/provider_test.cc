// Copyright dreplay authors.
//
// Tests of the soft provider's RC semantics: data correctness of every
// operation, traffic counts, ordering and atomicity. Access checks, errors,
// credits, setup and teardown: provider_errors_test.cc.

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

using ::dreplay::verbs::testing::Buffer;
using ::dreplay::verbs::testing::CompareSwap;
using ::dreplay::verbs::testing::ConnectPair;
using ::dreplay::verbs::testing::FetchAdd;
using ::dreplay::verbs::testing::FillPattern;
using ::dreplay::verbs::testing::kAllRemote;
using ::dreplay::verbs::testing::kTestTimeout;
using ::dreplay::verbs::testing::PollCompletions;
using ::dreplay::verbs::testing::QpPair;
using ::dreplay::verbs::testing::Read;
using ::dreplay::verbs::testing::SoftProviderTest;
using ::dreplay::verbs::testing::Write;
using ::testing::HasSubstr;

TEST_F(SoftProviderTest, NameIsSoft) { EXPECT_EQ(client_->name(), "soft"); }

TEST_F(SoftProviderTest, SetupCarriesPayloadBothWays) {
  auto pair = ConnectPair(client_.get(), server_.get(), {}, {}, "from client", "from server");
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->payload, "from client");
  EXPECT_EQ(pair->reply, "from server");
  EXPECT_EQ(pair->client->state(), QpState::kReady);
  EXPECT_EQ(pair->server->state(), QpState::kReady);
  EXPECT_THAT(pair->client->Describe(), HasSubstr("127.0.0.1"));
}

TEST_F(SoftProviderTest, RkeysAreDistinctAndNotSequential) {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<uint32_t> keys;
  for (int i = 0; i < 64; ++i) {
    buffers.push_back(Make(server_.get(), 64, kAllRemote));
    keys.push_back(buffers.back()->rkey());
  }
  std::vector<uint32_t> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
  int consecutive = 0;
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] == keys[i - 1] + 1) ++consecutive;
  }
  EXPECT_LT(consecutive, 2);
  EXPECT_EQ(std::count(keys.begin(), keys.end(), 0u), 0);
}

TEST_F(SoftProviderTest, RegisterMemoryRejectsBadArguments) {
  char buf[64];
  EXPECT_EQ(client_->RegisterMemory(nullptr, 64, kLocalWrite).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->RegisterMemory(buf, 0, kLocalWrite).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->RegisterMemory(buf, 64, 1u << 7).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->RegisterMemory(buf, 64, kRemoteWrite).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SoftProviderTest, TrafficCountsDataBytesOnBothSidesOfEveryOperation) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 4096, kLocalWrite);
  auto remote = Make(server_.get(), 4096, kAllRemote);
  EXPECT_EQ(pair.client->traffic(), QueuePairTraffic{});
  uint64_t id = 0;
  EXPECT_TRUE(RunOne(pair.client.get(), Write(++id, local.get(), 0, 1000, *remote, 0)).ok());
  EXPECT_TRUE(RunOne(pair.client.get(), Read(++id, local.get(), 0, 300, *remote, 64)).ok());
  EXPECT_TRUE(RunOne(pair.client.get(), FetchAdd(++id, local.get(), 2048, *remote, 2048, 1)).ok());
  QueuePairTraffic client;
  client.initiated_out = 1000 + 8;
  client.initiated_in = 300 + 8;
  EXPECT_EQ(pair.client->traffic(), client);
  // The server's side saw the same bytes as the peer's operations; they are
  // executed before the client's completions arrive.
  QueuePairTraffic server;
  server.peer_in = 1000 + 8;
  server.peer_out = 300 + 8;
  EXPECT_EQ(pair.server->traffic(), server);
  EXPECT_EQ(pair.client->traffic().total(), pair.server->traffic().total());
}

TEST_F(SoftProviderTest, WriteThenReadReturnsTheSameBytesForEverySize) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  constexpr size_t kMax = 1 << 20;
  auto local = Make(client_.get(), 2 * kMax, kLocalWrite);
  auto remote = Make(server_.get(), kMax, kAllRemote);
  uint64_t id = 0;
  for (uint32_t size :
       {1u, 7u, 64u, 256u, 257u, 4095u, 4096u, 65536u, static_cast<uint32_t>(kMax)}) {
    SCOPED_TRACE(size);
    FillPattern(local->data(), size, size);
    Completion w = RunOne(pair.client.get(), Write(++id, local.get(), 0, size, *remote, 0));
    EXPECT_TRUE(w.ok()) << w.ToStatus();
    EXPECT_EQ(w.opcode, Opcode::kWrite);
    EXPECT_EQ(w.wr_id, id);
    std::memset(local->data() + kMax, 0, size);
    Completion r = RunOne(pair.client.get(), Read(++id, local.get(), kMax, size, *remote, 0));
    EXPECT_TRUE(r.ok()) << r.ToStatus();
    EXPECT_EQ(r.opcode, Opcode::kRead);
    EXPECT_EQ(r.byte_len, size);
    EXPECT_EQ(std::memcmp(local->data(), local->data() + kMax, size), 0);
  }
}

TEST_F(SoftProviderTest, ManyWritesPostedTogetherAllLand) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  constexpr int kCount = 200;
  constexpr uint32_t kSize = 64;
  auto local = Make(client_.get(), 2 * kCount * kSize, kLocalWrite);
  auto remote = Make(server_.get(), kCount * kSize, kAllRemote);
  FillPattern(local->data(), kCount * kSize, 3);
  std::vector<WorkRequest> wrs;
  for (int i = 0; i < kCount; ++i) {
    wrs.push_back(Write(i, local.get(), i * kSize, kSize, *remote, i * kSize));
    wrs.back().signaled = (i == kCount - 1);
  }
  ASSERT_TRUE(pair.client->PostSend(wrs).ok());
  auto done = PollCompletions(pair.client.get(), 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].ok());
  EXPECT_EQ(done[0].wr_id, static_cast<uint64_t>(kCount - 1));
  Completion r = RunOne(pair.client.get(),
                        Read(1000, local.get(), kCount * kSize, kCount * kSize, *remote, 0));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::memcmp(local->data(), local->data() + kCount * kSize, kCount * kSize), 0);
  // Unsignalled successes leave nothing behind.
  Completion extra[4];
  EXPECT_EQ(pair.client->Poll(absl::MakeSpan(extra)), 0);
}

TEST_F(SoftProviderTest, FetchAddReturnsTheOldValueAndAdds) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 64, kLocalWrite);
  auto remote = Make(server_.get(), 64, kAllRemote);
  const uint64_t start = 40;
  std::memcpy(remote->data() + 8, &start, 8);
  Completion c = RunOne(pair.client.get(), FetchAdd(1, local.get(), 0, *remote, 8, 2));
  ASSERT_TRUE(c.ok()) << c.ToStatus();
  EXPECT_EQ(c.opcode, Opcode::kFetchAdd);
  uint64_t old;
  std::memcpy(&old, local->data(), 8);
  EXPECT_EQ(old, 40u);
  c = RunOne(pair.client.get(), Read(2, local.get(), 16, 8, *remote, 8));
  ASSERT_TRUE(c.ok());
  uint64_t now;
  std::memcpy(&now, local->data() + 16, 8);
  EXPECT_EQ(now, 42u);
}

TEST_F(SoftProviderTest, CompareSwapSwapsOnlyWhenTheValueMatches) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 64, kLocalWrite);
  auto remote = Make(server_.get(), 64, kAllRemote);
  const uint64_t start = 5;
  std::memcpy(remote->data(), &start, 8);
  // Mismatch: no swap, the current value comes back.
  Completion c = RunOne(pair.client.get(), CompareSwap(1, local.get(), 0, *remote, 0, 4, 99));
  ASSERT_TRUE(c.ok());
  uint64_t old;
  std::memcpy(&old, local->data(), 8);
  EXPECT_EQ(old, 5u);
  // Match: swapped.
  c = RunOne(pair.client.get(), CompareSwap(2, local.get(), 0, *remote, 0, 5, 99));
  ASSERT_TRUE(c.ok());
  std::memcpy(&old, local->data(), 8);
  EXPECT_EQ(old, 5u);
  c = RunOne(pair.client.get(), Read(3, local.get(), 8, 8, *remote, 0));
  ASSERT_TRUE(c.ok());
  uint64_t now;
  std::memcpy(&now, local->data() + 8, 8);
  EXPECT_EQ(now, 99u);
}

TEST_F(SoftProviderTest, WriteWithImmCompletesAReceiveAtTheTarget) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 4096, kLocalWrite);
  auto remote = Make(server_.get(), 4096, kAllRemote);
  RecvRequest rr{77};
  ASSERT_TRUE(pair.server->PostRecv({&rr, 1}).ok());
  FillPattern(local->data(), 1000, 9);
  WorkRequest wr = Write(5, local.get(), 0, 1000, *remote, 100);
  wr.opcode = Opcode::kWriteWithImm;
  wr.imm_data = 0xabcd1234;
  Completion c = RunOne(pair.client.get(), wr);
  ASSERT_TRUE(c.ok()) << c.ToStatus();
  EXPECT_EQ(c.opcode, Opcode::kWriteWithImm);
  auto recv = PollCompletions(pair.server.get(), 1);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_TRUE(recv[0].ok());
  EXPECT_EQ(recv[0].opcode, Opcode::kRecv);
  EXPECT_EQ(recv[0].wr_id, 77u);
  EXPECT_EQ(recv[0].imm_data, 0xabcd1234u);
  EXPECT_EQ(recv[0].byte_len, 1000u);
  // The receive completion orders the placement before this read.
  EXPECT_EQ(std::memcmp(remote->data() + 100, local->data(), 1000), 0);
}

TEST_F(SoftProviderTest, WriteWithImmWithoutAReceiveFailsWithRnr) {
  QpPair pair = Connect();
  ASSERT_NE(pair.client, nullptr);
  auto local = Make(client_.get(), 64, kLocalWrite);
  auto remote = Make(server_.get(), 64, kAllRemote);
  WorkRequest wr = Write(1, local.get(), 0, 8, *remote, 0);
  wr.opcode = Opcode::kWriteWithImm;
  Completion c = RunOne(pair.client.get(), wr);
  EXPECT_EQ(c.status, WcStatus::kRnrRetryExceeded);
  EXPECT_EQ(c.ToStatus().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pair.client->state(), QpState::kError);
}

// Two client QPs to one server: QP1 writes slot i and then its commit word;
// QP2 keeps reading all commit words and then all slots. A committed slot
// must always read complete. The writer waits for the reader to finish two
// rounds after every few slots, so the reader sees many partial states.
TEST_F(SoftProviderTest, ALaterWriteIsNeverVisibleBeforeAnEarlierOne) {
  QpPair writer = Connect();
  QpPair reader = Connect();
  ASSERT_NE(writer.client, nullptr);
  ASSERT_NE(reader.client, nullptr);
  constexpr int kSlots = 48;
  constexpr int kSlotsPerStep = 4;
  constexpr uint32_t kSlotBytes = 8192;
  constexpr size_t kCommitOffset = kSlots * kSlotBytes;
  constexpr size_t kTotal = kCommitOffset + kSlots * 8;
  auto remote = Make(server_.get(), kTotal, kAllRemote);
  auto source = Make(client_.get(), kTotal, kLocalWrite);
  auto view = Make(client_.get(), kTotal, kLocalWrite);
  for (int i = 0; i < kSlots; ++i) {
    FillPattern(source->data() + i * kSlotBytes, kSlotBytes, i + 1);
    const uint64_t commit = i + 1;
    std::memcpy(source->data() + kCommitOffset + i * 8, &commit, 8);
  }
  std::atomic<int> rounds{0};
  std::atomic<bool> writer_done{false};
  std::thread writing([&] {
    for (int step = 0; step < kSlots / kSlotsPerStep; ++step) {
      std::vector<WorkRequest> wrs;
      for (int i = step * kSlotsPerStep; i < (step + 1) * kSlotsPerStep; ++i) {
        wrs.push_back(
            Write(2 * i, source.get(), i * kSlotBytes, kSlotBytes, *remote, i * kSlotBytes));
        wrs.back().signaled = false;
        wrs.push_back(Write(2 * i + 1, source.get(), kCommitOffset + i * 8, 8, *remote,
                            kCommitOffset + i * 8));
        wrs.back().signaled = false;
      }
      wrs.back().signaled = true;
      ASSERT_TRUE(writer.client->PostSend(wrs).ok());
      auto done = PollCompletions(writer.client.get(), 1);
      ASSERT_EQ(done.size(), 1u);
      ASSERT_TRUE(done[0].ok()) << done[0].ToStatus();
      const int seen = rounds.load();
      const absl::Time deadline = absl::Now() + kTestTimeout;
      while (rounds.load() < seen + 2 && absl::Now() < deadline) {
        std::this_thread::yield();
      }
    }
    writer_done = true;
  });
  int partial_rounds = 0;
  int committed = 0;
  const absl::Time deadline = absl::Now() + kTestTimeout;
  while ((committed < kSlots || !writer_done) && absl::Now() < deadline) {
    WorkRequest reads[2] = {Read(1, view.get(), kCommitOffset, kSlots * 8, *remote, kCommitOffset),
                            Read(2, view.get(), 0, kCommitOffset, *remote, 0)};
    ASSERT_TRUE(reader.client->PostSend(reads).ok());
    auto done = PollCompletions(reader.client.get(), 2);
    ASSERT_EQ(done.size(), 2u);
    ASSERT_TRUE(done[0].ok() && done[1].ok());
    committed = 0;
    for (int i = 0; i < kSlots; ++i) {
      uint64_t commit;
      std::memcpy(&commit, view->data() + kCommitOffset + i * 8, 8);
      if (commit == 0) continue;
      ASSERT_EQ(commit, static_cast<uint64_t>(i + 1));
      ++committed;
      ASSERT_EQ(
          std::memcmp(view->data() + i * kSlotBytes, source->data() + i * kSlotBytes, kSlotBytes),
          0)
          << "slot " << i << " committed but not complete";
    }
    if (committed > 0 && committed < kSlots) ++partial_rounds;
    ++rounds;
  }
  writing.join();
  EXPECT_EQ(committed, kSlots);
  EXPECT_GE(partial_rounds, kSlots / kSlotsPerStep - 1);
}

TEST_F(SoftProviderTest, FetchAddsFromFourQueuePairsAreAtomic) {
  constexpr int kQps = 4;
  constexpr int kAddsPerQp = 10000;
  constexpr int kBatch = 16;
  auto counter = Make(server_.get(), 64, kAllRemote);
  std::vector<QpPair> pairs;
  for (int q = 0; q < kQps; ++q) pairs.push_back(Connect());
  std::vector<std::vector<uint64_t>> olds(kQps);
  std::vector<std::thread> threads;
  for (int q = 0; q < kQps; ++q) {
    threads.emplace_back([&, q] {
      auto results = Make(client_.get(), kBatch * 8, kLocalWrite);
      QueuePair* qp = pairs[q].client.get();
      for (int done = 0; done < kAddsPerQp; done += kBatch) {
        std::vector<WorkRequest> wrs;
        for (int i = 0; i < kBatch; ++i) {
          wrs.push_back(FetchAdd(i, results.get(), i * 8, *counter, 0, 1));
        }
        ASSERT_TRUE(qp->PostSend(wrs).ok());
        auto c = PollCompletions(qp, kBatch);
        ASSERT_EQ(c.size(), static_cast<size_t>(kBatch));
        for (int i = 0; i < kBatch; ++i) {
          ASSERT_TRUE(c[i].ok()) << c[i].ToStatus();
          uint64_t old;
          std::memcpy(&old, results->data() + c[i].wr_id * 8, 8);
          olds[q].push_back(old);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<uint64_t> all;
  for (const auto& o : olds) all.insert(all.end(), o.begin(), o.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kQps * kAddsPerQp));
  // Every old value 0 .. N-1 was returned exactly once.
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i);
  auto view = Make(client_.get(), 8, kLocalWrite);
  Completion c = RunOne(pairs[0].client.get(), Read(1, view.get(), 0, 8, *counter, 0));
  ASSERT_TRUE(c.ok());
  uint64_t total;
  std::memcpy(&total, view->data(), 8);
  EXPECT_EQ(total, static_cast<uint64_t>(kQps * kAddsPerQp));
}

// A spin lock made of COMPARE_SWAP guards a counter that is incremented with
// a READ and a WRITE: no increment may be lost.
TEST_F(SoftProviderTest, CompareSwapLockGivesMutualExclusion) {
  constexpr int kQps = 4;
  constexpr int kRounds = 150;
  auto shared = Make(server_.get(), 64, kAllRemote);  // [0]: lock, [8]: count
  std::vector<QpPair> pairs;
  for (int q = 0; q < kQps; ++q) pairs.push_back(Connect());
  std::vector<std::thread> threads;
  for (int q = 0; q < kQps; ++q) {
    threads.emplace_back([&, q] {
      auto local = Make(client_.get(), 64, kLocalWrite);
      QueuePair* qp = pairs[q].client.get();
      const uint64_t me = q + 1;
      for (int r = 0; r < kRounds; ++r) {
        for (;;) {  // acquire
          WorkRequest cas = CompareSwap(1, local.get(), 0, *shared, 0, 0, me);
          ASSERT_TRUE(qp->PostSend({&cas, 1}).ok());
          auto c = PollCompletions(qp, 1);
          ASSERT_EQ(c.size(), 1u);
          ASSERT_TRUE(c[0].ok());
          uint64_t old;
          std::memcpy(&old, local->data(), 8);
          if (old == 0) break;
        }
        WorkRequest read = Read(2, local.get(), 8, 8, *shared, 8);
        ASSERT_TRUE(qp->PostSend({&read, 1}).ok());
        auto c = PollCompletions(qp, 1);
        ASSERT_EQ(c.size(), 1u);
        ASSERT_TRUE(c[0].ok());
        uint64_t count;
        std::memcpy(&count, local->data() + 8, 8);
        ++count;
        std::memcpy(local->data() + 16, &count, 8);
        // The WRITE is placed before the release on the same QP.
        WorkRequest ops[2] = {Write(3, local.get(), 16, 8, *shared, 8),
                              CompareSwap(4, local.get(), 24, *shared, 0, me, 0)};
        ops[0].signaled = false;
        ASSERT_TRUE(qp->PostSend(ops).ok());
        c = PollCompletions(qp, 1);
        ASSERT_EQ(c.size(), 1u);
        ASSERT_TRUE(c[0].ok());
        uint64_t released;
        std::memcpy(&released, local->data() + 24, 8);
        ASSERT_EQ(released, me);
      }
    });
  }
  for (auto& t : threads) t.join();
  auto view = Make(client_.get(), 16, kLocalWrite);
  Completion c = RunOne(pairs[0].client.get(), Read(1, view.get(), 0, 16, *shared, 0));
  ASSERT_TRUE(c.ok());
  uint64_t lock, count;
  std::memcpy(&lock, view->data(), 8);
  std::memcpy(&count, view->data() + 8, 8);
  EXPECT_EQ(lock, 0u);
  EXPECT_EQ(count, static_cast<uint64_t>(kQps * kRounds));
}

}  // namespace
}  // namespace dreplay::verbs
