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
// Gb/s and latency percentiles, as text or (--json) as one JSON object,
// with the whole host's busy CPU time in the window per byte moved
// (host_cpu.h; for the benchmark alone on an otherwise idle machine).
// --baseline=tcp also streams messages of the same size over a loopback TCP
// connection for the same duration and reports the ratio. Across hosts or
// namespaces the stream crosses the same path as the benchmark: the server,
// given --baseline=tcp, also runs a TCP sink (printed), and the client
// streams to it (--tcp_sink=HOST:PORT):
//
//   verbs_bench --server --baseline=tcp --host=10.0.0.1 --port=18515      # host A
//   verbs_bench --connect=10.0.0.1:18515 --baseline=tcp --tcp_sink=10.0.0.1:PORT  # host B
//
// The server registers a region of size x depth bytes for the connection
// (the client asks for it in its connect payload) and replies with its
// RemoteRegion; it never polls, since one-sided verbs need no server CPU.
//
// This file holds the flags and the modes; the parts live beside it:
// verbs_bench_config (what a run measures), verbs_bench_session (both ends
// of a connection), verbs_bench_runner (the client loop), verbs_bench_report
// (text and JSON) and tcp_baseline (the TCP stream).

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "protocol/host_port.h"
#include "tools/bench/tcp_baseline.h"
#include "tools/bench/verbs_bench_config.h"
#include "tools/bench/verbs_bench_report.h"
#include "tools/bench/verbs_bench_runner.h"
#include "tools/bench/verbs_bench_session.h"
#include "verbs/provider_flag_definitions.h"
#include "verbs/provider_flags.h"
#include "verbs/verbs.h"

DEFINE_string(op, "write", "write, read, fetch_add or compare_swap");
DEFINE_uint64(size, 65536, "bytes per request (atomics: 8)");
DEFINE_int32(depth, 16, "requests kept outstanding");
DEFINE_int32(batch, 1, "requests per PostSend (one doorbell)");
DEFINE_double(duration_s, 5, "measured seconds");
DEFINE_double(warmup_s, 0.5, "seconds run before measuring");
DEFINE_string(link, "none",
              "emulated link (soft provider): none, 10km-25g, 100km-10g, "
              "1000km-1g or DELAY_US:GBPS");
DEFINE_bool(json, false, "print one JSON object instead of text");
DEFINE_string(baseline, "none",
              "none, or tcp: also measure a TCP stream (loopback; with --connect, to "
              "--tcp_sink; with --server, run that sink and print its address)");
DEFINE_string(tcp_sink, "",
              "--connect --baseline=tcp: host:port of the server's TCP sink, as its "
              "'tcp sink on' line printed");
DEFINE_bool(server, false, "serve clients (two-host mode) instead of running one");
DEFINE_string(host, "0.0.0.0", "--server: address to listen on");
DEFINE_int32(port, 0, "--server: port to listen on (0: any, printed)");
DEFINE_int32(server_clients, 0, "--server: exit after this many clients (0: never)");
DEFINE_string(connect, "", "host:port of a --server to benchmark against");

namespace dreplay::tools {
namespace {

using verbs::Provider;

constexpr char kLoopback[] = "127.0.0.1";
// How long the in-process server waits for the client to connect.
constexpr absl::Duration kAcceptTimeout = absl::Seconds(30);
// How often a --server wakes up to check for a new client.
constexpr absl::Duration kServerPoll = absl::Seconds(1);

absl::StatusOr<VerbsBenchConfig> ConfigFromFlags() {
  VerbsBenchConfig config;
  ASSIGN_OR_RETURN(config.op, ParseBenchOp(FLAGS_op));
  config.size = FLAGS_size;
  if (config.atomic() && gflags::GetCommandLineFlagInfoOrDie("size").is_default) {
    config.size = kBenchAtomicSize;
  }
  config.depth = FLAGS_depth;
  config.batch = FLAGS_batch;
  config.duration_s = FLAGS_duration_s;
  config.warmup_s = FLAGS_warmup_s;
  config.json = FLAGS_json;
  config.link_spec = FLAGS_link;
  absl::StatusOr<verbs::LinkModel> link = verbs::ParseLinkModel(FLAGS_link);
  if (!link.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--link: ", link.status().message()));
  }
  config.link = *link;
  // The shared provider flags (verbs/provider_flag_definitions.h).
  const verbs::ProviderFlags provider_flags = verbs::ProviderFlagsFromCommandLine();
  ASSIGN_OR_RETURN(config.provider, verbs::ProviderOptionsFromFlags(provider_flags));
  config.rnr_retry = provider_flags.rnr_retry;
  if (FLAGS_baseline == "tcp") {
    config.tcp_baseline = true;
  } else if (FLAGS_baseline != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--baseline=", FLAGS_baseline, ": expected none or tcp"));
  }
  RETURN_IF_ERROR(config.Validate());
  return config;
}

// Where the TCP baseline streams to: its own loopback sink (port 0) or a
// server's.
struct SinkAddress {
  std::string host;
  uint16_t port = 0;
};

absl::Status MeasureAndPrint(BenchClientSession* session, const std::string& provider,
                             const std::string& mode, const VerbsBenchConfig& config,
                             const SinkAddress& sink = {}) {
  VerbsBenchReport report;
  report.provider = provider;
  report.mode = mode;
  report.max_rd_atomic = session->qp->max_rd_atomic();
  report.max_inline_data = session->qp->max_inline_data();
  ASSIGN_OR_RETURN(report.rdma,
                   RunBenchOps(session->qp.get(), *session->mr, session->remote, config));
  if (config.tcp_baseline) {
    const absl::Duration duration = absl::Seconds(config.duration_s);
    if (sink.port == 0) {
      ASSIGN_OR_RETURN(report.tcp, RunLoopbackTcpStream(config.size, duration));
    } else {
      ASSIGN_OR_RETURN(report.tcp, RunTcpStream(sink.host, sink.port, config.size, duration));
    }
  }
  std::cout << FormatVerbsBenchReport(config, report) << std::flush;
  return absl::OkStatus();
}

// Server and client in this process, each with its own provider.
absl::Status RunLoopback(const VerbsBenchConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<Provider> server_provider, MakeBenchProvider(config));
  ASSIGN_OR_RETURN(std::unique_ptr<Provider> client_provider, MakeBenchProvider(config));
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Listener> listener,
                   server_provider->Listen(kLoopback, 0));
  absl::StatusOr<std::unique_ptr<BenchServerSession>> server = absl::UnknownError("not served");
  std::thread server_thread([&] {
    server = ServeOneBenchClient(server_provider.get(), listener.get(), kAcceptTimeout,
                                 config.QueuePairOptions());
  });
  auto client = ConnectBenchClient(client_provider.get(), kLoopback, listener->port(), config);
  if (!client.ok()) listener->Shutdown();
  server_thread.join();
  RETURN_IF_ERROR(client.status());
  RETURN_IF_ERROR(server.status());
  return MeasureAndPrint(client->get(), client_provider->name(), "loopback", config);
}

absl::Status RunRemote(const VerbsBenchConfig& config, const std::string& connect) {
  std::string host;
  uint16_t port = 0;
  const absl::Status address = protocol::ParseHostPort(connect, &host, &port);
  if (!address.ok() || port == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--connect=", connect, ": expected host:port with port in [1, 65535]"));
  }
  SinkAddress sink;
  if (config.tcp_baseline) {
    const absl::Status sink_address =
        protocol::ParseHostPort(FLAGS_tcp_sink, &sink.host, &sink.port);
    if (FLAGS_tcp_sink.empty() || !sink_address.ok() || sink.port == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tcp_sink='", FLAGS_tcp_sink,
          "': --connect with --baseline=tcp streams to the server's TCP sink; give the "
          "host:port that verbs_bench --server --baseline=tcp printed ('tcp sink on ...')"));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Provider> provider, MakeBenchProvider(config));
  ASSIGN_OR_RETURN(std::unique_ptr<BenchClientSession> client,
                   ConnectBenchClient(provider.get(), host, port, config));
  return MeasureAndPrint(client.get(), provider->name(), absl::StrCat("remote ", connect), config,
                         sink);
}

// Serves clients one after another; each new client replaces the previous
// connection (and its region).
absl::Status RunServer(const VerbsBenchConfig& config, const std::string& host, uint16_t port,
                       int max_clients) {
  std::unique_ptr<TcpStreamSink> sink;
  if (config.tcp_baseline) {
    ASSIGN_OR_RETURN(sink, TcpStreamSink::Start(host, 0));
    std::cout << "verbs_bench tcp sink on " << host << ":" << sink->port() << std::endl;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Provider> provider, MakeBenchProvider(config));
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Listener> listener, provider->Listen(host, port));
  std::cout << "verbs_bench server (" << provider->name() << ") listening on " << listener->host()
            << ":" << listener->port() << std::endl;
  std::unique_ptr<BenchServerSession> current;
  int served = 0;
  while (max_clients == 0 || served < max_clients) {
    auto session =
        ServeOneBenchClient(provider.get(), listener.get(), kServerPoll, config.QueuePairOptions());
    if (absl::IsDeadlineExceeded(session.status())) continue;
    if (!session.ok()) {
      LOG(WARNING) << "client refused: " << session.status();
      continue;
    }
    current = std::move(*session);
    ++served;
    LOG(INFO) << "serving client " << served << ": " << current->qp->Describe();
  }
  // Let the last client finish (and its TCP stream to the sink, which
  // follows) before its region goes away.
  if (current != nullptr) {
    const double streamed_s = config.tcp_baseline ? config.duration_s : 0;
    absl::SleepFor(absl::Seconds(config.warmup_s + config.duration_s + streamed_s) +
                   kBenchDrainTimeout);
  }
  return absl::OkStatus();
}

absl::Status Run() {
  ASSIGN_OR_RETURN(const VerbsBenchConfig config, ConfigFromFlags());
  if (FLAGS_server && !FLAGS_connect.empty()) {
    return absl::InvalidArgumentError("--server and --connect exclude each other");
  }
  if (!FLAGS_tcp_sink.empty() && (FLAGS_connect.empty() || !config.tcp_baseline)) {
    return absl::InvalidArgumentError(
        "--tcp_sink is for --connect with --baseline=tcp (the server's sink)");
  }
  if (!FLAGS_server) {
    return FLAGS_connect.empty() ? RunLoopback(config) : RunRemote(config, FLAGS_connect);
  }
  if (FLAGS_port < 0 || FLAGS_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port=", FLAGS_port, ": must be in [0, 65535]"));
  }
  if (FLAGS_server_clients < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server_clients=", FLAGS_server_clients, ": must be >= 0"));
  }
  return RunServer(config, FLAGS_host, static_cast<uint16_t>(FLAGS_port), FLAGS_server_clients);
}

}  // namespace
}  // namespace dreplay::tools

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "throughput and latency of one-sided verbs; see tools/bench/verbs_bench.cc");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  absl::Status status =
      argc > 1 ? absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", argv[1], "\""))
               : dreplay::tools::Run();
  if (!status.ok()) {
    std::cerr << "verbs_bench: " << status.message() << std::endl;
    return 1;
  }
  return 0;
}
