// Copyright dreplay authors.
//
// server_process.h: helpers for tests that run the real replay_server
// binary (and other tools) as child processes.
//
//   ServerProcessOptions options;
//   options.flags = {"--capacity=4096", "--auth_token=t"};
//   ASSIGN_OR_RETURN(auto server, ServerProcess::Start(options));
//   ... connect clients to server->host(), server->port() ...
//   ASSIGN_OR_RETURN(int exit_status, server->Stop(SIGTERM, kServerStopTimeout));
//
// Start() spawns the binary with --listen=127.0.0.1:0 (or options.listen),
// --provider=soft and --port_file, and polls the port file (which the server
// writes atomically once clients may connect) until it appears, the child
// exits, or options.start_timeout passes. The child's stdout and stderr go
// to files in a fresh directory under TEST_TMPDIR; LogTail() returns the end
// of stderr for failure messages. The destructor kills a child that is still
// running (SIGKILL, by pid) and reaps it.
//
// Children inherit the test's environment; under ThreadSanitizer (TSAN_OPTIONS
// set) their TSAN_OPTIONS also name testing/tsan_child_suppressions.txt and
// ask for the longest access history.
//
// Binaries are found by their runfiles path relative to the test's working
// directory (e.g. "replay_server/replay_server"): list them in the test's
// `data`.
//
// Not thread-safe: one thread drives a ServerProcess.

#ifndef DREPLAY_TESTING_SERVER_PROCESS_H_
#define DREPLAY_TESTING_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dreplay::testing {

// Bounds on how long the helpers wait for a child.
inline constexpr absl::Duration kServerStartTimeout = absl::Seconds(30);
inline constexpr absl::Duration kServerStopTimeout = absl::Seconds(30);
inline constexpr absl::Duration kCommandTimeout = absl::Seconds(60);

// A fresh, empty directory under TEST_TMPDIR named after `name` (made unique
// with a counter); CHECK-fails when it cannot be created.
std::string MakeTestDir(const std::string& name);

// Writes `contents` to `path` (replacing it) with mode 0600, as a token file
// must be; CHECK-fails when it cannot.
void WriteSecretFile(const std::string& path, const std::string& contents);

struct ServerProcessOptions {
  std::string binary = "replay_server/replay_server";
  // "HOST:PORT" for --listen; port 0: the OS picks one.
  std::string listen = "127.0.0.1:0";
  // --provider: "soft", or "ibverbs" for a real device (TestProviderName()).
  std::string provider = "soft";
  // More flags (e.g. "--capacity=4096"). Without a token flag
  // (--auth_token*, --*_token_file) Start() adds --insecure.
  std::vector<std::string> flags;
  absl::Duration start_timeout = kServerStartTimeout;
};

class ServerProcess {
 public:
  // Spawns the server and waits until it listens. Errors: Internal (spawn),
  // FailedPrecondition (the child exited first: its exit status and the end
  // of its log in the message), DeadlineExceeded (no port in time; the child
  // is killed).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const ServerProcessOptions& options);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  std::string address() const;  // "host:port"

  // True while the child has not exited (reaps it when it has).
  bool Running();
  // Sends `signal` and waits up to `timeout` for the child to exit. Returns
  // its exit status (0..255), or 128 + the signal that ended it.
  // DeadlineExceeded (after which the child is killed) when it did not exit.
  absl::StatusOr<int> Stop(int signal, absl::Duration timeout);
  // The last `bytes` of the child's stderr.
  std::string LogTail(size_t bytes = 4000) const;

 private:
  ServerProcess() = default;

  pid_t pid_ = -1;
  std::optional<int> exit_status_;  // set once reaped
  std::string dir_;
  std::string host_;
  uint16_t port_ = 0;
};

struct CommandResult {
  int exit_status = -1;  // 0..255, or 128 + the signal that ended it
  std::string out;       // stdout
  std::string err;       // stderr
};

// Runs `argv` (argv[0]: a runfiles path or an absolute path) to completion
// and captures its output. DeadlineExceeded (the child is killed) after
// `timeout`; Internal when it cannot be spawned.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout = kCommandTimeout);

}  // namespace dreplay::testing

#endif  // DREPLAY_TESTING_SERVER_PROCESS_H_
