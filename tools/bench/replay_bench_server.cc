// Copyright dreplay authors.

#include "tools/bench/replay_bench_server.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/session.h"
#include "client/stats_reader.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "verbs/verbs.h"

namespace dreplay::tools {
namespace {

class LocalBenchServer : public BenchServer {
 public:
  LocalBenchServer(std::unique_ptr<verbs::Provider> provider,
                   std::unique_ptr<server::ReplayServer> server)
      : provider_(std::move(provider)), server_(std::move(server)) {}

  const std::string& host() const override { return server_->host(); }
  uint16_t port() const override { return server_->port(); }
  absl::StatusOr<protocol::StatsBlock> ReadStats() const override { return server_->ReadStats(); }
  // Idempotent, as the server's; its destructor stops it too.
  absl::Status Stop() override { return server_->Stop(); }

 private:
  const std::unique_ptr<verbs::Provider> provider_;  // outlives the server
  const std::unique_ptr<server::ReplayServer> server_;
};

class RemoteBenchServer : public BenchServer {
 public:
  RemoteBenchServer(std::string host, uint16_t port, std::unique_ptr<verbs::Provider> provider,
                    std::unique_ptr<client::ClientSession> session,
                    std::unique_ptr<client::StatsReader> reader)
      : host_(std::move(host)),
        port_(port),
        provider_(std::move(provider)),
        session_(std::move(session)),
        reader_(std::move(reader)) {}

  const std::string& host() const override { return host_; }
  uint16_t port() const override { return port_; }
  absl::StatusOr<protocol::StatsBlock> ReadStats() const override {
    MutexLock lock(&mu_);
    return reader_->ReadStats();
  }
  absl::Status Stop() override { return absl::OkStatus(); }

 private:
  const std::string host_;
  const uint16_t port_;
  // Declared first: the reader and the session go before the provider.
  const std::unique_ptr<verbs::Provider> provider_;
  std::unique_ptr<client::ClientSession> session_;
  mutable Mutex mu_;
  std::unique_ptr<client::StatsReader> reader_ ABSL_GUARDED_BY(mu_);
};

// A ReplayServer of `c` on host:port, on a provider of its own. With
// `clients_here`, the clients' emulated links run on this provider's kind:
// InvalidArgument unless it is the soft provider.
absl::StatusOr<std::unique_ptr<BenchServer>> StartServer(const ReplayBenchConfig& c,
                                                         const std::string& host, uint16_t port,
                                                         bool clients_here) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider, verbs::CreateProvider(c.provider));
  if (clients_here && (c.link.enabled() || c.actor_link.enabled()) && provider->name() != "soft") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--link / --actor_link need the soft provider; this run uses ", provider->name()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<server::ReplayServer> server,
                   server::ReplayServer::Start(provider.get(), BenchServerOptions(c, host, port)));
  return std::unique_ptr<BenchServer>(new LocalBenchServer(std::move(provider), std::move(server)));
}

}  // namespace

server::ReplayServerOptions BenchServerOptions(const ReplayBenchConfig& c, const std::string& host,
                                               uint16_t port) {
  server::ReplayServerOptions so;
  so.host = host;
  so.port = port;
  so.layout = c.layout;
  so.core.memory.alpha = c.alpha;
  so.core.memory.seed = c.seed;
  so.core.sampler.rate_limiter.min_size_to_sample = c.layout.batch_size;
  so.core.max_sleep = c.core_max_sleep;
  so.core.min_sleep = std::min(so.core.min_sleep, c.core_max_sleep);
  so.core.spin_steps = c.core_spin_steps;
  so.stats_interval = absl::InfiniteDuration();
  so.max_monitors = 4;
  so.max_clients = std::max<uint32_t>(static_cast<uint32_t>(c.actors + c.stalled_actors + 8),
                                      c.layout.leases + 1 + so.max_monitors);
  so.core.sampler.rate_limiter.samples_per_insert = c.samples_per_insert;
  so.core.sampler.rate_limiter.error_buffer = c.spi_error_buffer;
  so.core.sampler.rate_limiter.block_inserts = c.samples_per_insert > 0 && c.spi_block_actors;
  if (c.samples_per_insert > 0) {
    // The budget starts after the prefill, so that the measured window runs
    // at the ratio instead of sampling the prefill's credit first.
    so.core.sampler.rate_limiter.min_size_to_sample =
        std::max<uint64_t>(c.layout.batch_size, c.prefill);
  }
  return so;
}

absl::StatusOr<std::unique_ptr<BenchServer>> StartLocalBenchServer(const ReplayBenchConfig& c) {
  return StartServer(c, "127.0.0.1", 0, /*clients_here=*/true);
}

absl::StatusOr<std::unique_ptr<BenchServer>> ConnectRemoteBenchServer(const ReplayBenchConfig& c,
                                                                      const std::string& host,
                                                                      uint16_t port) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider, verbs::CreateProvider(c.provider));
  client::ClientSessionOptions o;
  o.host = host;
  o.port = port;
  o.role = protocol::Role::kMonitor;
  o.insecure = true;  // a benchmark's server, without tokens
  o.connect_deadline = absl::Seconds(10);
  o.op_timeout = absl::Seconds(30);
  ASSIGN_OR_RETURN(std::unique_ptr<client::ClientSession> session,
                   client::ClientSession::Connect(provider.get(), o));
  if (session->config() != c.layout) {
    return absl::FailedPreconditionError(absl::StrCat("the server at ", host, ":", port,
                                                      " has another layout than these flags give: ",
                                                      session->config().FirstDifference(c.layout)));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<client::StatsReader> reader,
                   client::StatsReader::Create(session.get()));
  return std::unique_ptr<BenchServer>(new RemoteBenchServer(host, port, std::move(provider),
                                                            std::move(session), std::move(reader)));
}

absl::Status ServeBench(const ReplayBenchConfig& c, const std::string& host, uint16_t port,
                        const std::function<void(const std::string&)>& listening,
                        const std::function<void()>& wait_for_stop) {
  ASSIGN_OR_RETURN(std::unique_ptr<BenchServer> server,
                   StartServer(c, host, port, /*clients_here=*/false));
  listening(absl::StrCat(server->host(), ":", server->port()));
  wait_for_stop();
  return server->Stop();
}

}  // namespace dreplay::tools
