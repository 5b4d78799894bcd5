// Copyright dreplay authors.
//
// in_process_service.h: helpers for tests that run a ReplayServer and its
// clients in one process, each "host" with its own soft provider, over
// loopback with an OS-chosen port.
//
//   auto server_host = testing::SoftProvider();
//   auto server = testing::StartServer(server_host.get(), testing::SmallServerOptions());
//   auto client_host = testing::SoftProvider();
//   auto session = ClientSession::Connect(client_host.get(),
//                                         testing::SessionOptions(*server, Role::kActor, 3));

#ifndef DREPLAY_TESTING_IN_PROCESS_SERVICE_H_
#define DREPLAY_TESTING_IN_PROCESS_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/session.h"
#include "replay_server/server.h"
#include "verbs/verbs.h"

namespace dreplay::testing {

// How long a test waits for a condition before it fails.
inline constexpr absl::Duration kTestTimeout = absl::Seconds(20);

// A soft provider (one per emulated host); CHECK-fails if it cannot start.
std::unique_ptr<verbs::Provider> SoftProvider();

// The provider the tests that run against a real device use:
// $DREPLAY_TEST_PROVIDER ("soft", the default, or "ibverbs"; tools/rxe_vm
// sets ibverbs). CHECK-fails on another value.
std::string TestProviderName();

// A provider of TestProviderName()'s kind; CHECK-fails if it cannot start.
std::unique_ptr<verbs::Provider> TestProvider();

// capacity 256, slot_size 168 (128-byte payloads), batch 8, depth 4,
// param_bytes 4096, max_actors 8; short timeouts and quick idle back-off;
// stats logged only on demand.
server::ReplayServerOptions SmallServerOptions();

// Starts a server on 127.0.0.1:0; CHECK-fails on error.
std::unique_ptr<server::ReplayServer> StartServer(verbs::Provider* provider,
                                                  const server::ReplayServerOptions& options);

// Options to connect to `server` as `role` (with the server's token).
client::ClientSessionOptions SessionOptions(const server::ReplayServer& server, protocol::Role role,
                                            uint32_t actor_id = 0,
                                            const std::string& auth_token = "");

// Polls `condition` until it holds (true) or `timeout` passes (false).
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout = kTestTimeout);

// A payload of `length` bytes that encodes `tag` (tests check it back).
std::vector<uint8_t> TaggedPayload(uint64_t tag, uint32_t length);
// The tag of a payload made by TaggedPayload; ~0 if it is not one.
uint64_t PayloadTag(const uint8_t* payload, uint32_t length);

}  // namespace dreplay::testing

#endif  // DREPLAY_TESTING_IN_PROCESS_SERVICE_H_
