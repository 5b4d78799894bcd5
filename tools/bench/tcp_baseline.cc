// Copyright dreplay authors.

#include "tools/bench/tcp_baseline.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "tools/bench/host_cpu.h"

namespace dreplay::tools {
namespace {

// Size of the sink's recv() buffer.
constexpr size_t kReceiveChunk = size_t{1} << 20;

absl::Status SocketError(const char* call) {
  return absl::ErrnoToStatus(errno, absl::StrCat("TCP baseline: ", call));
}

absl::StatusOr<sockaddr_in> Ipv4Address(const std::string& host, uint16_t port) {
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TCP baseline: host '", host, "' is not an IPv4 address"));
  }
  return addr;
}

absl::Status CheckStream(uint64_t message_bytes, absl::Duration duration) {
  if (message_bytes == 0) {
    return absl::InvalidArgumentError("TCP baseline: message_bytes=0 must be > 0");
  }
  if (duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TCP baseline: duration=", absl::FormatDuration(duration), " must be > 0"));
  }
  return absl::OkStatus();
}

// Reads until EOF; the bytes read, or -1 with errno set.
int64_t CountUntilEof(int fd) {
  std::vector<char> chunk(kReceiveChunk);
  int64_t received = 0;
  for (;;) {
    const ssize_t n = recv(fd, chunk.data(), chunk.size(), 0);
    if (n > 0) {
      received += n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 ? -1 : received;
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStreamSink>> TcpStreamSink::Start(const std::string& host,
                                                                    uint16_t port) {
  ASSIGN_OR_RETURN(sockaddr_in addr, Ipv4Address(host, port));
  UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) return SocketError("socket");
  const int one = 1;
  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return SocketError("bind");
  }
  if (listen(listener.get(), 4) != 0) return SocketError("listen");
  socklen_t len = sizeof(addr);
  if (getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return SocketError("getsockname");
  }
  return std::unique_ptr<TcpStreamSink>(
      new TcpStreamSink(std::move(listener), ntohs(addr.sin_port)));
}

TcpStreamSink::TcpStreamSink(UniqueFd listener, uint16_t port)
    : listener_(std::move(listener)), port_(port) {
  thread_ = std::thread([this] { Serve(); });
}

TcpStreamSink::~TcpStreamSink() {
  // Wakes accept(), which then fails.
  shutdown(listener_.get(), SHUT_RDWR);
  thread_.join();
}

void TcpStreamSink::Serve() {
  for (;;) {
    UniqueFd conn(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.get() < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    const int64_t received = CountUntilEof(conn.get());
    if (received < 0) {
      LOG(WARNING) << "TCP baseline sink: recv: " << strerror(errno);
      continue;
    }
    const uint64_t count = static_cast<uint64_t>(received);
    if (send(conn.get(), &count, sizeof(count), MSG_NOSIGNAL) != sizeof(count)) {
      LOG(WARNING) << "TCP baseline sink: could not answer: " << strerror(errno);
    }
  }
}

absl::StatusOr<TcpStreamResult> RunTcpStream(const std::string& host, uint16_t port,
                                             uint64_t message_bytes, absl::Duration duration) {
  RETURN_IF_ERROR(CheckStream(message_bytes, duration));
  ASSIGN_OR_RETURN(const sockaddr_in addr, Ipv4Address(host, port));
  UniqueFd conn(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (conn.get() < 0) return SocketError("socket");
  if (connect(conn.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return SocketError("connect");
  }
  const std::vector<char> message(message_bytes, 'm');
  const absl::StatusOr<double> cpu_from = HostBusyCpuSeconds();
  const absl::Time start = absl::Now();
  const absl::Time end = start + duration;
  while (absl::Now() < end) {
    for (size_t sent = 0; sent < message_bytes;) {
      const ssize_t n = send(conn.get(), message.data() + sent, message_bytes - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return SocketError("send");
      sent += static_cast<size_t>(n);
    }
  }
  if (shutdown(conn.get(), SHUT_WR) != 0) return SocketError("shutdown");
  uint64_t count = 0;
  size_t got = 0;
  while (got < sizeof(count)) {
    const ssize_t n =
        recv(conn.get(), reinterpret_cast<char*>(&count) + got, sizeof(count) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SocketError("recv of the sink's count");
    if (n == 0) {
      return absl::UnavailableError("TCP baseline: the sink closed without its count");
    }
    got += static_cast<size_t>(n);
  }
  const absl::Time answered = absl::Now();
  const absl::StatusOr<double> cpu_to = HostBusyCpuSeconds();

  TcpStreamResult r;
  r.message_bytes = message_bytes;
  r.bytes = count;
  r.seconds = absl::ToDoubleSeconds(answered - start);
  if (cpu_from.ok() && cpu_to.ok()) r.host_cpu_s = *cpu_to - *cpu_from;
  if (r.seconds > 0) {
    r.messages_per_s = static_cast<double>(count) / message_bytes / r.seconds;
    r.gbps = static_cast<double>(count) * 8 / r.seconds / 1e9;
  }
  return r;
}

absl::StatusOr<TcpStreamResult> RunLoopbackTcpStream(uint64_t message_bytes,
                                                     absl::Duration duration) {
  RETURN_IF_ERROR(CheckStream(message_bytes, duration));
  ASSIGN_OR_RETURN(const std::unique_ptr<TcpStreamSink> sink, TcpStreamSink::Start("127.0.0.1", 0));
  return RunTcpStream("127.0.0.1", sink->port(), message_bytes, duration);
}

}  // namespace dreplay::tools
