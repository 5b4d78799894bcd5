// Copyright dreplay authors.
//
// connection_manager.h: the listening side of connection setup, shared by
// both providers. One owned thread polls the listen socket and every
// half-open peer (connected, hello not complete) at once, so a silent or
// slow peer delays nobody else:
//
//  * each half-open peer has its own deadline (hello_timeout from its
//    TCP accept); at it the peer is closed;
//  * at most max_half_open_per_source half-open peers per source address:
//    a new one beyond that closes THAT source's oldest, so a flood from one
//    address pushes out only itself;
//  * at most max_half_open in total: beyond that the oldest half-open peer
//    of the source holding the most is closed (again the flooder);
//  * a hello is a Preamble (setup_preamble.h) and a body of at most
//    max_hello_bytes, read as it arrives (memory grows with bytes received,
//    not with what a peer announces). A hello of another provider is
//    answered with a kReject naming this listener's provider and logged
//    with ProviderMismatchMessage; a hello whose body check_hello refuses is
//    answered with a kReject and its reason. Both are closed;
//  * complete hellos wait (at most max_waiting; beyond that a new one is
//    rejected as busy) for Accept().
//
// The manager allocates nothing for a peer but its socket and the bytes it
// sent: queue pairs, channels and keys are the provider's, made only when
// the application accepts the payload (PendingConnection::Accept).
//
// Thread safety: Accept, Shutdown and counters may be called from any
// thread. The destructor shuts down and joins the thread; hellos still
// waiting are closed unanswered.

#ifndef DREPLAY_VERBS_CONNECTION_MANAGER_H_
#define DREPLAY_VERBS_CONNECTION_MANAGER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "verbs/setup_preamble.h"
#include "verbs/tcp_channel.h"

namespace dreplay::verbs {

struct ConnectionManagerOptions {
  // The provider this listener serves; hellos of another are refused.
  SetupProvider provider = SetupProvider::kSoft;
  // How long a connected peer has to deliver its whole hello.
  absl::Duration hello_timeout = absl::Seconds(5);
  int max_half_open = 512;
  int max_half_open_per_source = 32;
  // Complete hellos not yet taken by Accept().
  int max_waiting = 64;
  // Largest hello body (after the preamble).
  uint32_t max_hello_bytes = 128 * 1024;
  // Checks a complete hello body on the manager's thread (must not block);
  // an error refuses the peer with its message. Null: every body passes.
  std::function<absl::Status(absl::string_view body)> check_hello;

  // kInvalidArgument naming the field: a non-positive timeout or bound, a
  // per-source bound above the total, max_hello_bytes 0.
  absl::Status Validate() const;
};

// A peer whose hello is complete and passed check_hello.
struct CompletedHello {
  std::unique_ptr<TcpConnection> connection;  // non-blocking, TCP_NODELAY
  std::string body;                           // the hello body (after the preamble)
};

// What the manager did, for logs and tests.
struct ConnectionManagerCounters {
  uint64_t accepted = 0;        // TCP connections taken from the socket
  uint64_t completed = 0;       // hellos queued for Accept()
  uint64_t timed_out = 0;       // closed at their deadline
  uint64_t evicted_source = 0;  // closed by the per-source bound
  uint64_t evicted_total = 0;   // closed by the total bound
  uint64_t refused = 0;         // bad preamble or body, other provider, busy
  uint64_t closed_by_peer = 0;  // hung up or reset during their hello
  int half_open = 0;            // now
};

class ConnectionManager {
 public:
  // Listens on host:port (port 0: the OS picks) and starts the thread.
  // kInvalidArgument for bad options or host; socket errors as tcp_channel.h.
  static absl::StatusOr<std::unique_ptr<ConnectionManager>> Start(const std::string& host,
                                                                  uint16_t port,
                                                                  ConnectionManagerOptions options);
  ~ConnectionManager();
  ConnectionManager(const ConnectionManager&) = delete;
  ConnectionManager& operator=(const ConnectionManager&) = delete;

  // Blocks up to `timeout` for the next complete hello. kDeadlineExceeded
  // when none came, kCancelled after Shutdown().
  absl::StatusOr<CompletedHello> Accept(absl::Duration timeout);

  // Wakes Accept() (kCancelled from now on) and stops the thread, which
  // closes every half-open peer. Idempotent.
  void Shutdown();

  uint16_t port() const { return socket_->port(); }
  const std::string& host() const { return socket_->host(); }
  ConnectionManagerCounters counters() const;

 private:
  struct HalfOpen;
  ConnectionManager(std::unique_ptr<TcpListenSocket> socket, ConnectionManagerOptions options);

  void Run();
  void AcceptNew();
  void Admit(std::unique_ptr<TcpConnection> connection);
  // Reads what has arrived; false when the peer is finished with (queued,
  // refused or closed).
  bool ReadHello(HalfOpen* h);
  bool Finish(HalfOpen* h);
  void Refuse(HalfOpen* h, const std::string& why);
  void EvictOldestOf(const std::string& source, uint64_t ConnectionManagerCounters::*counter,
                     const char* why);

  const std::unique_ptr<TcpListenSocket> socket_;
  const ConnectionManagerOptions options_;
  // Owned by the thread.
  std::deque<std::unique_ptr<HalfOpen>> half_open_;

  mutable Mutex mu_;
  CondVar ready_cv_;
  std::deque<CompletedHello> waiting_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  ConnectionManagerCounters counters_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_CONNECTION_MANAGER_H_
