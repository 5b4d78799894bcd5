// Copyright dreplay authors.
//
// The learner cache and link compression, against a fake server whose
// staging ring the test writes: references (kEntryCachedBit) and packed
// blocks are staged exactly as the test says.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/session.h"
#include "common/frame_codec.h"
#include "common/shared_words.h"
#include "gtest/gtest.h"
#include "learner_client/batch_reader.h"
#include "learner_client/priority_writer.h"
#include "protocol/handshake.h"
#include "protocol/key_grant.h"
#include "replay_server/regions.h"
#include "testing/in_process_service.h"

namespace dreplay::learner {
namespace {

using client::ClientSession;
using protocol::Role;
using testing::SmallServerOptions;
using testing::SoftProvider;

constexpr uint32_t kPayloadBytes = 100;
constexpr absl::Duration kBatchTimeout = absl::Seconds(10);

std::vector<uint8_t> PayloadOf(uint64_t sequence) {
  std::vector<uint8_t> p(kPayloadBytes, static_cast<uint8_t>(sequence * 7 + 1));
  std::memcpy(p.data(), &sequence, sizeof(sequence));
  return p;
}
uint64_t InsertTimeOf(uint64_t sequence) { return 1'000'000 + sequence; }

class FakeStagingServer {
 public:
  // With `link_codec`, the policy says batches may be packed with it (as
  // replay_server --link_codec writes it).
  explicit FakeStagingServer(verbs::Provider* provider,
                             protocol::LinkCodec link_codec = protocol::LinkCodec::kNone)
      : provider_(provider) {
    protocol::LayoutConfig config = SmallServerOptions().layout;
    config.capacity = 16;
    config.leases = 1;
    config.batch_size = 4;
    config.staging_depth = 4;
    regions_ = *server::ReplayRegions::Create(config);
    regions_->control()->server.epoch = 1;
    regions_->control()->policy.link_codec = static_cast<uint32_t>(link_codec);
    for (uint32_t k = 0; k < protocol::kNumRegionKinds; ++k) {
      const auto kind = static_cast<protocol::RegionKind>(k);
      if (!protocol::RoleNeedsRegion(Role::kLearner, kind, config, false)) continue;
      auto mr = *provider_->RegisterMemory(
          regions_->region(kind), regions_->region_bytes(kind),
          verbs::kLocalWrite | protocol::RoleAccess(Role::kLearner, kind, false));
      const verbs::RemoteRegion r = mr->remote();
      directory_.Set(kind, protocol::WireRegion{r.addr, r.length, r.rkey, 0});
      mrs_.push_back(std::move(mr));
    }
    listener_ = *provider_->Listen("127.0.0.1", 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeStagingServer() {
    stop_ = true;
    listener_->Shutdown();
    thread_.join();
    qps_.clear();  // before the memory goes
    mrs_.clear();
  }

  uint16_t port() const { return listener_->port(); }
  const protocol::LayoutConfig& config() const { return regions_->config(); }
  bool learner_cache() const { return learner_cache_; }
  const server::ReplayRegions& regions() const { return *regions_; }

  struct Entry {
    uint64_t sequence;
    bool cached;                  // staged as a reference only
    float priority_alpha = 1.0f;  // p^alpha as sampled
  };
  enum class Packing {
    kRaw,      // the copied slots as they are
    kZstd,     // one zstd block of them
    kGarbage,  // a block of the same length that is no zstd frame
  };
  // Stages batch `n` of epoch 1: the entries, the copied slots of those not
  // cached (packed as `packing` says), and the commit line last.
  void Stage(uint64_t n, const std::vector<Entry>& entries, Packing packing = Packing::kRaw) {
    const protocol::LayoutConfig& c = config();
    uint8_t* img = regions_->staging_slot(n);
    auto* header = reinterpret_cast<protocol::BatchHeader*>(img);
    auto* staged = reinterpret_cast<protocol::BatchEntry*>(img + protocol::StagingEntriesOffset(c));
    uint8_t* slot = img + protocol::StagingPayloadsOffset(c);
    uint32_t payload_count = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      const uint64_t q = entries[i].sequence;
      staged[i].slot_sequence = q;
      staged[i].slot_index = static_cast<uint32_t>(protocol::LeaseSlotIndex(c, 0, q));
      staged[i].priority_alpha = entries[i].priority_alpha;
      if (entries[i].cached) {
        staged[i].slot_index |= protocol::kEntryCachedBit;
        continue;
      }
      const std::vector<uint8_t> payload = PayloadOf(q);
      ASSERT_TRUE(protocol::SealSlot(slot, c.slot_size, q, 0, 1.0f, InsertTimeOf(q), payload.data(),
                                     kPayloadBytes)
                      .ok());
      slot += c.slot_size;
      ++payload_count;
    }
    *header = protocol::BatchHeader{};
    header->batch_number = n;
    header->epoch = 1;
    header->count = static_cast<uint32_t>(entries.size());
    header->size = c.capacity;
    header->beta = 0.4f;
    header->payload_count = payload_count;
    if (packing != Packing::kRaw) {
      uint8_t* area = img + protocol::StagingPayloadsOffset(c);
      const std::vector<uint8_t> raw(area, area + uint64_t{payload_count} * c.slot_size);
      std::unique_ptr<FrameCodec> codec = *FrameCodec::Create({CodecKind::kZstd, 1});
      std::vector<uint8_t> block(codec->MaxCompressedSize(raw.size()));
      const size_t packed = *codec->Compress(raw, absl::MakeSpan(block));
      ASSERT_LT(packed, raw.size());
      if (packing == Packing::kGarbage) std::fill(block.begin(), block.end(), 0xFF);
      std::memcpy(area, block.data(), packed);
      header->packed_bytes = static_cast<uint32_t>(packed);
    }
    header->used_bytes = protocol::StagingPayloadsOffset(c) +
                         protocol::StagedPayloadBytes(c, payload_count, header->packed_bytes);
    header->checksum = protocol::BatchChecksumBytes(
        c, img, header->count, header->used_bytes - protocol::StagingPayloadsOffset(c));
    auto* line = reinterpret_cast<protocol::CommitLine*>(img + protocol::StagingCommitOffset(c));
    StoreRelease(&line->used_bytes, header->used_bytes);
    StoreRelease(&line->entry_bytes,
                 uint64_t{header->count + header->record_count} * sizeof(protocol::BatchEntry));
    StoreRelease(&line->commit, protocol::BatchCommitValue(n));
  }

 private:
  void Serve() {
    while (!stop_) {
      absl::StatusOr<std::unique_ptr<verbs::PendingConnection>> pending =
          listener_->Accept(absl::Milliseconds(50));
      if (!pending.ok()) continue;
      if (protocol::IsChallengeRequest((*pending)->payload())) {
        (*pending)->Reject(protocol::ChallengeReason(*protocol::RandomNonce()));
        continue;
      }
      // No token: the hello's MAC and the accept proof are not checked.
      absl::StatusOr<protocol::Hello> hello = protocol::DecodeHello((*pending)->payload());
      if (!hello.ok()) {
        (*pending)->Reject(std::string(hello.status().message()));
        continue;
      }
      learner_cache_ = hello->learner_cache;
      auto qp = (*pending)->Accept(
          protocol::EncodeAccept(protocol::WithoutKeys(directory_), protocol::Mac{}), {});
      if (!qp.ok()) continue;
      GrantKeys(qp->get(), *hello);
      qps_.push_back(std::move(*qp));
    }
  }

  // WRITEs the keys (protocol/key_grant.h): the grant, then its commit word.
  void GrantKeys(verbs::QueuePair* qp, const protocol::Hello& hello) {
    grants_.push_back(
        std::make_unique<protocol::KeyGrantMessage>(protocol::MakeKeyGrant("", hello, directory_)));
    protocol::KeyGrantMessage* grant = grants_.back().get();
    mrs_.push_back(*provider_->RegisterMemory(grant, sizeof(*grant), verbs::kLocalWrite));
    verbs::WorkRequest wrs[2];
    for (verbs::WorkRequest& wr : wrs) {
      wr.opcode = verbs::Opcode::kWrite;
      wr.signaled = false;
      wr.local = mrs_.back().get();
      wr.rkey = hello.grant.rkey;
    }
    wrs[0].local_addr = grant;
    wrs[0].length = protocol::kGrantCommitOffset;
    wrs[0].remote_addr = hello.grant.addr;
    wrs[1].local_addr = &grant->commit;
    wrs[1].length = sizeof(uint64_t);
    wrs[1].remote_addr = hello.grant.addr + protocol::kGrantCommitOffset;
    EXPECT_TRUE(qp->PostSend(absl::MakeConstSpan(wrs)).ok());
  }

  verbs::Provider* const provider_;
  std::vector<std::unique_ptr<protocol::KeyGrantMessage>> grants_;
  std::unique_ptr<server::ReplayRegions> regions_;
  std::vector<std::unique_ptr<verbs::MemoryRegion>> mrs_;
  protocol::RegionDirectory directory_;
  std::unique_ptr<verbs::Listener> listener_;
  std::vector<std::unique_ptr<verbs::QueuePair>> qps_;  // the serving thread's until joined
  std::atomic<bool> stop_{false};
  std::atomic<bool> learner_cache_{false};
  std::thread thread_;
};

class LearnerCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_host_ = SoftProvider();
    learner_host_ = SoftProvider();
  }
  std::unique_ptr<ClientSession> Connect(const FakeStagingServer& fake, bool cache) {
    client::ClientSessionOptions o;
    o.host = "127.0.0.1";
    o.port = fake.port();
    o.role = Role::kLearner;
    o.heartbeat = false;
    o.insecure = true;  // the fake server has no token
    o.learner_cache = cache;
    auto session = ClientSession::Connect(learner_host_.get(), o);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? std::move(*session) : nullptr;
  }

  // Next batch; checks every entry returned against its sequence.
  static StagedBatch NextChecked(BatchReader* reader) {
    absl::StatusOr<StagedBatch> batch = reader->Next(kBatchTimeout);
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok()) return StagedBatch();
    for (uint32_t i = 0; i < batch->size(); ++i) {
      const uint64_t q = batch->entry(i).slot_sequence;
      EXPECT_FALSE(protocol::EntryCached(batch->entry(i)));
      EXPECT_EQ(batch->entry(i).slot_index, q % 16);
      EXPECT_EQ(batch->slot_header(i).sequence, q) << "a stale slot";
      EXPECT_EQ(batch->insert_time_ns(i), InsertTimeOf(q));
      const absl::Span<const uint8_t> p = batch->payload(i);
      EXPECT_EQ(std::vector<uint8_t>(p.begin(), p.end()), PayloadOf(q)) << "a stale payload";
    }
    return *batch;
  }
  static std::vector<uint64_t> Sequences(const StagedBatch& b) {
    std::vector<uint64_t> out;
    for (uint32_t i = 0; i < b.size(); ++i) out.push_back(b.entry(i).slot_sequence);
    return out;
  }
  static std::vector<bool> Arrived(const StagedBatch& b) {
    std::vector<bool> out;
    for (uint32_t i = 0; i < b.size(); ++i) out.push_back(b.arrived(i));
    return out;
  }

  std::unique_ptr<verbs::Provider> server_host_;
  std::unique_ptr<verbs::Provider> learner_host_;
};

TEST_F(LearnerCacheTest, ServesHitsAndNeverAStalePayloadWhenSlotsAreOverwritten) {
  FakeStagingServer fake(server_host_.get());
  // Capacity 16: sequence q lives in slot q % 16, so 17 overwrites 1.
  fake.Stage(0, {{1, false}, {2, false}, {3, false}});
  fake.Stage(1, {{1, true}, {4, false}, {2, true}});
  fake.Stage(2, {{17, true}, {5, true}, {6, false}});  // 17 and 5 were never received
  fake.Stage(3, {{17, false}, {2, true}});             // slot 1 now holds 17
  auto session = Connect(fake, /*cache=*/true);
  ASSERT_NE(session, nullptr);
  EXPECT_TRUE(fake.learner_cache());
  BatchReaderOptions options;
  options.learner_cache = true;
  auto reader = *BatchReader::Create(session.get(), options);
  auto priorities = *PriorityWriter::Create(session.get());

  StagedBatch b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(Arrived(b), (std::vector<bool>{true, true, true}));
  b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{1, 4, 2}));
  EXPECT_EQ(Arrived(b), (std::vector<bool>{false, true, false}));
  b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{6}));  // the misses are left out
  EXPECT_EQ(b.header().count, 3u);
  // The priority update answers the entries returned, and only those.
  ASSERT_TRUE(priorities->Write(b, {0.25f}).ok());
  ASSERT_TRUE(priorities->Flush().ok());
  const auto* update =
      reinterpret_cast<const protocol::MailboxHeader*>(fake.regions().mailbox_entry(2));
  EXPECT_EQ(update->count, 1u);
  const auto* record = reinterpret_cast<const protocol::PriorityRecord*>(
      fake.regions().mailbox_entry(2) + protocol::MailboxRecordsOffset(fake.config()));
  EXPECT_EQ(record->slot_sequence, 6u);
  EXPECT_EQ(record->slot_index, 6u);
  b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{17, 2}));
  EXPECT_EQ(Arrived(b), (std::vector<bool>{true, false}));
  // Slot 1 was overwritten under the cache: a reference to 1 is a miss now.
  fake.Stage(4, {{1, true}, {17, true}, {7, false}});
  b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{17, 7}));
  EXPECT_EQ(Arrived(b), (std::vector<bool>{false, true}));

  const BatchReaderStats& stats = reader->stats();
  EXPECT_EQ(stats.cache_hits, 4u);
  EXPECT_EQ(stats.cache_misses, 3u);
  EXPECT_EQ(stats.transitions_fetched, 7u);  // 1 2 3 4 6 17 7
  EXPECT_EQ(stats.distinct_transitions_fetched, 7u);
  EXPECT_EQ(stats.transitions, 3u + 3 + 1 + 2 + 2);
  // Only the copied slots crossed the link as experience.
  EXPECT_EQ(session->link_bytes().experience, stats.transitions_fetched * fake.config().slot_size);
}

TEST_F(LearnerCacheTest, WithoutTheCacheEveryReferenceIsAMiss) {
  FakeStagingServer fake(server_host_.get());
  fake.Stage(0, {{1, false}, {2, false}});
  fake.Stage(1, {{1, true}, {3, false}, {1, false}});
  auto session = Connect(fake, /*cache=*/false);
  ASSERT_NE(session, nullptr);
  EXPECT_FALSE(fake.learner_cache());
  auto reader = *BatchReader::Create(session.get(), {});
  EXPECT_EQ(Sequences(NextChecked(reader.get())), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(Sequences(NextChecked(reader.get())), (std::vector<uint64_t>{3, 1}));
  EXPECT_EQ(reader->stats().cache_hits, 0u);
  EXPECT_EQ(reader->stats().cache_misses, 1u);
  EXPECT_EQ(reader->stats().transitions_fetched, 4u);
  EXPECT_EQ(reader->stats().distinct_transitions_fetched, 3u);
}

TEST_F(LearnerCacheTest, WeightsAreThoseOfTheBatchAsStagedMissesIncluded) {
  FakeStagingServer fake(server_host_.get());
  // Beta 0.4 (the fake's): w = (min p^alpha / p^alpha)^0.4, the minimum
  // being the miss's 1.
  fake.Stage(0, {{1, true, 1.0f}, {2, false, 4.0f}, {3, false, 16.0f}});
  auto session = Connect(fake, /*cache=*/false);
  ASSERT_NE(session, nullptr);
  auto reader = *BatchReader::Create(session.get(), {});
  const StagedBatch b = NextChecked(reader.get());
  ASSERT_EQ(Sequences(b), (std::vector<uint64_t>{2, 3}));
  EXPECT_FLOAT_EQ(b.header().beta, 0.4f);
  EXPECT_EQ(b.priority_alpha(0), 4.0f);
  EXPECT_EQ(b.priority_alpha(1), 16.0f);
  EXPECT_FLOAT_EQ(b.weight(0), std::pow(0.25f, 0.4f));
  EXPECT_FLOAT_EQ(b.weight(1), std::pow(0.0625f, 0.4f));
}

// Link compression: a packed batch is unpacked before its entries are
// built; a block that does not decompress (its checksum held: the server
// staged it so) is never handed over, and the batch is read again.
TEST_F(LearnerCacheTest, PackedBatchesAreUnpackedAndABadBlockIsNeverHandedOver) {
  FakeStagingServer fake(server_host_.get(), protocol::LinkCodec::kZstd);
  using Packing = FakeStagingServer::Packing;
  fake.Stage(0, {{1, false}, {2, false}, {3, false}}, Packing::kZstd);
  auto session = Connect(fake, /*cache=*/true);
  ASSERT_NE(session, nullptr);
  BatchReaderOptions options;
  options.learner_cache = true;
  auto reader = *BatchReader::Create(session.get(), options);
  StagedBatch b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_GT(b.header().packed_bytes, 0u);
  EXPECT_EQ(reader->stats().unpacked_bytes, 3 * fake.config().slot_size);
  // Only the block crossed the link as experience.
  EXPECT_EQ(session->link_bytes().experience, b.header().packed_bytes);

  fake.Stage(1, {{4, false}, {5, false}}, Packing::kGarbage);
  const absl::StatusOr<StagedBatch> bad = reader->Next(absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(bad.status())) << bad.status();
  EXPECT_GE(reader->stats().bad_slots, 1u);
  EXPECT_EQ(reader->stats().unpacked_bytes, 3 * fake.config().slot_size);
  // Staged again, well packed, with a reference to a slot the cache took
  // from the packed batch: both are served.
  fake.Stage(1, {{4, false}, {2, true}}, Packing::kZstd);
  b = NextChecked(reader.get());
  EXPECT_EQ(Sequences(b), (std::vector<uint64_t>{4, 2}));
  EXPECT_EQ(Arrived(b), (std::vector<bool>{true, false}));
  EXPECT_EQ(reader->stats().cache_hits, 1u);
  EXPECT_EQ(reader->stats().unpacked_bytes, 4 * fake.config().slot_size);
}

TEST_F(LearnerCacheTest, APackedBatchFromAServerWhosePolicyNamesNoCodecIsNeverHandedOver) {
  FakeStagingServer fake(server_host_.get());
  fake.Stage(0, {{1, false}, {2, false}}, FakeStagingServer::Packing::kZstd);
  auto session = Connect(fake, /*cache=*/false);
  ASSERT_NE(session, nullptr);
  auto reader = *BatchReader::Create(session.get(), {});
  const absl::StatusOr<StagedBatch> b = reader->Next(absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(b.status())) << b.status();
  EXPECT_GE(reader->stats().bad_slots, 1u);
}

}  // namespace
}  // namespace dreplay::learner
