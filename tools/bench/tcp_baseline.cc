// Copyright dreplay authors.

#include "tools/bench/tcp_baseline.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/unique_fd.h"

namespace dreplay::tools {
namespace {

// Size of the receiver's recv() buffer.
constexpr size_t kReceiveChunk = size_t{1} << 20;

absl::Status SocketError(const char* call) {
  return absl::ErrnoToStatus(errno, absl::StrCat("TCP baseline: ", call));
}

}  // namespace

absl::StatusOr<TcpStreamResult> RunLoopbackTcpStream(uint64_t message_bytes,
                                                     absl::Duration duration) {
  if (message_bytes == 0) {
    return absl::InvalidArgumentError("TCP baseline: message_bytes=0 must be > 0");
  }
  if (duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TCP baseline: duration=", absl::FormatDuration(duration), " must be > 0"));
  }
  UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) return SocketError("socket");
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t addr_len = sizeof(addr);
  if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return SocketError("bind");
  }
  if (listen(listener.get(), 1) != 0) return SocketError("listen");
  if (getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) {
    return SocketError("getsockname");
  }

  // The receiver: accept one connection, count bytes until EOF.
  uint64_t received = 0;
  absl::Time last_byte;
  absl::Status receiver_status;
  std::thread receiver([&] {
    UniqueFd conn(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.get() < 0) {
      receiver_status = SocketError("accept");
      return;
    }
    std::vector<char> chunk(kReceiveChunk);
    for (;;) {
      const ssize_t n = recv(conn.get(), chunk.data(), chunk.size(), 0);
      if (n > 0) {
        received += static_cast<uint64_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        if (n < 0) receiver_status = SocketError("recv");
        break;
      }
    }
    last_byte = absl::Now();
  });

  absl::Status sender_status;
  absl::Time start;
  {
    UniqueFd conn(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (conn.get() < 0) {
      sender_status = SocketError("socket");
    } else if (connect(conn.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      sender_status = SocketError("connect");
    } else {
      const std::vector<char> message(message_bytes, 'm');
      start = absl::Now();
      const absl::Time end = start + duration;
      while (sender_status.ok() && absl::Now() < end) {
        for (size_t sent = 0; sent < message_bytes;) {
          const ssize_t n =
              send(conn.get(), message.data() + sent, message_bytes - sent, MSG_NOSIGNAL);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) {
            sender_status = SocketError("send");
            break;
          }
          sent += static_cast<size_t>(n);
        }
      }
      shutdown(conn.get(), SHUT_WR);
    }
    // Without a connection the receiver is still in accept(): wake it.
    if (!sender_status.ok()) shutdown(listener.get(), SHUT_RDWR);
    receiver.join();  // EOF arrives when `conn` is half-closed or closed
  }
  if (!sender_status.ok()) return sender_status;
  if (!receiver_status.ok()) return receiver_status;

  TcpStreamResult r;
  r.message_bytes = message_bytes;
  r.bytes = received;
  r.seconds = absl::ToDoubleSeconds(last_byte - start);
  if (r.seconds > 0) {
    r.messages_per_s = static_cast<double>(received) / message_bytes / r.seconds;
    r.gbps = static_cast<double>(received) * 8 / r.seconds / 1e9;
  }
  return r;
}

}  // namespace dreplay::tools
