// Copyright dreplay authors.

#include "common/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
// microhttpd.h needs the socket types above.
#include <microhttpd.h>

namespace dreplay {
namespace {

// libmicrohttpd 0.9.71 turned the callbacks' int into enum MHD_Result.
#if MHD_VERSION >= 0x00097002
using MhdResult = enum MHD_Result;
#else
using MhdResult = int;
#endif

constexpr unsigned kHttpOk = 200;
constexpr unsigned kHttpNotFound = 404;
constexpr unsigned kHttpMethodNotAllowed = 405;

// An address to bind: IPv4 or IPv6, the port in network order.
struct ListenAddress {
  sockaddr_storage storage{};
  bool ipv6 = false;
};

// The host without the brackets of an IPv6 literal.
std::string Unbracketed(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

absl::StatusOr<ListenAddress> ParseListenAddress(const std::string& host, uint16_t port) {
  const std::string literal = Unbracketed(host);
  ListenAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  if (inet_pton(AF_INET, literal.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    return a;
  }
  a.storage = sockaddr_storage{};
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET6, literal.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.ipv6 = true;
    return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("metrics host=\"", host,
                   "\" is not an IP address (e.g. 127.0.0.1, 0.0.0.0, [::1]); names are not "
                   "resolved"));
}

}  // namespace

absl::Status MetricsHttpOptions::Validate() const {
  if (absl::Status s = ParseListenAddress(host, port).status(); !s.ok()) return s;
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics path=\"", path, "\" must start with '/'"));
  }
  if (content_type.empty()) {
    return absl::InvalidArgumentError("metrics content_type must not be empty");
  }
  if (max_connections == 0) {
    return absl::InvalidArgumentError("metrics max_connections=0 must be >= 1");
  }
  if (idle_timeout < absl::Seconds(1) || idle_timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics idle_timeout=", absl::FormatDuration(idle_timeout), " must be finite and >= 1s"));
  }
  return absl::OkStatus();
}

// libmicrohttpd calls these on its thread (and Log on Start's too).
struct MetricsHttpServer::Callbacks {
  static MhdResult Access(void* cls, MHD_Connection* connection, const char* url,
                          const char* method, const char* version, const char* upload_data,
                          size_t* upload_data_size, void** request_state) {
    auto* self = static_cast<MetricsHttpServer*>(cls);
    // The first call of a request brings its headers only; answer on the
    // next one, after any body has been read (and dropped).
    static int seen_headers;
    if (*request_state == nullptr) {
      *request_state = &seen_headers;
      return MHD_YES;
    }
    if (*upload_data_size != 0) {
      *upload_data_size = 0;
      return MHD_YES;
    }
    unsigned status = kHttpOk;
    std::string body;
    const char* content_type = "text/plain; charset=utf-8";
    const bool get = std::strcmp(method, "GET") == 0 || std::strcmp(method, "HEAD") == 0;
    if (!get) {
      status = kHttpMethodNotAllowed;
      body = "only GET and HEAD\n";
    } else if (self->options_.path != url) {
      status = kHttpNotFound;
      body = absl::StrCat("not found; the metrics are at ", self->options_.path, "\n");
    } else {
      body = self->render_();
      content_type = self->options_.content_type.c_str();
      self->scrapes_.fetch_add(1, std::memory_order_relaxed);
    }
    MHD_Response* response = MHD_create_response_from_buffer(
        body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (status == kHttpMethodNotAllowed) {
      MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    }
    const MhdResult queued = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return queued;
  }

  static void Log(void* cls, const char* format, va_list args) {
    char message[512];
    std::vsnprintf(message, sizeof(message), format, args);
    std::string text(message);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    LOG(WARNING) << "metrics http: " << text;
    auto* self = static_cast<MetricsHttpServer*>(cls);
    MutexLock lock(&self->log_mu_);
    self->last_log_ = std::move(text);
  }
};

MetricsHttpServer::MetricsHttpServer(const MetricsHttpOptions& options, Render render)
    : options_(options), render_(std::move(render)) {}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const MetricsHttpOptions& options, Render render) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (!render) return absl::InvalidArgumentError("metrics render callback is empty");
  absl::StatusOr<ListenAddress> address = ParseListenAddress(options.host, options.port);
  if (!address.ok()) return address.status();
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(options, std::move(render)));
  const std::string host = Unbracketed(options.host);
  server->bracketed_host_ = address->ipv6 ? absl::StrCat("[", host, "]") : host;

  // One internal thread; MHD_USE_AUTO picks epoll on Linux, which, unlike
  // select, takes descriptors of any number (the server may hold many).
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
  if (address->ipv6) flags |= MHD_USE_IPv6;
  errno = 0;
  void* const self = server.get();
  const unsigned int idle_timeout_s =
      static_cast<unsigned int>(absl::ToInt64Seconds(options.idle_timeout));
  // The logger comes first, so that libmicrohttpd reports everything through it.
  MHD_Daemon* daemon = MHD_start_daemon(
      flags, options.port, /*apc=*/nullptr, /*apc_cls=*/nullptr, &Callbacks::Access, self,
      MHD_OPTION_EXTERNAL_LOGGER, &Callbacks::Log, self,  // (option, function, its argument)
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&address->storage),
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned int>(options.max_connections),
      MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout_s, MHD_OPTION_END);
  const int start_errno = errno;
  if (daemon == nullptr) {
    std::string why;
    {
      MutexLock lock(&server->log_mu_);
      why = server->last_log_;
    }
    if (why.empty()) why = start_errno != 0 ? std::strerror(start_errno) : "libmicrohttpd failed";
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", server->bracketed_host_,
                                               ":", options.port, ": ", why));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_LISTEN_FD);
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof(bound);
  if (info == nullptr ||
      getsockname(info->listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_length) != 0) {
    MHD_stop_daemon(daemon);
    return absl::InternalError("cannot read the metrics listener's port");
  }
  server->port_ =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  {
    MutexLock lock(&server->mu_);
    server->daemon_ = daemon;
  }
  return server;
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  MutexLock lock(&mu_);
  if (daemon_ == nullptr) return;
  MHD_stop_daemon(daemon_);  // joins libmicrohttpd's thread
  daemon_ = nullptr;
}

std::string MetricsHttpServer::address() const { return absl::StrCat(bracketed_host_, ":", port_); }

std::string MetricsHttpServer::url() const {
  return absl::StrCat("http://", address(), options_.path);
}

}  // namespace dreplay
