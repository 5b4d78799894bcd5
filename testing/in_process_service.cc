// Copyright dreplay authors.

#include "testing/in_process_service.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "glog/logging.h"
#include "testing/session_options.h"

namespace dreplay::testing {

std::unique_ptr<verbs::Provider> SoftProvider() {
  verbs::ProviderOptions options;
  options.kind = verbs::ProviderKind::kSoft;
  absl::StatusOr<std::unique_ptr<verbs::Provider>> provider = verbs::CreateProvider(options);
  CHECK(provider.ok()) << provider.status();
  return std::move(*provider);
}

std::string TestProviderName() {
  const char* value = std::getenv("DREPLAY_TEST_PROVIDER");
  const std::string name = value == nullptr || *value == '\0' ? "soft" : value;
  CHECK(name == "soft" || name == "ibverbs")
      << "DREPLAY_TEST_PROVIDER must be soft or ibverbs, not \"" << name << "\"";
  return name;
}

std::unique_ptr<verbs::Provider> TestProvider() {
  verbs::ProviderOptions options;
  options.kind =
      TestProviderName() == "ibverbs" ? verbs::ProviderKind::kIbverbs : verbs::ProviderKind::kSoft;
  absl::StatusOr<std::unique_ptr<verbs::Provider>> provider = verbs::CreateProvider(options);
  CHECK(provider.ok()) << provider.status();
  return std::move(*provider);
}

server::ReplayServerOptions SmallServerOptions() {
  server::ReplayServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  protocol::LayoutConfig& l = o.layout;
  l.capacity = 256;
  l.slot_size = 168;
  l.batch_size = 8;
  l.staging_depth = 4;
  l.param_bytes = 4096;
  l.max_actors = 8;
  l.leases = 8;
  l.observation_size = 4;
  l.num_actions = 2;
  CHECK(l.set_spec("test f32").ok());
  o.core.memory.seed = 7;
  o.core.min_sleep = absl::Microseconds(20);
  o.core.max_sleep = absl::Microseconds(200);
  o.stats_interval = absl::InfiniteDuration();
  o.heartbeat_interval = absl::Milliseconds(100);
  o.housekeeping_interval = absl::Milliseconds(10);
  return o;
}

std::unique_ptr<server::ReplayServer> StartServer(verbs::Provider* provider,
                                                  const server::ReplayServerOptions& options) {
  absl::StatusOr<std::unique_ptr<server::ReplayServer>> server =
      server::ReplayServer::Start(provider, options);
  CHECK(server.ok()) << server.status();
  return std::move(*server);
}

client::ClientSessionOptions SessionOptions(const server::ReplayServer& server, protocol::Role role,
                                            uint32_t actor_id, const std::string& auth_token) {
  return TestSessionOptions(server.host(), server.port(), role, actor_id, auth_token);
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

std::vector<uint8_t> TaggedPayload(uint64_t tag, uint32_t length) {
  CHECK_GE(length, sizeof(uint64_t));
  std::vector<uint8_t> p(length);
  std::memcpy(p.data(), &tag, sizeof(tag));
  for (uint32_t i = sizeof(tag); i < length; ++i) {
    p[i] = static_cast<uint8_t>((tag * 131 + i) & 0xff);
  }
  return p;
}

uint64_t PayloadTag(const uint8_t* payload, uint32_t length) {
  if (length < sizeof(uint64_t)) return ~uint64_t{0};
  uint64_t tag;
  std::memcpy(&tag, payload, sizeof(tag));
  for (uint32_t i = sizeof(tag); i < length; ++i) {
    if (payload[i] != static_cast<uint8_t>((tag * 131 + i) & 0xff)) return ~uint64_t{0};
  }
  return tag;
}

}  // namespace dreplay::testing
