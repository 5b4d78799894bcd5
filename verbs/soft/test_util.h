// Copyright dreplay authors.
//
// test_util.h: helpers for tests of the soft provider: connected queue
// pairs over loopback, polling with a timeout, registered buffers.

#ifndef DREPLAY_VERBS_SOFT_TEST_UTIL_H_
#define DREPLAY_VERBS_SOFT_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::testing {

// Every wait in these tests is bounded by this.
inline constexpr absl::Duration kTestTimeout = absl::Seconds(20);

struct QpPair {
  std::unique_ptr<QueuePair> client;  // the connecting side
  std::unique_ptr<QueuePair> server;  // the accepting side
  std::string reply;                  // what the server replied
  std::string payload;                // what the server received
};

// The soft provider's options for a test: the defaults, except that with
// DREPLAY_TEST_SOFT_TRANSPORT=tcp in the environment (the *_tcp_test
// targets) every queue pair takes the TCP path, as between hosts, rather
// than sharing memory with its in-process peer.
ProviderOptions TestProviderOptions();

// Connects `client` to `server` over 127.0.0.1 (port chosen by the OS).
absl::StatusOr<QpPair> ConnectPair(Provider* client, Provider* server,
                                   const QueuePairOptions& client_options = {},
                                   const QueuePairOptions& server_options = {},
                                   const std::string& payload = "hello",
                                   const std::string& reply = "welcome");

// Polls `qp` until `n` completions arrived or `timeout` passed; returns what
// arrived (fewer than n on timeout).
std::vector<Completion> PollCompletions(QueuePair* qp, size_t n,
                                        absl::Duration timeout = kTestTimeout);

// Polls `qp` until its state is kError or `timeout` passed; returns the
// completions seen meanwhile.
std::vector<Completion> PollUntilError(QueuePair* qp, absl::Duration timeout = kTestTimeout);

// A heap buffer registered with a provider.
struct Buffer {
  std::vector<uint8_t> bytes;
  std::unique_ptr<MemoryRegion> mr;

  uint8_t* data() { return bytes.data(); }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(bytes.data()); }
  uint32_t rkey() const { return mr->rkey(); }
};
// 8-byte aligned, zero-filled.
absl::StatusOr<std::unique_ptr<Buffer>> MakeBuffer(Provider* provider, size_t length,
                                                   uint32_t access);

// Work request builders.
WorkRequest Write(uint64_t wr_id, Buffer* local, size_t local_offset, uint32_t length,
                  const Buffer& remote, size_t remote_offset);
WorkRequest Read(uint64_t wr_id, Buffer* local, size_t local_offset, uint32_t length,
                 const Buffer& remote, size_t remote_offset);
WorkRequest FetchAdd(uint64_t wr_id, Buffer* local, size_t local_offset, const Buffer& remote,
                     size_t remote_offset, uint64_t add);
WorkRequest CompareSwap(uint64_t wr_id, Buffer* local, size_t local_offset, const Buffer& remote,
                        size_t remote_offset, uint64_t compare, uint64_t swap);

}  // namespace dreplay::verbs::testing

#endif  // DREPLAY_VERBS_SOFT_TEST_UTIL_H_
