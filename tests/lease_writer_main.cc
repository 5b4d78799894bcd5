// Copyright dreplay authors.
//
// lease_writer: a minimal actor process for multi-process tests. It connects
// to a replay server as actor --actor_id (soft provider), inserts --count
// tagged transitions of --payload_bytes with an ExperienceWriter (batches of
// --max_batch, blocking Flush), and prints "committed N abandoned M
// reconnects R lease L" on stdout before it exits 0. A test can SIGSTOP,
// SIGCONT or SIGKILL it at any moment: it is an actor stalled or killed
// mid-write.
//
//   lease_writer --server=127.0.0.1:7471 --actor_id=2 --count=20000

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "protocol/host_port.h"
#include "verbs/verbs.h"

DEFINE_string(server, "", "the replay server, HOST:PORT");
DEFINE_int32(actor_id, 0, "actor id");
DEFINE_int64(count, 10000, "transitions to insert");
DEFINE_int32(max_batch, 16, "transitions per Flush");
DEFINE_int32(payload_bytes, 64, "bytes per transition");

namespace dreplay::tests {
namespace {

absl::Status Run() {
  std::string host;
  uint16_t port = 0;
  absl::Status s = protocol::ParseHostPort(FLAGS_server, &host, &port);
  if (!s.ok()) return s;
  verbs::ProviderOptions po;
  po.kind = verbs::ProviderKind::kSoft;
  absl::StatusOr<std::unique_ptr<verbs::Provider>> provider = verbs::CreateProvider(po);
  if (!provider.ok()) return provider.status();
  client::ClientSessionOptions so;
  so.host = host;
  so.port = port;
  so.role = protocol::Role::kActor;
  so.actor_id = static_cast<uint32_t>(FLAGS_actor_id);
  so.insecure = true;  // the tests run it against servers without tokens
  so.connect_deadline = absl::Seconds(30);
  so.op_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<client::ClientSession>> session =
      client::ClientSession::Connect(provider->get(), so);
  if (!session.ok()) return session.status();
  actor::ExperienceWriterOptions wo;
  wo.max_batch = static_cast<uint32_t>(FLAGS_max_batch);
  wo.max_reconnects_per_flush = 100;
  absl::StatusOr<std::unique_ptr<actor::ExperienceWriter>> writer =
      actor::ExperienceWriter::Create(session->get(), wo);
  if (!writer.ok()) return writer.status();
  std::vector<uint8_t> payload(static_cast<size_t>(FLAGS_payload_bytes), 0x5a);
  const uint64_t tag_base = uint64_t{static_cast<uint32_t>(FLAGS_actor_id)} << 32;
  for (int64_t i = 0; i < FLAGS_count && s.ok(); ++i) {
    const uint64_t tag = tag_base | static_cast<uint64_t>(i);
    std::memcpy(payload.data(), &tag, std::min(sizeof(tag), payload.size()));
    s = (*writer)->Append(payload, 1.0f);
  }
  if (s.ok()) s = (*writer)->Flush();
  if (!s.ok()) return s;
  const actor::ExperienceWriterStats& stats = (*writer)->stats();
  std::cout << "committed " << stats.committed << " abandoned " << stats.abandoned << " reconnects "
            << stats.reconnects << " lease " << (*writer)->lease() << std::endl;
  return absl::OkStatus();
}

}  // namespace
}  // namespace dreplay::tests

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  const absl::Status s = dreplay::tests::Run();
  if (!s.ok()) {
    std::cerr << "lease_writer: " << s << "\n";
    return 1;
  }
  return 0;
}
