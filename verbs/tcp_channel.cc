// Copyright dreplay authors.

#include "verbs/tcp_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::verbs {
namespace {

constexpr int kListenBacklog = 1024;  // the kernel caps it at net.core.somaxconn

absl::Status ErrnoStatus(int error_number, absl::string_view what) {
  return absl::Status(absl::ErrnoToStatusCode(error_number),
                      absl::StrCat(what, ": ", std::strerror(error_number)));
}

// Milliseconds until `deadline` for poll(), rounded up, at least 0.
int PollTimeoutMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  if (left == absl::InfiniteDuration()) return -1;
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
}

absl::Status SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return ErrnoStatus(errno, "fcntl(O_NONBLOCK)");
  }
  return absl::OkStatus();
}

std::string FormatAddress(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return absl::StrCat(host, ":", port);
}

// Resolves host:port into addresses for a TCP socket; `passive` for bind().
absl::StatusOr<addrinfo*> Resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  const char* node = host.empty() ? nullptr : host.c_str();
  if (node == nullptr && passive) hints.ai_family = AF_INET;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(node, service.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve \"", host, ":", port, "\": ", gai_strerror(rc)));
  }
  return result;
}

// Waits until `fd` has `events` or `cancel_fd` is readable. OK when `fd` is
// ready; kDeadlineExceeded / kCancelled otherwise.
absl::Status WaitFor(int fd, short events, absl::Time deadline, int cancel_fd,
                     absl::string_view what) {
  for (;;) {
    pollfd fds[2];
    fds[0] = {fd, events, 0};
    fds[1] = {cancel_fd, POLLIN, 0};
    const int nfds = cancel_fd >= 0 ? 2 : 1;
    const int rc = poll(fds, nfds, PollTimeoutMs(deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat(what, ": poll"));
    }
    if (nfds == 2 && (fds[1].revents & POLLIN)) {
      return absl::CancelledError(absl::StrCat(what, ": shut down"));
    }
    if (rc > 0 && fds[0].revents != 0) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// TcpConnection
// ---------------------------------------------------------------------------

TcpConnection::TcpConnection(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}

TcpConnection::~TcpConnection() {
  if (fd_ >= 0) close(fd_);
}

int TcpConnection::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

absl::StatusOr<std::unique_ptr<TcpConnection>> TcpConnection::Connect(const std::string& host,
                                                                      uint16_t port,
                                                                      absl::Time deadline) {
  ASSIGN_OR_RETURN(addrinfo * addresses, Resolve(host, port, false));
  absl::Status last =
      absl::UnavailableError(absl::StrCat("connect to ", host, ":", port, ": no address"));
  for (addrinfo* ai = addresses; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = ErrnoStatus(errno, "socket");
      continue;
    }
    const std::string peer = FormatAddress(ai->ai_addr);
    absl::Status status = SetNonBlocking(fd);
    if (status.ok() && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno == EINPROGRESS) {
        status = WaitFor(fd, POLLOUT, deadline, -1, absl::StrCat("connect to ", peer));
        if (status.ok()) {
          int error = 0;
          socklen_t len = sizeof(error);
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
          if (error != 0) {
            status = ErrnoStatus(error, absl::StrCat("connect to ", peer));
          }
        }
      } else {
        status = ErrnoStatus(errno, absl::StrCat("connect to ", peer));
      }
    }
    if (status.ok()) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      freeaddrinfo(addresses);
      return std::make_unique<TcpConnection>(fd, peer);
    }
    close(fd);
    last = status;
  }
  freeaddrinfo(addresses);
  return last;
}

absl::Status TcpConnection::WriteAll(const char* data, size_t n, absl::Time deadline) {
  while (n > 0) {
    const ssize_t sent = send(fd_, data, n, MSG_NOSIGNAL);
    if (sent > 0) {
      data += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RETURN_IF_ERROR(WaitFor(fd_, POLLOUT, deadline, -1, absl::StrCat("send to ", peer_)));
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat("send to ", peer_, ": ", std::strerror(sent < 0 ? errno : EPIPE)));
  }
  return absl::OkStatus();
}

absl::Status TcpConnection::ReadAll(char* data, size_t n, absl::Time deadline, int cancel_fd) {
  while (n > 0) {
    const ssize_t got = recv(fd_, data, n, 0);
    if (got > 0) {
      data += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) {
      return absl::UnavailableError(
          absl::StrCat("receive from ", peer_, ": peer closed the connection"));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RETURN_IF_ERROR(
          WaitFor(fd_, POLLIN, deadline, cancel_fd, absl::StrCat("receive from ", peer_)));
      continue;
    }
    return absl::UnavailableError(absl::StrCat("receive from ", peer_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status TcpConnection::SendFrame(absl::string_view data, absl::Time deadline) {
  if (data.size() > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame of ", data.size(), " bytes is too large"));
  }
  const uint32_t length = htonl(static_cast<uint32_t>(data.size()));
  std::string frame(kFrameHeaderBytes + data.size(), '\0');
  std::memcpy(frame.data(), &length, kFrameHeaderBytes);
  std::memcpy(frame.data() + kFrameHeaderBytes, data.data(), data.size());
  return WriteAll(frame.data(), frame.size(), deadline);
}

absl::StatusOr<std::string> TcpConnection::ReceiveFrame(size_t max_bytes, absl::Time deadline,
                                                        int cancel_fd) {
  uint32_t length = 0;
  RETURN_IF_ERROR(
      ReadAll(reinterpret_cast<char*>(&length), kFrameHeaderBytes, deadline, cancel_fd));
  length = ntohl(length);
  if (length > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("frame from ", peer_, " announces ", length,
                                                   " bytes, more than the limit of ", max_bytes));
  }
  std::string data(length, '\0');
  RETURN_IF_ERROR(ReadAll(data.data(), length, deadline, cancel_fd));
  return data;
}

// ---------------------------------------------------------------------------
// TcpListenSocket
// ---------------------------------------------------------------------------

TcpListenSocket::TcpListenSocket(int fd, int event_fd, std::string host, uint16_t port)
    : fd_(fd), event_fd_(event_fd), host_(std::move(host)), port_(port) {}

TcpListenSocket::~TcpListenSocket() {
  close(fd_);
  close(event_fd_);
}

absl::StatusOr<std::unique_ptr<TcpListenSocket>> TcpListenSocket::Listen(const std::string& host,
                                                                         uint16_t port) {
  ASSIGN_OR_RETURN(addrinfo * addresses, Resolve(host, port, true));
  absl::Status last =
      absl::InvalidArgumentError(absl::StrCat("listen on ", host, ":", port, ": no address"));
  for (addrinfo* ai = addresses; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = ErrnoStatus(errno, "socket");
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const std::string where = absl::StrCat("listen on ", host, ":", port);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      last = ErrnoStatus(errno, absl::StrCat(where, ": bind"));
      close(fd);
      continue;
    }
    if (listen(fd, kListenBacklog) != 0) {
      last = ErrnoStatus(errno, absl::StrCat(where, ": listen"));
      close(fd);
      continue;
    }
    absl::Status status = SetNonBlocking(fd);
    sockaddr_storage bound;
    socklen_t len = sizeof(bound);
    if (status.ok() && getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      status = ErrnoStatus(errno, absl::StrCat(where, ": getsockname"));
    }
    const int event_fd = status.ok() ? eventfd(0, EFD_CLOEXEC) : -1;
    if (status.ok() && event_fd < 0) {
      status = ErrnoStatus(errno, "eventfd");
    }
    if (!status.ok()) {
      close(fd);
      last = status;
      continue;
    }
    const uint16_t bound_port = bound.ss_family == AF_INET6
                                    ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    freeaddrinfo(addresses);
    return std::unique_ptr<TcpListenSocket>(new TcpListenSocket(fd, event_fd, host, bound_port));
  }
  freeaddrinfo(addresses);
  return last;
}

absl::StatusOr<std::unique_ptr<TcpConnection>> TcpListenSocket::Accept(absl::Time deadline) {
  const std::string what = absl::StrCat("accept on ", host_, ":", port_);
  for (;;) {
    if (is_shutdown()) return absl::CancelledError(what + ": shut down");
    sockaddr_storage addr;
    socklen_t len = sizeof(addr);
    const int fd =
        accept4(fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return std::make_unique<TcpConnection>(fd, FormatAddress(reinterpret_cast<sockaddr*>(&addr)));
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return ErrnoStatus(errno, what);
    }
    RETURN_IF_ERROR(WaitFor(fd_, POLLIN, deadline, event_fd_, what));
  }
}

void TcpListenSocket::Shutdown() {
  const uint64_t one = 1;
  // An eventfd write of 1 only fails if the counter would overflow, which
  // a handful of Shutdown() calls cannot do.
  if (write(event_fd_, &one, sizeof(one)) != sizeof(one)) {
    PLOG(WARNING) << "TcpListenSocket::Shutdown: eventfd write";
  }
}

bool TcpListenSocket::is_shutdown() const {
  pollfd fd = {event_fd_, POLLIN, 0};
  return poll(&fd, 1, 0) > 0 && (fd.revents & POLLIN);
}

}  // namespace dreplay::verbs
