// Copyright dreplay authors.
//
// tcp_baseline.h: a plain TCP stream, the yardstick that the benchmarks put
// next to their RDMA figures.
//
//   ASSIGN_OR_RETURN(TcpStreamResult tcp,
//                    RunLoopbackTcpStream(/*message_bytes=*/28704, absl::Seconds(5)));
//   printf("%.2f Gb/s\n", tcp.gbps);
//
// Across hosts or network namespaces the stream goes to a TcpStreamSink on
// the far side, so that the yardstick crosses the same path as the
// benchmark (verbs_bench --server --baseline=tcp starts one):
//
//   host A: ASSIGN_OR_RETURN(auto sink, TcpStreamSink::Start("10.0.0.1", 0));
//   host B: ASSIGN_OR_RETURN(TcpStreamResult tcp,
//                            RunTcpStream("10.0.0.1", sink_port, 28704, absl::Seconds(5)));
//
// One sender thread (the caller's) writes `message_bytes`-byte messages as
// fast as send() takes them for `duration`, then half-closes; the sink
// counts bytes until EOF and answers with the count. The time runs from the
// first send() to the receipt of that answer, so data still buffered in the
// kernel at the end is counted with the time it took to arrive (plus one
// one-way trip of 8 bytes).
//
// Used by tools/bench/replay_bench and tools/bench/verbs_bench (--baseline=tcp).
//
// Blocking; thread-safe (every call uses its own sockets and thread).

#ifndef DREPLAY_TOOLS_BENCH_TCP_BASELINE_H_
#define DREPLAY_TOOLS_BENCH_TCP_BASELINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace dreplay::tools {

struct TcpStreamResult {
  uint64_t message_bytes = 0;
  double seconds = 0;  // first send() to the sink's answer
  uint64_t bytes = 0;  // received by the sink
  double messages_per_s = 0;
  double gbps = 0;  // received bits per second / 1e9
  // The whole host's busy CPU seconds over `seconds` (host_cpu.h: both
  // ends when they run on this host); < 0: not measured.
  double host_cpu_s = -1;
};

// The receiving end: accepts streams one after another on a thread of its
// own, reads each until EOF, answers with the byte count (8 bytes,
// little-endian) and closes it. Destroying it stops and joins the thread.
class TcpStreamSink {
 public:
  // Listens on `host` (an IPv4 address) and `port` (0: chosen by the OS).
  static absl::StatusOr<std::unique_ptr<TcpStreamSink>> Start(const std::string& host,
                                                              uint16_t port);
  ~TcpStreamSink();
  TcpStreamSink(const TcpStreamSink&) = delete;
  TcpStreamSink& operator=(const TcpStreamSink&) = delete;

  uint16_t port() const { return port_; }

 private:
  TcpStreamSink(UniqueFd listener, uint16_t port);
  void Serve();

  UniqueFd listener_;
  const uint16_t port_;
  std::thread thread_;
};

// Streams messages to the TcpStreamSink at `host` (an IPv4 address):`port`.
// InvalidArgument for message_bytes == 0, a duration <= 0 or a host that is
// no IPv4 address; the socket calls' errors (named) otherwise.
absl::StatusOr<TcpStreamResult> RunTcpStream(const std::string& host, uint16_t port,
                                             uint64_t message_bytes, absl::Duration duration);

// RunTcpStream() to a sink of its own on 127.0.0.1 (OS-chosen port).
absl::StatusOr<TcpStreamResult> RunLoopbackTcpStream(uint64_t message_bytes,
                                                     absl::Duration duration);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_TCP_BASELINE_H_
