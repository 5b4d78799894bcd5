// Copyright dreplay authors.
//
// tcp_channel.h: the TCP control channel used for connection setup.
//
// A small, blocking-with-deadline wrapper over POSIX TCP sockets that moves
// length-prefixed frames:
//
//   frame = u32 length (big-endian) | `length` bytes
//
// Every receive names the largest frame it accepts, so a peer that sends
// garbage cannot make us allocate more than that. Every call that can wait
// takes an absolute deadline and may be woken early through a "cancel fd"
// (any fd that becomes readable, e.g. TcpListenSocket's shutdown event).
//
//   ASSIGN_OR_RETURN(auto listener, TcpListenSocket::Listen("127.0.0.1", 0));
//   ... peer: ASSIGN_OR_RETURN(auto c, TcpConnection::Connect(host, port, deadline));
//             RETURN_IF_ERROR(c->SendFrame("hello", deadline));
//   ASSIGN_OR_RETURN(auto s, listener->Accept(deadline));
//   ASSIGN_OR_RETURN(std::string msg, s->ReceiveFrame(kMaxBytes, deadline));
//
// Status codes: kDeadlineExceeded (deadline passed), kCancelled (cancel fd
// readable), kUnavailable (refused, reset, peer closed), kInvalidArgument
// (bad host, frame over the limit), kInternal (other socket errors). Messages
// name the peer.
//
// Thread safety: a TcpConnection is used by one thread at a time. On a
// TcpListenSocket, Shutdown() may be called from any thread, concurrently
// with Accept(); other methods are const or single-threaded.

#ifndef DREPLAY_VERBS_TCP_CHANNEL_H_
#define DREPLAY_VERBS_TCP_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dreplay::verbs {

// Size of the length prefix of a frame.
inline constexpr size_t kFrameHeaderBytes = 4;

// A connected TCP stream (TCP_NODELAY). Owns its socket; closes it on
// destruction.
class TcpConnection {
 public:
  // Connects to host:port (numeric or resolvable name). Blocks until
  // connected or `deadline`. kUnavailable when nobody listens.
  static absl::StatusOr<std::unique_ptr<TcpConnection>> Connect(const std::string& host,
                                                                uint16_t port, absl::Time deadline);

  // Takes ownership of a connected socket `fd`; `peer` is "host:port".
  TcpConnection(int fd, std::string peer);
  ~TcpConnection();
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;

  // Sends one frame. Blocks until it is handed to the kernel or `deadline`.
  absl::Status SendFrame(absl::string_view data, absl::Time deadline);

  // Receives one frame of at most `max_bytes`. Blocks until it has arrived,
  // `deadline` passes, or `cancel_fd` (if >= 0) becomes readable. A frame
  // over the limit is kInvalidArgument (its bytes are not read).
  absl::StatusOr<std::string> ReceiveFrame(size_t max_bytes, absl::Time deadline,
                                           int cancel_fd = -1);

  // Sends / receives exactly `n` raw bytes (no frame), with the same
  // deadline and cancel rules as the frame calls.
  absl::Status WriteAll(const char* data, size_t n, absl::Time deadline);
  absl::Status ReadAll(char* data, size_t n, absl::Time deadline, int cancel_fd = -1);

  // Hands the socket (non-blocking, TCP_NODELAY, close-on-exec) to the
  // caller; this object then closes nothing and must not be used for I/O.
  int Release();

  // "host:port" of the other end.
  const std::string& peer() const { return peer_; }
  int fd() const { return fd_; }

 private:
  int fd_;
  const std::string peer_;
};

// A listening TCP socket with a shutdown event.
class TcpListenSocket {
 public:
  // Binds host:port (port 0: the OS picks one; host "" or "0.0.0.0": all
  // IPv4 interfaces) and listens.
  static absl::StatusOr<std::unique_ptr<TcpListenSocket>> Listen(const std::string& host,
                                                                 uint16_t port);

  ~TcpListenSocket();
  TcpListenSocket(const TcpListenSocket&) = delete;
  TcpListenSocket& operator=(const TcpListenSocket&) = delete;

  // Blocks until a peer connects (returns its connection), `deadline`
  // passes (kDeadlineExceeded) or Shutdown() was called (kCancelled).
  absl::StatusOr<std::unique_ptr<TcpConnection>> Accept(absl::Time deadline);

  // Wakes Accept() and makes it (and any wait given cancel_fd()) return
  // kCancelled from now on. Thread-safe, idempotent.
  void Shutdown();
  bool is_shutdown() const;

  // Readable once Shutdown() was called; pass to ReceiveFrame().
  int cancel_fd() const { return event_fd_; }

  uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }
  // The listening socket (non-blocking), for a caller that polls it; an
  // Accept() whose deadline has passed takes a pending peer without waiting.
  int fd() const { return fd_; }

 private:
  TcpListenSocket(int fd, int event_fd, std::string host, uint16_t port);

  const int fd_;
  const int event_fd_;
  const std::string host_;
  const uint16_t port_;
};

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_TCP_CHANNEL_H_
