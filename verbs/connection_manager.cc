// Copyright dreplay authors.

#include "verbs/connection_manager.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/peer_address.h"
#include "common/retry_tag.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::verbs {
namespace {

// Bytes read from one peer per recv().
constexpr size_t kReadChunk = 4096;

int PollTimeoutMs(absl::Time until) {
  if (until == absl::InfiniteFuture()) return -1;
  const absl::Duration left = until - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), INT_MAX));
}

absl::Status Positive(const char* field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("ConnectionManagerOptions.", field, " must be positive, got ", value));
}

}  // namespace

absl::Status ConnectionManagerOptions::Validate() const {
  if (hello_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConnectionManagerOptions.hello_timeout must be positive, got ",
                     absl::FormatDuration(hello_timeout)));
  }
  RETURN_IF_ERROR(Positive("max_half_open", max_half_open));
  RETURN_IF_ERROR(Positive("max_half_open_per_source", max_half_open_per_source));
  RETURN_IF_ERROR(Positive("max_waiting", max_waiting));
  RETURN_IF_ERROR(Positive("max_hello_bytes", max_hello_bytes));
  if (max_half_open_per_source > max_half_open) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConnectionManagerOptions.max_half_open_per_source ", max_half_open_per_source,
                     " exceeds max_half_open ", max_half_open));
  }
  return absl::OkStatus();
}

struct ConnectionManager::HalfOpen {
  std::unique_ptr<TcpConnection> connection;
  std::string source;
  absl::Time deadline;
  std::string preamble_bytes;  // up to kPreambleBytes
  bool have_preamble = false;
  uint32_t body_length = 0;
  std::string body;  // grows as bytes arrive
};

ConnectionManager::ConnectionManager(std::unique_ptr<TcpListenSocket> socket,
                                     ConnectionManagerOptions options)
    : socket_(std::move(socket)), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<ConnectionManager>> ConnectionManager::Start(
    const std::string& host, uint16_t port, ConnectionManagerOptions options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<TcpListenSocket> socket, TcpListenSocket::Listen(host, port));
  std::unique_ptr<ConnectionManager> manager(
      new ConnectionManager(std::move(socket), std::move(options)));
  manager->thread_ = std::thread([m = manager.get()] { m->Run(); });
  return manager;
}

ConnectionManager::~ConnectionManager() {
  Shutdown();
  if (thread_.joinable()) thread_.join();
}

void ConnectionManager::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  ready_cv_.SignalAll();
  socket_->Shutdown();  // wakes the thread
}

ConnectionManagerCounters ConnectionManager::counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

absl::StatusOr<CompletedHello> ConnectionManager::Accept(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  for (;;) {
    if (shutdown_) {
      return absl::CancelledError(absl::StrCat("listener ", host(), ":", port(), " was shut down"));
    }
    if (!waiting_.empty()) {
      CompletedHello hello = std::move(waiting_.front());
      waiting_.pop_front();
      return hello;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("no connection on ", host(), ":", port(),
                                                      " within ", absl::FormatDuration(timeout)));
    }
    ready_cv_.WaitWithTimeout(&mu_, left);
  }
}

void ConnectionManager::Run() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({socket_->fd(), POLLIN, 0});
    fds.push_back({socket_->cancel_fd(), POLLIN, 0});
    absl::Time next_deadline = absl::InfiniteFuture();
    for (const auto& h : half_open_) {
      fds.push_back({h->connection->fd(), POLLIN, 0});
      next_deadline = std::min(next_deadline, h->deadline);
    }
    const int rc = poll(fds.data(), fds.size(), PollTimeoutMs(next_deadline));
    if (rc < 0 && errno != EINTR) {
      PLOG(ERROR) << "listener " << host() << ":" << port() << ": poll";
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    if (rc > 0 && fds[1].revents != 0) break;  // Shutdown()
    // Peers already in setup first: what they sent, then their deadlines.
    std::vector<std::unique_ptr<HalfOpen>> keep;
    keep.reserve(half_open_.size());
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < half_open_.size(); ++i) {
      std::unique_ptr<HalfOpen>& h = half_open_[i];
      if (rc > 0 && fds[i + 2].revents != 0 && !ReadHello(h.get())) continue;
      if (h->deadline <= now) {
        VLOG(1) << "listener " << host() << ":" << port() << ": closing " << h->connection->peer()
                << ": no complete hello within " << absl::FormatDuration(options_.hello_timeout);
        MutexLock lock(&mu_);
        ++counters_.timed_out;
        continue;
      }
      keep.push_back(std::move(h));
    }
    half_open_.assign(std::make_move_iterator(keep.begin()), std::make_move_iterator(keep.end()));
    if (rc > 0 && fds[0].revents != 0) AcceptNew();
    MutexLock lock(&mu_);
    counters_.half_open = static_cast<int>(half_open_.size());
  }
  half_open_.clear();
  MutexLock lock(&mu_);
  counters_.half_open = 0;
}

void ConnectionManager::AcceptNew() {
  for (;;) {
    absl::StatusOr<std::unique_ptr<TcpConnection>> connection =
        socket_->Accept(absl::InfinitePast());
    if (!connection.ok()) {
      if (!absl::IsDeadlineExceeded(connection.status()) &&
          !absl::IsCancelled(connection.status())) {
        // E.g. out of descriptors: the half-open peers' deadlines free some.
        LOG_EVERY_N(WARNING, 100) << "listener " << host() << ":" << port() << ": "
                                  << connection.status();
      }
      return;
    }
    Admit(std::move(*connection));
  }
}

void ConnectionManager::Admit(std::unique_ptr<TcpConnection> connection) {
  auto h = std::make_unique<HalfOpen>();
  h->source = SourceOf(connection->peer());
  h->deadline = absl::Now() + options_.hello_timeout;
  h->connection = std::move(connection);
  const auto from_source = std::count_if(half_open_.begin(), half_open_.end(),
                                         [&](const auto& o) { return o->source == h->source; });
  if (from_source >= options_.max_half_open_per_source) {
    EvictOldestOf(h->source, &ConnectionManagerCounters::evicted_source,
                  "its source's bound on connections in setup");
  }
  if (half_open_.size() >= static_cast<size_t>(options_.max_half_open)) {
    std::map<std::string, int> per_source;
    std::string largest;
    int most = 0;
    for (const auto& o : half_open_) {
      const int n = ++per_source[o->source];
      if (n > most) {
        most = n;
        largest = o->source;
      }
    }
    EvictOldestOf(largest, &ConnectionManagerCounters::evicted_total,
                  "the bound on connections in setup, from the source holding the most");
  }
  half_open_.push_back(std::move(h));
  MutexLock lock(&mu_);
  ++counters_.accepted;
}

void ConnectionManager::EvictOldestOf(const std::string& source,
                                      uint64_t ConnectionManagerCounters::*counter,
                                      const char* why) {
  for (auto it = half_open_.begin(); it != half_open_.end(); ++it) {
    if ((*it)->source != source) continue;
    LOG_EVERY_N(WARNING, 100) << "listener " << host() << ":" << port() << ": closing "
                              << (*it)->connection->peer() << ", still in setup, by " << why
                              << " (1 in 100 logged)";
    half_open_.erase(it);
    MutexLock lock(&mu_);
    ++(counters_.*counter);
    return;
  }
}

bool ConnectionManager::ReadHello(HalfOpen* h) {
  char buffer[kReadChunk];
  for (;;) {
    size_t want;
    if (!h->have_preamble) {
      want = kPreambleBytes - h->preamble_bytes.size();
    } else if (h->body.size() < h->body_length) {
      want = std::min<size_t>(h->body_length - h->body.size(), sizeof(buffer));
    } else {
      return Finish(h);
    }
    const ssize_t got = recv(h->connection->fd(), buffer, want, MSG_DONTWAIT);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (got <= 0) {
      VLOG(1) << "listener " << host() << ":" << port() << ": " << h->connection->peer()
              << (got == 0 ? " closed" : " failed") << " during setup";
      MutexLock lock(&mu_);
      ++counters_.closed_by_peer;
      return false;
    }
    if (h->have_preamble) {
      h->body.append(buffer, static_cast<size_t>(got));
      continue;
    }
    h->preamble_bytes.append(buffer, static_cast<size_t>(got));
    if (h->preamble_bytes.size() < kPreambleBytes) continue;
    absl::StatusOr<Preamble> p = DecodePreamble(h->preamble_bytes, h->connection->peer());
    if (!p.ok()) {
      Refuse(h, std::string(p.status().message()));
      return false;
    }
    if (p->kind != PreambleKind::kHello) {
      Refuse(h, "the first message of a connection must be a hello");
      return false;
    }
    if (p->provider != options_.provider) {
      Refuse(h, ProviderMismatchMessage(absl::StrCat(host(), ":", port()), options_.provider,
                                        p->provider));
      return false;
    }
    if (p->body_length > options_.max_hello_bytes) {
      Refuse(h, absl::StrCat("a hello of ", p->body_length, " bytes exceeds the limit of ",
                             options_.max_hello_bytes));
      return false;
    }
    h->have_preamble = true;
    h->body_length = p->body_length;
  }
}

bool ConnectionManager::Finish(HalfOpen* h) {
  if (options_.check_hello) {
    const absl::Status valid = options_.check_hello(h->body);
    if (!valid.ok()) {
      Refuse(h, std::string(valid.message()));
      return false;
    }
  }
  {
    MutexLock lock(&mu_);
    if (waiting_.size() < static_cast<size_t>(options_.max_waiting)) {
      waiting_.push_back(CompletedHello{std::move(h->connection), std::move(h->body)});
      ++counters_.completed;
      ready_cv_.Signal();
      return false;
    }
  }
  Refuse(h, absl::StrCat(kRetryLaterTag, "the listener has ", options_.max_waiting,
                         " connections waiting to be answered; try again"));
  return false;
}

void ConnectionManager::Refuse(HalfOpen* h, const std::string& why) {
  {
    MutexLock lock(&mu_);
    ++counters_.refused;
  }
  LOG_EVERY_N(WARNING, 10) << "listener " << host() << ":" << port() << ": refusing "
                           << h->connection->peer() << ": " << why << " (1 in 10 logged)";
  const std::string reason = why.substr(0, kMaxRejectReasonBytes);
  Preamble p;
  p.kind = PreambleKind::kReject;
  p.provider = options_.provider;
  p.body_length = static_cast<uint32_t>(reason.size());
  const std::string message = EncodePreamble(p) + reason;
  // A fresh socket's buffer takes this at once; never wait for a peer here.
  const ssize_t sent =
      send(h->connection->fd(), message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)sent;
  shutdown(h->connection->fd(), SHUT_WR);
}

}  // namespace dreplay::verbs
