// Copyright dreplay authors.

#include "tools/bench/verbs_bench_session.h"

#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace dreplay::tools {
namespace {

// Connect payload: "region_bytes=<n>".
constexpr absl::string_view kRegionKey = "region_bytes=";

}  // namespace

absl::StatusOr<std::unique_ptr<verbs::Provider>> MakeBenchProvider(const VerbsBenchConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider,
                   verbs::CreateProvider(config.provider));
  if (config.link.enabled() && provider->name() != "soft") {
    return absl::InvalidArgumentError(absl::StrCat("--link=", config.link_spec,
                                                   " needs the soft provider, but this run uses ",
                                                   provider->name(), "; add --provider=soft"));
  }
  return provider;
}

absl::StatusOr<std::unique_ptr<BenchServerSession>> ServeOneBenchClient(
    verbs::Provider* provider, verbs::Listener* listener, absl::Duration timeout,
    const verbs::QueuePairOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::PendingConnection> pending, listener->Accept(timeout));
  const std::string& payload = pending->payload();
  uint64_t bytes = 0;
  if (!absl::StartsWith(payload, kRegionKey) ||
      !absl::SimpleAtoi(payload.substr(kRegionKey.size()), &bytes) || bytes == 0 ||
      bytes > kBenchMaxRegionBytes) {
    pending->Reject(
        absl::StrCat("verbs_bench server: bad request \"", payload.substr(0, 64), "\""));
    return absl::InvalidArgumentError(
        absl::StrCat("client ", pending->peer(), " sent a bad request"));
  }
  auto session = std::make_unique<BenchServerSession>();
  absl::StatusOr<verbs::ShareableMemory> memory =
      verbs::ShareableMemory::Allocate(bytes, 0, /*remote_read_only=*/false);
  if (!memory.ok()) {
    pending->Reject(absl::StrCat("verbs_bench server: ", memory.status().message()));
    return memory.status();
  }
  session->memory = std::move(*memory);
  auto mr = provider->RegisterMemory(
      session->memory.data(), bytes,
      verbs::kLocalWrite | verbs::kRemoteRead | verbs::kRemoteWrite | verbs::kRemoteAtomic);
  if (!mr.ok()) {
    pending->Reject(absl::StrCat("verbs_bench server: ", mr.status().message()));
    return mr.status();
  }
  session->mr = std::move(*mr);
  const verbs::RemoteRegion region = session->mr->remote();
  std::string reply(sizeof(region), '\0');
  std::memcpy(reply.data(), &region, sizeof(region));
  ASSIGN_OR_RETURN(session->qp, pending->Accept(reply, options));
  return session;
}

absl::StatusOr<std::unique_ptr<BenchClientSession>> ConnectBenchClient(
    verbs::Provider* provider, const std::string& host, uint16_t port,
    const VerbsBenchConfig& config) {
  auto session = std::make_unique<BenchClientSession>();
  session->memory.assign((config.region_bytes() + 7) / 8, 0);
  ASSIGN_OR_RETURN(
      session->mr,
      provider->RegisterMemory(session->memory.data(), config.region_bytes(), verbs::kLocalWrite));
  ASSIGN_OR_RETURN(verbs::Connection conn,
                   provider->Connect(host, port, absl::StrCat(kRegionKey, config.region_bytes()),
                                     config.QueuePairOptions()));
  if (conn.reply.size() != sizeof(verbs::RemoteRegion)) {
    return absl::DataLossError(
        absl::StrCat("server replied with ", conn.reply.size(), " bytes, expected a RemoteRegion"));
  }
  std::memcpy(&session->remote, conn.reply.data(), sizeof(verbs::RemoteRegion));
  if (session->remote.length < config.region_bytes()) {
    return absl::DataLossError("server's region is smaller than asked for");
  }
  session->qp = std::move(conn.qp);
  return session;
}

}  // namespace dreplay::tools
