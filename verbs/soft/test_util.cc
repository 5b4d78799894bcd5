// Copyright dreplay authors.

#include "verbs/soft/test_util.h"

#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::verbs::testing {

ProviderOptions TestProviderOptions() {
  ProviderOptions options;
  const char* transport = std::getenv("DREPLAY_TEST_SOFT_TRANSPORT");
  if (transport != nullptr) {
    auto parsed = ParseSoftTransport(transport);
    CHECK(parsed.ok()) << "DREPLAY_TEST_SOFT_TRANSPORT: " << parsed.status();
    options.soft_transport = *parsed;
  }
  return options;
}

absl::StatusOr<QpPair> ConnectPair(Provider* client, Provider* server,
                                   const QueuePairOptions& client_options,
                                   const QueuePairOptions& server_options,
                                   const std::string& payload, const std::string& reply) {
  ASSIGN_OR_RETURN(std::unique_ptr<Listener> listener, server->Listen("127.0.0.1", 0));
  absl::StatusOr<Connection> connection = absl::UnknownError("connect did not run");
  std::thread connector([&] {
    connection = client->Connect("127.0.0.1", listener->port(), payload, client_options);
  });
  QpPair pair;
  absl::StatusOr<std::unique_ptr<PendingConnection>> pending = listener->Accept(kTestTimeout);
  if (pending.ok()) {
    pair.payload = (*pending)->payload();
    absl::StatusOr<std::unique_ptr<QueuePair>> qp = (*pending)->Accept(reply, server_options);
    if (qp.ok()) pair.server = std::move(*qp);
  }
  connector.join();
  RETURN_IF_ERROR(pending.status());
  RETURN_IF_ERROR(connection.status());
  if (pair.server == nullptr) return absl::InternalError("accept failed");
  pair.client = std::move(connection->qp);
  pair.reply = std::move(connection->reply);
  return pair;
}

std::vector<Completion> PollCompletions(QueuePair* qp, size_t n, absl::Duration timeout) {
  std::vector<Completion> result;
  const absl::Time deadline = absl::Now() + timeout;
  Completion batch[32];
  while (result.size() < n && absl::Now() < deadline) {
    const int got = qp->Poll(absl::MakeSpan(batch));
    for (int i = 0; i < got; ++i) result.push_back(std::move(batch[i]));
    if (got == 0) std::this_thread::yield();
  }
  return result;
}

std::vector<Completion> PollUntilError(QueuePair* qp, absl::Duration timeout) {
  std::vector<Completion> result;
  const absl::Time deadline = absl::Now() + timeout;
  Completion batch[32];
  while (absl::Now() < deadline) {
    const int got = qp->Poll(absl::MakeSpan(batch));
    for (int i = 0; i < got; ++i) result.push_back(std::move(batch[i]));
    if (got == 0) {
      if (qp->state() == QpState::kError) break;
      std::this_thread::yield();
    }
  }
  // Completions queued together with the state change.
  for (int got; (got = qp->Poll(absl::MakeSpan(batch))) > 0;) {
    for (int i = 0; i < got; ++i) result.push_back(std::move(batch[i]));
  }
  return result;
}

absl::StatusOr<std::unique_ptr<Buffer>> MakeBuffer(Provider* provider, size_t length,
                                                   uint32_t access) {
  auto buffer = std::make_unique<Buffer>();
  buffer->bytes.assign(length, 0);
  ASSIGN_OR_RETURN(buffer->mr, provider->RegisterMemory(buffer->bytes.data(), length, access));
  return buffer;
}

namespace {
WorkRequest Base(uint64_t wr_id, Opcode op, Buffer* local, size_t local_offset, uint32_t length,
                 const Buffer& remote, size_t remote_offset) {
  WorkRequest wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.local = local->mr.get();
  wr.local_addr = local->data() + local_offset;
  wr.length = length;
  wr.remote_addr = remote.addr() + remote_offset;
  wr.rkey = remote.rkey();
  return wr;
}
}  // namespace

WorkRequest Write(uint64_t wr_id, Buffer* local, size_t local_offset, uint32_t length,
                  const Buffer& remote, size_t remote_offset) {
  return Base(wr_id, Opcode::kWrite, local, local_offset, length, remote, remote_offset);
}

WorkRequest Read(uint64_t wr_id, Buffer* local, size_t local_offset, uint32_t length,
                 const Buffer& remote, size_t remote_offset) {
  return Base(wr_id, Opcode::kRead, local, local_offset, length, remote, remote_offset);
}

WorkRequest FetchAdd(uint64_t wr_id, Buffer* local, size_t local_offset, const Buffer& remote,
                     size_t remote_offset, uint64_t add) {
  WorkRequest wr = Base(wr_id, Opcode::kFetchAdd, local, local_offset, 8, remote, remote_offset);
  wr.compare_add = add;
  return wr;
}

WorkRequest CompareSwap(uint64_t wr_id, Buffer* local, size_t local_offset, const Buffer& remote,
                        size_t remote_offset, uint64_t compare, uint64_t swap) {
  WorkRequest wr = Base(wr_id, Opcode::kCompareSwap, local, local_offset, 8, remote, remote_offset);
  wr.compare_add = compare;
  wr.swap = swap;
  return wr;
}

}  // namespace dreplay::verbs::testing
