// Copyright dreplay authors.
//
// metrics_http.h: an HTTP endpoint that serves a text rendered on demand,
// for Prometheus to scrape (GET /metrics), on GNU libmicrohttpd.
//
//   MetricsHttpOptions options;
//   options.host = "127.0.0.1";
//   options.port = 9464;  // 0: the OS picks one, see port()
//   ASSIGN_OR_RETURN(auto http, MetricsHttpServer::Start(options, [&server] {
//     return RenderServerMetrics(CollectServerMetrics(*server));
//   }));
//   LOG(INFO) << "metrics on " << http->url();
//   ...
//   http->Stop();  // or let the destructor do it
//
// A GET (or HEAD) of options.path is answered 200 with the text `render`
// returns and options.content_type (the Prometheus text format by
// default); any other path 404, any other method 405. The request line,
// headers and connections are libmicrohttpd's: dreplay parses no HTTP.
//
// Threads: libmicrohttpd's one internal polling thread, owned by the
// server: started by Start(), joined by Stop() and the destructor. `render`
// runs on it, one request at a time, so it must be safe to call from that
// thread while the rest of the program runs, and quick (a scrape waits for
// it; so do other scrapes).
//
// Thread safety: Stop() and the accessors may be called from any thread
// (but not from `render`).

#ifndef DREPLAY_COMMON_METRICS_HTTP_H_
#define DREPLAY_COMMON_METRICS_HTTP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"

struct MHD_Daemon;

namespace dreplay {

struct MetricsHttpOptions {
  // An IP address literal to listen on: IPv4 ("127.0.0.1"; "0.0.0.0" for
  // every interface) or IPv6, with or without brackets ("[::1]", "::").
  // Names are not resolved. The default serves local scrapers only.
  std::string host = "127.0.0.1";
  // 0: the OS picks a free port (see MetricsHttpServer::port()).
  uint16_t port = 0;
  // The one path served; starts with '/'.
  std::string path = "/metrics";
  // Content-Type of the answer; not empty.
  std::string content_type = "text/plain; version=0.0.4; charset=utf-8";
  // Connections held at once; more wait in the kernel's backlog. >= 1.
  uint32_t max_connections = 16;
  // An idle connection is closed after this long; whole seconds, >= 1 s
  // (libmicrohttpd's resolution).
  absl::Duration idle_timeout = absl::Seconds(10);

  // OK, or InvalidArgument naming the bad field and value.
  absl::Status Validate() const;
};

class MetricsHttpServer {
 public:
  // What a GET of the path answers. Runs on the server's thread.
  using Render = std::function<std::string()>;

  // Validates the options, binds host:port and starts serving. Errors:
  // InvalidArgument (options), Unavailable (the address cannot be bound:
  // in use, not local; named with the reason).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const MetricsHttpOptions& options,
                                                                  Render render);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Stops listening, closes the connections and joins the server's thread
  // (waiting for a render in progress). Idempotent.
  void Stop();

  // The bound port (the OS's choice when options.port was 0).
  uint16_t port() const { return port_; }
  // "host:port", IPv6 hosts in brackets.
  std::string address() const;
  // "http://host:port/path".
  std::string url() const;
  // GETs of the path answered so far.
  uint64_t scrapes() const { return scrapes_.load(std::memory_order_relaxed); }

 private:
  struct Callbacks;  // libmicrohttpd's callbacks (metrics_http.cc)

  MetricsHttpServer(const MetricsHttpOptions& options, Render render);

  // Constant after Start.
  const MetricsHttpOptions options_;
  const Render render_;
  std::string bracketed_host_;  // the host, IPv6 in brackets
  uint16_t port_ = 0;

  std::atomic<uint64_t> scrapes_{0};

  Mutex mu_;
  MHD_Daemon* daemon_ ABSL_GUARDED_BY(mu_) = nullptr;

  // libmicrohttpd's last message (also logged), for Start's error.
  Mutex log_mu_;
  std::string last_log_ ABSL_GUARDED_BY(log_mu_);
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_METRICS_HTTP_H_
