// Copyright dreplay authors.
//
// verbs_bench: throughput and latency of one-sided verbs on any provider.
//
//   verbs_bench --op=write --size=65536 --depth=16 --baseline=tcp
//   verbs_bench --op=write --size=64 --batch=32 --depth=256
//   verbs_bench --op=read --size=32768 --depth=16 --link=10km-25g
//   verbs_bench --server --port=18515             # host A
//   verbs_bench --connect=hostA:18515 --op=read   # host B
//
// By default a server and a client run in this process, each with its own
// provider, connected over loopback. The client keeps --depth requests in
// flight, posting --batch of them per PostSend (one doorbell), all
// signalled, and measures each request from post to completion. After
// --warmup_s it counts completions for --duration_s and reports ops/s,
// Gb/s and latency percentiles, as text or (--json) as one JSON object.
// --baseline=tcp also streams messages of the same size over a loopback TCP
// connection for the same duration and reports the ratio.
//
// The server registers a region of size x depth bytes for the connection
// (the client asks for it in its connect payload) and replies with its
// RemoteRegion; it never polls, since one-sided verbs need no server CPU.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "verbs/verbs.h"

DEFINE_string(op, "write", "write, read, fetch_add or compare_swap");
DEFINE_uint64(size, 65536, "bytes per request (atomics: 8)");
DEFINE_int32(depth, 16, "requests kept outstanding");
DEFINE_int32(batch, 1, "requests per PostSend (one doorbell)");
DEFINE_double(duration_s, 5, "measured seconds");
DEFINE_double(warmup_s, 0.5, "seconds run before measuring");
DEFINE_string(provider, "auto", "auto, soft or ibverbs");
DEFINE_string(link, "none",
              "emulated link (soft provider): none, 10km-25g, 100km-10g, "
              "1000km-1g or DELAY_US:GBPS");
DEFINE_bool(json, false, "print one JSON object instead of text");
DEFINE_string(baseline, "none", "none, or tcp: also measure a loopback TCP stream");
DEFINE_bool(server, false, "serve clients (two-host mode) instead of running one");
DEFINE_string(host, "0.0.0.0", "--server: address to listen on");
DEFINE_int32(port, 0, "--server: port to listen on (0: any, printed)");
DEFINE_int32(server_clients, 0, "--server: exit after this many clients (0: never)");
DEFINE_string(connect, "", "host:port of a --server to benchmark against");
DEFINE_string(ib_device, "", "ibverbs: device (empty: first with an active port)");
DEFINE_int32(ib_port, 1, "ibverbs: port");
DEFINE_int32(gid_index, -1, "ibverbs: GID index (-1: automatic RoCE v2)");

namespace dreplay::tools {
namespace {

using verbs::Completion;
using verbs::MemoryRegion;
using verbs::Opcode;
using verbs::Provider;
using verbs::QueuePair;
using verbs::RemoteRegion;
using verbs::WorkRequest;
using Clock = std::chrono::steady_clock;

constexpr char kLoopback[] = "127.0.0.1";
constexpr int kMaxDepth = 4096;
constexpr uint64_t kMaxSize = uint64_t{64} << 20;
constexpr uint64_t kMaxRegionBytes = uint64_t{1} << 30;
constexpr uint64_t kAtomicSize = 8;
constexpr double kMaxDurationS = 3600;
// Completions taken per Poll().
constexpr int kPollBatch = 64;
// How long the client waits for its last requests after the measurement.
constexpr absl::Duration kDrainTimeout = absl::Seconds(10);
// How long the in-process server waits for the client to connect.
constexpr absl::Duration kAcceptTimeout = absl::Seconds(30);
// How often a --server wakes up to check for a new client.
constexpr absl::Duration kServerPoll = absl::Seconds(1);
// Connect payload: "region_bytes=<n>".
constexpr absl::string_view kRegionKey = "region_bytes=";
// TCP baseline: receive buffer size.
constexpr size_t kTcpRecvBuffer = 1 << 20;

// ---------------------------------------------------------------------------
// Configuration.
// ---------------------------------------------------------------------------

struct BenchConfig {
  Opcode op = Opcode::kWrite;
  uint64_t size = 65536;
  int depth = 16;
  int batch = 1;
  double duration_s = 5;
  double warmup_s = 0.5;
  std::string link_spec = "none";
  verbs::LinkModel link;
  verbs::ProviderOptions provider;
  bool json = false;
  bool tcp_baseline = false;

  bool atomic() const {
    return op == Opcode::kFetchAdd || op == Opcode::kCompareSwap;
  }
  uint64_t region_bytes() const { return size * depth; }

  absl::Status Validate() const {
    if (size == 0 || size > kMaxSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("--size=", size, ": must be in [1, ", kMaxSize, "]"));
    }
    if (atomic() && size != kAtomicSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--size=", size, ": atomics act on 8-byte words; use --size=8"));
    }
    if (depth < 1 || depth > kMaxDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat("--depth=", depth, ": must be in [1, ", kMaxDepth, "]"));
    }
    if (batch < 1 || batch > depth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--batch=", batch, ": must be in [1, --depth=", depth,
          "] (a batch is posted only when it fits in the outstanding window)"));
    }
    if (region_bytes() > kMaxRegionBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--size x --depth = ", region_bytes(), " bytes: more than the ",
          kMaxRegionBytes, "-byte limit of the benchmark's regions"));
    }
    if (!(duration_s > 0 && duration_s <= kMaxDurationS)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--duration_s=", duration_s, ": must be in (0, ", kMaxDurationS, "]"));
    }
    if (!(warmup_s >= 0 && warmup_s <= kMaxDurationS)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--warmup_s=", warmup_s, ": must be in [0, ", kMaxDurationS, "]"));
    }
    return provider.Validate();
  }

  verbs::QueuePairOptions QueuePairOptions() const {
    verbs::QueuePairOptions options;
    options.max_send_wr = std::max(depth, options.max_send_wr);
    options.link = link;
    return options;
  }
};

absl::StatusOr<Opcode> ParseOp(const std::string& name) {
  if (name == "write") return Opcode::kWrite;
  if (name == "read") return Opcode::kRead;
  if (name == "fetch_add") return Opcode::kFetchAdd;
  if (name == "compare_swap") return Opcode::kCompareSwap;
  return absl::InvalidArgumentError(absl::StrCat(
      "--op=", name, ": expected write, read, fetch_add or compare_swap"));
}

absl::StatusOr<std::pair<std::string, uint16_t>> ParseHostPort(const std::string& spec) {
  const size_t colon = spec.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(spec.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--connect=", spec, ": expected host:port with port in [1, 65535]"));
  }
  return std::make_pair(spec.substr(0, colon), static_cast<uint16_t>(port));
}

// ---------------------------------------------------------------------------
// Latency histogram: log-linear buckets, about 1.6 % relative error.
// ---------------------------------------------------------------------------

class LatencyHistogram {
 public:
  LatencyHistogram() : counts_(kBuckets, 0) {}

  void Add(uint64_t ns) {
    ++counts_[Bucket(ns)];
    ++total_;
    sum_ns_ += ns;
  }
  uint64_t count() const { return total_; }
  double mean_us() const { return total_ ? sum_ns_ / 1e3 / total_ : 0; }

  // The q-quantile (0 < q <= 1) in microseconds: the midpoint of its bucket.
  double QuantileUs(double q) const {
    if (total_ == 0) return 0;
    const uint64_t rank = static_cast<uint64_t>(std::ceil(q * total_));
    uint64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += counts_[b];
      if (seen >= rank) return (Low(b) + Low(b + 1)) / 2.0 / 1e3;
    }
    return Low(kBuckets) / 1e3;
  }

 private:
  // Values below 2^kSubBits get one bucket each; above, each power of two
  // is split into 2^kSubBits buckets.
  static constexpr int kSubBits = 6;
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kBuckets = (64 - kSubBits + 1) * kSub;

  static int Bucket(uint64_t v) {
    if (v < kSub) return static_cast<int>(v);
    const int msb = 63 - __builtin_clzll(v);
    const int shift = msb - kSubBits;
    return (shift + 1) * kSub + static_cast<int>((v >> shift) & (kSub - 1));
  }
  // The lowest value of bucket b.
  static double Low(int b) {
    if (b < kSub) return b;
    const int shift = b / kSub - 1;
    return std::ldexp(static_cast<double>(kSub + b % kSub), shift);
  }

  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
  double sum_ns_ = 0;
};

// ---------------------------------------------------------------------------
// The RDMA client loop.
// ---------------------------------------------------------------------------

struct RdmaResult {
  uint64_t ops = 0;
  double seconds = 0;
  double ops_per_s = 0;
  double gbps = 0;
  double p50_us = 0;
  double p99_us = 0;
  double mean_us = 0;
};

// Busy-polls, as perftest does.
absl::StatusOr<RdmaResult> RunClient(QueuePair* qp, const MemoryRegion& local,
                                     const RemoteRegion& remote, const BenchConfig& config) {
  const int depth = config.depth;
  const int batch = config.batch;
  std::vector<Clock::time_point> posted_at(depth);
  std::vector<WorkRequest> wrs(batch);
  std::vector<Completion> completions(kPollBatch);
  LatencyHistogram histogram;

  const Clock::time_point start = Clock::now();
  const Clock::time_point measure_from =
      start + std::chrono::nanoseconds(static_cast<int64_t>(config.warmup_s * 1e9));
  const Clock::time_point measure_to =
      measure_from + std::chrono::nanoseconds(static_cast<int64_t>(config.duration_s * 1e9));
  uint64_t posted = 0;
  uint64_t completed = 0;
  uint64_t measured = 0;

  // Request i uses slot i % depth of both regions. RC completes requests in
  // posting order, so slot i % depth is free once `depth` are not in flight.
  auto fill = [&](WorkRequest& wr, uint64_t seq) {
    const uint64_t slot = seq % depth;
    wr = WorkRequest();
    wr.wr_id = seq;
    wr.opcode = config.op;
    wr.signaled = true;
    wr.local = &local;
    wr.local_addr = static_cast<char*>(local.addr()) + slot * config.size;
    wr.length = static_cast<uint32_t>(config.size);
    wr.remote_addr = remote.addr + slot * config.size;
    wr.rkey = remote.rkey;
    if (config.op == Opcode::kFetchAdd) wr.compare_add = 1;
    // compare_swap: compare 0, swap 0; succeeds without changing the word.
  };

  Clock::time_point now = start;
  Clock::time_point drain_deadline = Clock::time_point::max();
  while (completed < posted || now < measure_to) {
    // Post while a whole batch fits in the window, until the end.
    while (now < measure_to && posted - completed + batch <= static_cast<uint64_t>(depth)) {
      for (int i = 0; i < batch; ++i) fill(wrs[i], posted + i);
      const absl::Status s = qp->PostSend(wrs);
      if (absl::IsResourceExhausted(s)) break;
      RETURN_IF_ERROR(s);
      now = Clock::now();
      for (int i = 0; i < batch; ++i) posted_at[(posted + i) % depth] = now;
      posted += batch;
    }
    const int n = qp->Poll(absl::MakeSpan(completions));
    now = Clock::now();
    for (int i = 0; i < n; ++i) {
      const Completion& c = completions[i];
      if (!c.ok()) return c.ToStatus();
      ++completed;
      if (now >= measure_from && now < measure_to) {
        ++measured;
        histogram.Add(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                now - posted_at[c.wr_id % depth])
                .count()));
      }
    }
    if (now >= measure_to && drain_deadline == Clock::time_point::max()) {
      drain_deadline = now + absl::ToChronoNanoseconds(kDrainTimeout);
    }
    if (now > drain_deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          posted - completed, " requests did not complete within ",
          absl::FormatDuration(kDrainTimeout), " after the measurement"));
    }
  }
  RdmaResult r;
  r.ops = measured;
  r.seconds = config.duration_s;
  r.ops_per_s = measured / config.duration_s;
  r.gbps = r.ops_per_s * config.size * 8 / 1e9;
  r.p50_us = histogram.QuantileUs(0.50);
  r.p99_us = histogram.QuantileUs(0.99);
  r.mean_us = histogram.mean_us();
  return r;
}

// ---------------------------------------------------------------------------
// Server side: one connection's region and queue pair.
// ---------------------------------------------------------------------------

// Members are destroyed in reverse order: QP, then MR, then the memory.
struct ServerSession {
  std::vector<uint64_t> memory;
  std::unique_ptr<MemoryRegion> mr;
  std::unique_ptr<QueuePair> qp;
};

// Accepts one client on `listener`: registers the region it asks for and
// replies with its RemoteRegion.
absl::StatusOr<std::unique_ptr<ServerSession>> ServeOne(
    Provider* provider, verbs::Listener* listener, absl::Duration timeout,
    const verbs::QueuePairOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::PendingConnection> pending,
                   listener->Accept(timeout));
  const std::string& payload = pending->payload();
  uint64_t bytes = 0;
  if (!absl::StartsWith(payload, kRegionKey) ||
      !absl::SimpleAtoi(payload.substr(kRegionKey.size()), &bytes) || bytes == 0 ||
      bytes > kMaxRegionBytes) {
    pending->Reject(absl::StrCat("verbs_bench server: bad request \"",
                                 payload.substr(0, 64), "\""));
    return absl::InvalidArgumentError(
        absl::StrCat("client ", pending->peer(), " sent a bad request"));
  }
  auto session = std::make_unique<ServerSession>();
  session->memory.assign((bytes + 7) / 8, 0);
  auto mr = provider->RegisterMemory(
      session->memory.data(), bytes,
      verbs::kLocalWrite | verbs::kRemoteRead | verbs::kRemoteWrite | verbs::kRemoteAtomic);
  if (!mr.ok()) {
    pending->Reject(absl::StrCat("verbs_bench server: ", mr.status().message()));
    return mr.status();
  }
  session->mr = std::move(*mr);
  const RemoteRegion region = session->mr->remote();
  std::string reply(sizeof(region), '\0');
  std::memcpy(reply.data(), &region, sizeof(region));
  ASSIGN_OR_RETURN(session->qp, pending->Accept(reply, options));
  return session;
}

// Connects to a server and returns the client's QP and the server's region.
struct ClientSession {
  std::vector<uint64_t> memory;
  std::unique_ptr<MemoryRegion> mr;
  std::unique_ptr<QueuePair> qp;
  RemoteRegion remote;
};

absl::StatusOr<std::unique_ptr<ClientSession>> ConnectClient(
    Provider* provider, const std::string& host, uint16_t port, const BenchConfig& config) {
  auto session = std::make_unique<ClientSession>();
  session->memory.assign((config.region_bytes() + 7) / 8, 0);
  ASSIGN_OR_RETURN(session->mr,
                   provider->RegisterMemory(session->memory.data(), config.region_bytes(),
                                            verbs::kLocalWrite));
  ASSIGN_OR_RETURN(verbs::Connection conn,
                   provider->Connect(host, port,
                                     absl::StrCat(kRegionKey, config.region_bytes()),
                                     config.QueuePairOptions()));
  if (conn.reply.size() != sizeof(RemoteRegion)) {
    return absl::DataLossError(absl::StrCat("server replied with ", conn.reply.size(),
                                            " bytes, expected a RemoteRegion"));
  }
  std::memcpy(&session->remote, conn.reply.data(), sizeof(RemoteRegion));
  if (session->remote.length < config.region_bytes()) {
    return absl::DataLossError("server's region is smaller than asked for");
  }
  session->qp = std::move(conn.qp);
  return session;
}

absl::StatusOr<std::unique_ptr<Provider>> MakeProvider(const BenchConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<Provider> provider,
                   verbs::CreateProvider(config.provider));
  if (config.link.enabled() && provider->name() != "soft") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--link=", config.link_spec, " needs the soft provider, but this run uses ",
        provider->name(), "; add --provider=soft"));
  }
  return provider;
}

// ---------------------------------------------------------------------------
// TCP baseline: a plain stream of `size`-byte messages over loopback.
// ---------------------------------------------------------------------------

struct TcpResult {
  double seconds = 0;
  double ops_per_s = 0;
  double gbps = 0;
};

absl::Status Errno(absl::string_view what) {
  return absl::ErrnoToStatus(errno, what);
}

// An fd that closes itself.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::StatusOr<TcpResult> RunTcpBaseline(uint64_t size, double duration_s) {
  Fd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) return Errno("socket");
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener.get(), 1) != 0 ||
      getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Errno("TCP baseline: bind/listen");
  }

  // The receiver counts bytes until EOF and notes when the last one came.
  std::atomic<uint64_t> received{0};
  Clock::time_point last_byte;
  absl::Status receiver_status;
  std::thread receiver([&] {
    Fd conn(accept(listener.get(), nullptr, nullptr));
    if (conn.get() < 0) {
      receiver_status = Errno("TCP baseline: accept");
      return;
    }
    std::vector<char> buffer(kTcpRecvBuffer);
    uint64_t total = 0;
    for (;;) {
      const ssize_t n = recv(conn.get(), buffer.data(), buffer.size(), 0);
      if (n > 0) {
        total += static_cast<uint64_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) receiver_status = Errno("TCP baseline: recv");
      break;
    }
    last_byte = Clock::now();
    received = total;
  });

  absl::Status sender_status;
  Clock::time_point start;
  {
    Fd conn(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (conn.get() < 0 ||
        connect(conn.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      sender_status = Errno("TCP baseline: connect");
      shutdown(listener.get(), SHUT_RDWR);
    } else {
      std::vector<char> message(size, 'x');
      start = Clock::now();
      const Clock::time_point end =
          start + std::chrono::nanoseconds(static_cast<int64_t>(duration_s * 1e9));
      while (sender_status.ok() && Clock::now() < end) {
        size_t off = 0;
        while (off < size) {
          const ssize_t n = send(conn.get(), message.data() + off, size - off, MSG_NOSIGNAL);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) {
            sender_status = Errno("TCP baseline: send");
            break;
          }
          off += static_cast<size_t>(n);
        }
      }
      shutdown(conn.get(), SHUT_WR);
    }
    receiver.join();
  }
  RETURN_IF_ERROR(sender_status);
  RETURN_IF_ERROR(receiver_status);
  TcpResult r;
  r.seconds = std::chrono::duration<double>(last_byte - start).count();
  const double messages = static_cast<double>(received.load()) / size;
  r.ops_per_s = messages / r.seconds;
  r.gbps = received.load() * 8.0 / r.seconds / 1e9;
  return r;
}

// ---------------------------------------------------------------------------
// Reports.
// ---------------------------------------------------------------------------

struct Report {
  std::string provider;
  std::string mode;  // "loopback" or "remote host:port"
  RdmaResult rdma;
  int max_rd_atomic = 0;
  uint32_t max_inline_data = 0;
  bool has_tcp = false;
  TcpResult tcp;
};

void Print(const BenchConfig& config, const Report& report) {
  const double link_gbps = config.link.bandwidth_gbps;
  const double ratio = report.has_tcp ? report.rdma.gbps / report.tcp.gbps : 0;
  // The fair reference on an emulated link: neither can beat the link.
  const double reference_gbps =
      report.has_tcp && link_gbps > 0 ? std::min(link_gbps, report.tcp.gbps) : 0;
  if (config.json) {
    std::string json = absl::StrFormat(
        "{\"provider\":\"%s\",\"mode\":\"%s\",\"op\":\"%s\",\"size\":%d,"
        "\"depth\":%d,\"batch\":%d,\"link\":\"%s\",\"duration_s\":%.3f,"
        "\"max_rd_atomic\":%d,\"max_inline_data\":%d,\"ops\":%d,"
        "\"ops_per_s\":%.1f,\"gbps\":%.4f,\"lat_p50_us\":%.2f,"
        "\"lat_p99_us\":%.2f,\"lat_mean_us\":%.2f",
        report.provider, report.mode, verbs::OpcodeName(config.op), config.size,
        config.depth, config.batch, config.link_spec, report.rdma.seconds,
        report.max_rd_atomic, report.max_inline_data, report.rdma.ops,
        report.rdma.ops_per_s, report.rdma.gbps, report.rdma.p50_us,
        report.rdma.p99_us, report.rdma.mean_us);
    if (report.has_tcp) {
      absl::StrAppendFormat(&json,
                            ",\"tcp\":{\"ops_per_s\":%.1f,\"gbps\":%.4f},"
                            "\"ratio_vs_tcp\":%.4f",
                            report.tcp.ops_per_s, report.tcp.gbps, ratio);
      if (reference_gbps > 0) {
        absl::StrAppendFormat(&json, ",\"ratio_vs_min_link_tcp\":%.4f",
                              report.rdma.gbps / reference_gbps);
      }
    }
    json += "}";
    std::cout << json << std::endl;
    return;
  }
  std::cout << absl::StrFormat(
      "verbs_bench: %s %s, %d B x depth %d, batch %d, link %s, %.1f s\n"
      "  max_rd_atomic %d, max_inline_data %d\n"
      "  %.0f ops/s  %.3f Gb/s  latency p50 %.1f us  p99 %.1f us  mean %.1f us\n",
      report.provider, verbs::OpcodeName(config.op), config.size, config.depth,
      config.batch, config.link_spec, report.rdma.seconds, report.max_rd_atomic,
      report.max_inline_data, report.rdma.ops_per_s, report.rdma.gbps,
      report.rdma.p50_us, report.rdma.p99_us, report.rdma.mean_us);
  if (report.has_tcp) {
    std::cout << absl::StrFormat(
        "  tcp loopback stream: %.0f msgs/s  %.3f Gb/s\n  ratio rdma/tcp: %.3f\n",
        report.tcp.ops_per_s, report.tcp.gbps, ratio);
    if (reference_gbps > 0) {
      std::cout << absl::StrFormat(
          "  ratio rdma/min(link %.1f Gb/s, tcp): %.3f\n", link_gbps,
          report.rdma.gbps / reference_gbps);
    }
  }
}

// ---------------------------------------------------------------------------
// Modes.
// ---------------------------------------------------------------------------

absl::Status MeasureAndPrint(ClientSession* session, const std::string& provider,
                             const std::string& mode, const BenchConfig& config) {
  Report report;
  report.provider = provider;
  report.mode = mode;
  report.max_rd_atomic = session->qp->max_rd_atomic();
  report.max_inline_data = session->qp->max_inline_data();
  ASSIGN_OR_RETURN(report.rdma,
                   RunClient(session->qp.get(), *session->mr, session->remote, config));
  if (config.tcp_baseline) {
    report.has_tcp = true;
    ASSIGN_OR_RETURN(report.tcp, RunTcpBaseline(config.size, config.duration_s));
  }
  Print(config, report);
  return absl::OkStatus();
}

// Server and client in this process, each with its own provider.
absl::Status RunLoopback(const BenchConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<Provider> server_provider, MakeProvider(config));
  ASSIGN_OR_RETURN(std::unique_ptr<Provider> client_provider, MakeProvider(config));
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Listener> listener,
                   server_provider->Listen(kLoopback, 0));
  absl::StatusOr<std::unique_ptr<ServerSession>> server =
      absl::UnknownError("not served");
  std::thread server_thread([&] {
    server = ServeOne(server_provider.get(), listener.get(), kAcceptTimeout,
                      config.QueuePairOptions());
  });
  auto client = ConnectClient(client_provider.get(), kLoopback, listener->port(), config);
  if (!client.ok()) listener->Shutdown();
  server_thread.join();
  RETURN_IF_ERROR(client.status());
  RETURN_IF_ERROR(server.status());
  return MeasureAndPrint(client->get(), client_provider->name(), "loopback", config);
}

absl::Status RunRemote(const BenchConfig& config, const std::string& connect) {
  ASSIGN_OR_RETURN(auto host_port, ParseHostPort(connect));
  ASSIGN_OR_RETURN(std::unique_ptr<Provider> provider, MakeProvider(config));
  ASSIGN_OR_RETURN(std::unique_ptr<ClientSession> client,
                   ConnectClient(provider.get(), host_port.first, host_port.second, config));
  return MeasureAndPrint(client.get(), provider->name(), absl::StrCat("remote ", connect),
                         config);
}

// Serves clients one after another; each new client replaces the previous
// connection (and its region).
absl::Status RunServer(const BenchConfig& config, const std::string& host, uint16_t port,
                       int max_clients) {
  ASSIGN_OR_RETURN(std::unique_ptr<Provider> provider, MakeProvider(config));
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Listener> listener, provider->Listen(host, port));
  std::cout << "verbs_bench server (" << provider->name() << ") listening on "
            << listener->host() << ":" << listener->port() << std::endl;
  std::unique_ptr<ServerSession> current;
  int served = 0;
  while (max_clients == 0 || served < max_clients) {
    auto session = ServeOne(provider.get(), listener.get(), kServerPoll,
                            config.QueuePairOptions());
    if (absl::IsDeadlineExceeded(session.status())) continue;
    if (!session.ok()) {
      LOG(WARNING) << "client refused: " << session.status();
      continue;
    }
    current = std::move(*session);
    ++served;
    LOG(INFO) << "serving client " << served << ": " << current->qp->Describe();
  }
  // Let the last client finish before its region goes away.
  if (current != nullptr) {
    absl::SleepFor(absl::Seconds(config.warmup_s + config.duration_s) + kDrainTimeout);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace dreplay::tools

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "throughput and latency of one-sided verbs; see tools/verbs_bench.cc");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  namespace t = dreplay::tools;
  namespace v = dreplay::verbs;

  auto fail = [](const absl::Status& s) {
    std::cerr << "verbs_bench: " << s.message() << std::endl;
    return 1;
  };
  if (argc > 1) return fail(absl::InvalidArgumentError(
                     absl::StrCat("unexpected argument \"", argv[1], "\"")));

  t::BenchConfig config;
  auto op = t::ParseOp(FLAGS_op);
  if (!op.ok()) return fail(op.status());
  config.op = *op;
  config.size = FLAGS_size;
  if (config.atomic() && gflags::GetCommandLineFlagInfoOrDie("size").is_default) {
    config.size = t::kAtomicSize;
  }
  config.depth = FLAGS_depth;
  config.batch = FLAGS_batch;
  config.duration_s = FLAGS_duration_s;
  config.warmup_s = FLAGS_warmup_s;
  config.json = FLAGS_json;
  config.link_spec = FLAGS_link;
  auto link = v::ParseLinkModel(FLAGS_link);
  if (!link.ok()) return fail(absl::InvalidArgumentError(
                      absl::StrCat("--link: ", link.status().message())));
  config.link = *link;
  auto kind = v::ParseProviderKind(FLAGS_provider);
  if (!kind.ok()) return fail(absl::InvalidArgumentError(
                      absl::StrCat("--provider: ", kind.status().message())));
  config.provider.kind = *kind;
  config.provider.ib_device = FLAGS_ib_device;
  config.provider.ib_port = FLAGS_ib_port;
  config.provider.gid_index = FLAGS_gid_index;
  if (FLAGS_baseline == "tcp") {
    config.tcp_baseline = true;
  } else if (FLAGS_baseline != "none") {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--baseline=", FLAGS_baseline, ": expected none or tcp")));
  }
  if (absl::Status s = config.Validate(); !s.ok()) return fail(s);

  if (FLAGS_server && !FLAGS_connect.empty()) {
    return fail(absl::InvalidArgumentError("--server and --connect exclude each other"));
  }
  absl::Status status;
  if (FLAGS_server) {
    if (FLAGS_port < 0 || FLAGS_port > 65535) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("--port=", FLAGS_port, ": must be in [0, 65535]")));
    }
    if (FLAGS_server_clients < 0) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("--server_clients=", FLAGS_server_clients, ": must be >= 0")));
    }
    status = t::RunServer(config, FLAGS_host, static_cast<uint16_t>(FLAGS_port),
                          FLAGS_server_clients);
  } else if (!FLAGS_connect.empty()) {
    status = t::RunRemote(config, FLAGS_connect);
  } else {
    status = t::RunLoopback(config);
  }
  if (!status.ok()) return fail(status);
  return 0;
}
