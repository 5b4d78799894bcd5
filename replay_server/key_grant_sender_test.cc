// Copyright dreplay authors.

#include "replay_server/key_grant_sender.h"

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "protocol/handshake.h"
#include "protocol/key_grant.h"
#include "verbs/verbs.h"

namespace dreplay::server {
namespace {

constexpr absl::Duration kTestTimeout = absl::Seconds(20);

std::unique_ptr<verbs::Provider> Soft() {
  verbs::ProviderOptions options;
  options.kind = verbs::ProviderKind::kSoft;
  return verbs::CreateProvider(options).value();
}

// A connected pair over loopback: the server side's send queue holds
// `server_send_wr` requests.
struct Pair {
  std::unique_ptr<verbs::QueuePair> client;
  std::unique_ptr<verbs::QueuePair> server;
};

Pair Connect(verbs::Provider* client_host, verbs::Provider* server_host, int server_send_wr) {
  std::unique_ptr<verbs::Listener> listener = server_host->Listen("127.0.0.1", 0).value();
  Pair pair;
  std::thread client([&] {
    verbs::QueuePairOptions o;
    o.connect_timeout = kTestTimeout;
    pair.client = client_host->Connect("127.0.0.1", listener->port(), "hello", o).value().qp;
  });
  std::unique_ptr<verbs::PendingConnection> pending = listener->Accept(kTestTimeout).value();
  verbs::QueuePairOptions o;
  o.max_send_wr = server_send_wr;
  pair.server = pending->Accept("welcome", o).value();
  client.join();
  return pair;
}

TEST(KeyGrantSenderTest, SlotsAreTakenUntilNoneIsLeftAndComeBackWhenReleased) {
  auto host = Soft();
  auto sender = KeyGrantSender::Create(host.get(), 2).value();
  const KeyGrantSender::Slot a = sender->Take().value();
  const KeyGrantSender::Slot b = sender->Take().value();
  EXPECT_NE(a, b);
  EXPECT_NE(sender->message(a), sender->message(b));
  const absl::StatusOr<KeyGrantSender::Slot> none = sender->Take();
  EXPECT_TRUE(absl::IsResourceExhausted(none.status())) << none.status();
  sender->Release(a);
  EXPECT_EQ(sender->free_slots(), 1u);
  EXPECT_EQ(sender->Take().value(), a);
}

TEST(KeyGrantSenderTest, RefusesNoSlotsAndNoProvider) {
  auto host = Soft();
  EXPECT_TRUE(absl::IsInvalidArgument(KeyGrantSender::Create(host.get(), 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(KeyGrantSender::Create(nullptr, 4).status()));
}

// The grant's two WRITEs and the windows go through a send queue of one
// request: posted one after another as room frees, in order.
TEST(KeyGrantSenderTest, GrantsThroughASendQueueOfOneRequest) {
  auto client_host = Soft();
  auto server_host = Soft();
  Pair pair = Connect(client_host.get(), server_host.get(), /*server_send_wr=*/1);
  ASSERT_EQ(pair.server->max_send_wr(), 1);

  // The client's grant region and a server region to bind windows over.
  std::vector<uint8_t> grant_bytes(protocol::kGrantRegionBytes, 0);
  auto grant_mr = client_host
                      ->RegisterMemory(grant_bytes.data(), grant_bytes.size(),
                                       verbs::kLocalWrite | verbs::kRemoteWrite)
                      .value();
  std::vector<uint8_t> region(4096, 0);
  auto region_mr = server_host
                       ->RegisterMemory(region.data(), region.size(),
                                        verbs::kLocalWrite | verbs::kMemoryWindowBind)
                       .value();

  auto sender = KeyGrantSender::Create(server_host.get(), 4).value();
  const KeyGrantSender::Slot slot = sender->Take().value();
  protocol::RegionDirectory accepted;
  const auto base = reinterpret_cast<uint64_t>(region.data());
  accepted.Set(protocol::RegionKind::kControl, protocol::WireRegion{base, 64, 0, 0});
  accepted.Set(protocol::RegionKind::kParams, protocol::WireRegion{base + 1024, 512, 0, 0});
  const absl::Time deadline = absl::Now() + kTestTimeout;
  absl::StatusOr<protocol::RegionDirectory> granted = sender->BindWindows(
      pair.server.get(), accepted,
      [&](protocol::RegionKind kind) -> absl::StatusOr<KeyGrantSender::Bind> {
        KeyGrantSender::Bind bind;
        bind.mr = region_mr.get();
        bind.offset = accepted.Get(kind).addr - base;
        bind.access = verbs::kRemoteRead;
        return bind;
      },
      deadline);
  ASSERT_TRUE(granted.ok()) << granted.status();
  EXPECT_NE(granted->Get(protocol::RegionKind::kControl).rkey, 0u);
  EXPECT_NE(granted->Get(protocol::RegionKind::kParams).rkey, 0u);

  protocol::KeyGrantMessage* m = sender->message(slot);
  *m = protocol::KeyGrantMessage{};
  m->magic = protocol::kKeyGrantMagic;
  m->directory = *granted;
  m->commit = 0x1234;
  const verbs::RemoteRegion r = grant_mr->remote();
  ASSERT_TRUE(sender
                  ->Send(pair.server.get(), slot, protocol::WireRegion{r.addr, r.length, r.rkey, 0},
                         deadline)
                  .ok());
  // The commit word lands, and the grant before it.
  uint64_t commit = 0;
  while (commit != 0x1234 && absl::Now() < deadline) {
    std::memcpy(&commit, grant_bytes.data() + protocol::kGrantCommitOffset, sizeof(commit));
    verbs::Completion c[4];
    pair.client->Poll(absl::MakeSpan(c));
  }
  ASSERT_EQ(commit, 0x1234u);
  protocol::KeyGrantMessage got;
  std::memcpy(&got, grant_bytes.data(), sizeof(got));
  EXPECT_EQ(got.magic, protocol::kKeyGrantMagic);
  EXPECT_EQ(got.directory.Get(protocol::RegionKind::kParams).rkey,
            granted->Get(protocol::RegionKind::kParams).rkey);
}

TEST(KeyGrantSenderTest, PostWhenRoomPostsMoreRequestsThanTheSendQueueHolds) {
  auto client_host = Soft();
  auto server_host = Soft();
  Pair pair = Connect(client_host.get(), server_host.get(), /*server_send_wr=*/2);
  std::vector<uint64_t> target(8, 0);
  auto target_mr = client_host
                       ->RegisterMemory(target.data(), target.size() * sizeof(uint64_t),
                                        verbs::kLocalWrite | verbs::kRemoteWrite)
                       .value();
  std::vector<uint64_t> source = {1, 2, 3, 4, 5, 6, 7, 8};
  auto source_mr =
      server_host->RegisterMemory(source.data(), source.size() * sizeof(uint64_t), 0).value();
  std::vector<verbs::WorkRequest> wrs(source.size());
  for (size_t i = 0; i < wrs.size(); ++i) {
    wrs[i].opcode = verbs::Opcode::kWrite;
    wrs[i].signaled = false;
    wrs[i].local = source_mr.get();
    wrs[i].local_addr = &source[i];
    wrs[i].length = sizeof(uint64_t);
    wrs[i].remote_addr = target_mr->remote().addr + i * sizeof(uint64_t);
    wrs[i].rkey = target_mr->remote().rkey;
  }
  const absl::Time deadline = absl::Now() + kTestTimeout;
  ASSERT_TRUE(PostWhenRoom(pair.server.get(), wrs, deadline).ok());
  while (absl::Now() < deadline) {
    std::vector<uint64_t> seen(target.size());
    std::memcpy(seen.data(), target.data(), seen.size() * sizeof(uint64_t));
    if (seen == source) break;
    verbs::Completion c[4];
    pair.client->Poll(absl::MakeSpan(c));
  }
  EXPECT_EQ(target, source);
}

}  // namespace
}  // namespace dreplay::server
