// Copyright dreplay authors.

#include "verbs/soft/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace dreplay::verbs::soft {
namespace {

constexpr int kListenBacklog = 128;

void ConfigureSocket(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

absl::StatusOr<AddrInfoPtr> Resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string service = absl::StrCat(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve \"", host, "\": ", gai_strerror(rc)));
  }
  return AddrInfoPtr(result);
}

std::string FormatAddress(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  } else {
    return "?";
  }
  return absl::StrCat(host, ":", port);
}

// Waits until `fd` is ready for `events` or `deadline` passes.
absl::Status WaitFor(int fd, short events, absl::Time deadline, const char* what) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("timed out ", what));
    }
    pollfd p = {fd, events, 0};
    const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(left));
    const int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("poll while ", what, ": ", strerror(errno)));
    }
  }
}

}  // namespace

absl::StatusOr<Fd> ListenTcp(const std::string& host, uint16_t port, uint16_t* bound_port) {
  auto resolved = Resolve(host, port, /*passive=*/true);
  if (!resolved.ok()) return resolved.status();
  std::string last_error = "no address";
  for (addrinfo* ai = resolved->get(); ai != nullptr; ai = ai->ai_next) {
    Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_error = absl::StrCat("socket: ", strerror(errno));
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = absl::StrCat("bind: ", strerror(errno));
      continue;
    }
    if (listen(fd.get(), kListenBacklog) != 0) {
      last_error = absl::StrCat("listen: ", strerror(errno));
      continue;
    }
    sockaddr_storage ss = {};
    socklen_t len = sizeof(ss);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    *bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    return fd;
  }
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", host, ":", port, ": ", last_error));
}

Fd AcceptTcp(int listen_fd) {
  Fd fd(accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (fd.valid()) ConfigureSocket(fd.get());
  return fd;
}

absl::StatusOr<Fd> ConnectTcp(const std::string& host, uint16_t port, absl::Time deadline) {
  auto resolved = Resolve(host, port, /*passive=*/false);
  if (!resolved.ok()) return resolved.status();
  absl::Status last = absl::UnavailableError("no address");
  for (addrinfo* ai = resolved->get(); ai != nullptr; ai = ai->ai_next) {
    Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last = absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
      continue;
    }
    ConfigureSocket(fd.get());
    if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = absl::UnavailableError(
            absl::StrCat("connect to ", host, ":", port, ": ", strerror(errno)));
        continue;
      }
      const std::string what = absl::StrCat("connecting to ", host, ":", port);
      absl::Status ready = WaitFor(fd.get(), POLLOUT, deadline, what.c_str());
      if (!ready.ok()) return ready;
      int error = 0;
      socklen_t len = sizeof(error);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0) {
        last = absl::UnavailableError(
            absl::StrCat("connect to ", host, ":", port, ": ", strerror(error)));
        continue;
      }
    }
    return fd;
  }
  return last;
}

absl::Status SendAll(int fd, const void* data, size_t n, absl::Time deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t sent = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      p += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      absl::Status ready = WaitFor(fd, POLLOUT, deadline, "sending");
      if (!ready.ok()) return ready;
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    return absl::UnavailableError(
        absl::StrCat("send: ", sent < 0 ? strerror(errno) : "no progress"));
  }
  return absl::OkStatus();
}

absl::Status RecvAll(int fd, void* data, size_t n, absl::Time deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t got = recv(fd, p, n, MSG_DONTWAIT);
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return absl::UnavailableError("connection closed by peer");
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      absl::Status ready = WaitFor(fd, POLLIN, deadline, "receiving");
      if (!ready.ok()) return ready;
      continue;
    }
    if (errno == EINTR) continue;
    return absl::UnavailableError(absl::StrCat("recv: ", strerror(errno)));
  }
  return absl::OkStatus();
}

std::string LocalAddress(int fd) {
  sockaddr_storage ss = {};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return FormatAddress(ss);
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss = {};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return FormatAddress(ss);
}

}  // namespace dreplay::verbs::soft
