// Copyright dreplay authors.
//
// tcp_baseline.h: a plain TCP stream over loopback, the yardstick that the
// benchmarks put next to their RDMA figures.
//
//   ASSIGN_OR_RETURN(TcpStreamResult tcp,
//                    RunLoopbackTcpStream(/*message_bytes=*/28704, absl::Seconds(5)));
//   printf("%.2f Gb/s\n", tcp.gbps);
//
// One sender thread (the caller's) writes `message_bytes`-byte messages as
// fast as send() takes them for `duration`, then half-closes; one receiver
// thread counts bytes until EOF. The time runs from the first send() to the
// receipt of the last byte, so data still buffered in the kernel at the end
// is counted with the time it took to arrive.
//
// Used by tools/bench/replay_bench and tools/bench/verbs_bench (--baseline=tcp).
//
// Blocking; thread-safe (every call uses its own sockets and thread).

#ifndef DREPLAY_TOOLS_BENCH_TCP_BASELINE_H_
#define DREPLAY_TOOLS_BENCH_TCP_BASELINE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dreplay::tools {

struct TcpStreamResult {
  uint64_t message_bytes = 0;
  double seconds = 0;  // first send() to the last byte received
  uint64_t bytes = 0;  // received
  double messages_per_s = 0;
  double gbps = 0;  // received bits per second / 1e9
};

// Streams messages over a fresh 127.0.0.1 connection (OS-chosen port).
// InvalidArgument for message_bytes == 0 or a duration <= 0; the socket
// calls' errors (named) otherwise.
absl::StatusOr<TcpStreamResult> RunLoopbackTcpStream(uint64_t message_bytes,
                                                     absl::Duration duration);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_TCP_BASELINE_H_
