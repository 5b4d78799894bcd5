// Copyright dreplay authors.
//
// socket.h: the TCP plumbing of the soft provider: an owned descriptor,
// listen and connect with deadlines, and exact-length send / receive with
// deadlines for connection setup. Every socket is non-blocking, has
// TCP_NODELAY set and is close-on-exec. Sends never raise SIGPIPE.
//
// All functions are thread-safe (they touch only their arguments).

#ifndef DREPLAY_VERBS_SOFT_SOCKET_H_
#define DREPLAY_VERBS_SOFT_SOCKET_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace dreplay::verbs::soft {

// Owns a file descriptor; closes it on destruction.
using Fd = ::dreplay::UniqueFd;

// Binds and listens on host:port (port 0: the OS picks). `*bound_port`
// receives the port. kInvalidArgument for a host that does not resolve,
// kUnavailable when binding fails (e.g. port in use).
absl::StatusOr<Fd> ListenTcp(const std::string& host, uint16_t port, uint16_t* bound_port);

// Accepts one pending connection; an invalid Fd when none is pending.
Fd AcceptTcp(int listen_fd);

// Connects to host:port before `deadline`. kUnavailable when refused or
// unreachable, kDeadlineExceeded on timeout, kInvalidArgument for a host that
// does not resolve.
absl::StatusOr<Fd> ConnectTcp(const std::string& host, uint16_t port, absl::Time deadline);

// Sends all `n` bytes before `deadline`. kUnavailable when the peer is gone,
// kDeadlineExceeded on timeout.
absl::Status SendAll(int fd, const void* data, size_t n, absl::Time deadline);

// Receives exactly `n` bytes before `deadline`. kUnavailable when the peer
// closes or resets first, kDeadlineExceeded on timeout.
absl::Status RecvAll(int fd, void* data, size_t n, absl::Time deadline);

// "host:port" of the socket's local / remote end ("?" if unknown).
std::string LocalAddress(int fd);
std::string PeerAddress(int fd);

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_SOCKET_H_
