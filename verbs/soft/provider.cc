// Copyright dreplay authors.

#include "verbs/soft/provider.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "verbs/access_rules.h"
#include "verbs/soft/channel.h"
#include "verbs/soft/link.h"
#include "verbs/soft/link_table.h"
#include "verbs/soft/nic.h"
#include "verbs/soft/region_table.h"
#include "verbs/soft/socket.h"
#include "verbs/soft/wire.h"

namespace dreplay::verbs {
namespace soft {
namespace {

// A connecting peer must deliver its whole hello within this time.
constexpr absl::Duration kSetupTimeout = absl::Seconds(5);
// Connections still in setup beyond this number push out the oldest.
constexpr size_t kMaxHalfOpen = 64;
// How long a rejection waits to be sent.
constexpr absl::Duration kRejectSendTimeout = absl::Seconds(1);
// The accepting side's jitter generator is seeded with the connector's seed
// XOR this, so the two directions do not draw the same jitter.
constexpr uint64_t kAcceptorSeedSalt = 0x9e3779b97f4a7c15ULL;
// ibv_qp_attr::max_rd_atomic is a uint8_t.
constexpr uint32_t kMaxRdAtomicOnWire = 255;

// What memory regions, listeners and queue pairs share with their provider.
struct Shared {
  std::shared_ptr<RegionTable> regions;
  std::shared_ptr<Nic> nic;
  std::shared_ptr<LinkTable> links;
  uint64_t host_id = 0;  // random, not 0
};

ChannelConfig MakeConfig(const Shared& shared, const QueuePairOptions& options, int max_rd_atomic,
                         const LinkModel& link, uint64_t peer_host, uint64_t link_seed,
                         std::string description) {
  ChannelConfig config;
  config.max_send_wr = options.max_send_wr;
  config.max_recv_wr = options.max_recv_wr;
  config.max_rd_atomic = max_rd_atomic;
  config.max_inline_data = options.max_inline_data;
  config.link = link;
  if (link.enabled()) config.link_out = shared.links->Get(peer_host, link, link_seed);
  config.faults = options.faults;
  config.description = std::move(description);
  return config;
}

class SoftMemoryRegion : public MemoryRegion {
 public:
  SoftMemoryRegion(Shared shared, void* addr, size_t length, uint32_t access, uint32_t key)
      : shared_(std::move(shared)), addr_(addr), length_(length), access_(access), key_(key) {}

  ~SoftMemoryRegion() override {
    shared_.regions->Remove(key_);
    for (const auto& channel : shared_.nic->Channels()) {
      channel->OnDeregister(this, static_cast<const char*>(addr_), length_);
    }
  }

  void* addr() const override { return addr_; }
  size_t length() const override { return length_; }
  uint32_t lkey() const override { return key_; }
  uint32_t rkey() const override { return key_; }
  uint32_t access() const override { return access_; }

 private:
  const Shared shared_;
  void* const addr_;
  const size_t length_;
  const uint32_t access_;
  const uint32_t key_;
};

class SoftQueuePair : public QueuePair {
 public:
  SoftQueuePair(std::shared_ptr<Nic> nic, std::shared_ptr<Channel> channel, uint64_t id)
      : nic_(std::move(nic)), channel_(std::move(channel)), id_(id) {}

  ~SoftQueuePair() override {
    nic_->Remove(id_);
    channel_->Detach();
  }

  absl::Status PostSend(absl::Span<const WorkRequest> wrs) override {
    const absl::Status status = channel_->PostSend(wrs);
    if (status.ok()) CountInitiated(wrs, &initiated_);
    return status;
  }
  absl::Status PostRecv(absl::Span<const RecvRequest> rrs) override {
    return channel_->PostRecv(rrs);
  }
  int Poll(absl::Span<Completion> out) override { return channel_->Poll(out); }
  absl::StatusOr<RemoteRegion> BindWindow(const MemoryRegion& mr, uint64_t offset, uint64_t length,
                                          uint32_t remote_access) override {
    return channel_->BindWindow(mr, offset, length, remote_access);
  }
  QpState state() const override { return channel_->state(); }
  absl::Status error() const override { return channel_->error(); }
  int max_send_wr() const override { return channel_->config().max_send_wr; }
  int max_rd_atomic() const override { return channel_->config().max_rd_atomic; }
  uint32_t max_inline_data() const override { return channel_->config().max_inline_data; }
  std::string Describe() const override { return channel_->config().description; }
  QueuePairTraffic traffic() const override {
    QueuePairTraffic t = channel_->peer_traffic();
    t += initiated_;
    return t;
  }

 private:
  const std::shared_ptr<Nic> nic_;
  const std::shared_ptr<Channel> channel_;
  const uint64_t id_;
  QueuePairTraffic initiated_;  // of the requests PostSend accepted
};

absl::StatusOr<std::unique_ptr<QueuePair>> MakeQueuePair(const Shared& shared, Fd fd,
                                                         const ChannelConfig& config) {
  auto channel = std::make_shared<Channel>(std::move(fd), config, shared.regions);
  ASSIGN_OR_RETURN(const uint64_t id, shared.nic->Add(channel));
  return std::unique_ptr<QueuePair>(new SoftQueuePair(shared.nic, std::move(channel), id));
}

std::string Describe(int fd) {
  return absl::StrCat("soft ", LocalAddress(fd), " <-> ", PeerAddress(fd));
}

class SoftPendingConnection : public PendingConnection {
 public:
  SoftPendingConnection(Shared shared, Fd fd, const HelloHeader& hello, std::string payload,
                        std::string peer)
      : shared_(std::move(shared)),
        fd_(std::move(fd)),
        hello_(hello),
        payload_(std::move(payload)),
        peer_(std::move(peer)) {}

  ~SoftPendingConnection() override {
    if (!answered_) Reject("the listener dropped the connection unanswered");
  }

  const std::string& payload() const override { return payload_; }
  std::string peer() const override { return peer_; }

  absl::StatusOr<std::unique_ptr<QueuePair>> Accept(const std::string& reply,
                                                    const QueuePairOptions& options) override {
    if (answered_) {
      return absl::FailedPreconditionError(
          absl::StrCat("connection from ", peer_, " was already answered"));
    }
    RETURN_IF_ERROR(options.Validate());
    if (reply.size() > kMaxSetupPayload) {
      return absl::InvalidArgumentError(
          absl::StrCat("reply payload of ", reply.size(), " bytes exceeds ", kMaxSetupPayload));
    }
    answered_ = true;
    ReplyHeader header = {};
    header.magic = kSetupMagic;
    header.version = kWireVersion;
    header.verdict = static_cast<uint8_t>(SetupVerdict::kAccept);
    header.max_rd_atomic = static_cast<uint32_t>(options.max_rd_atomic);
    header.payload_length = static_cast<uint32_t>(reply.size());
    header.host_id = shared_.host_id;
    std::string message(reinterpret_cast<const char*>(&header), sizeof(header));
    message += reply;
    absl::Status sent =
        SendAll(fd_.get(), message.data(), message.size(), absl::Now() + options.connect_timeout);
    if (!sent.ok()) {
      return absl::Status(sent.code(), absl::StrCat("accepting ", peer_, ": ", sent.message()));
    }
    LinkModel link;
    link.one_way_delay = absl::Nanoseconds(hello_.link_delay_ns);
    link.jitter = absl::Nanoseconds(hello_.link_jitter_ns);
    link.bandwidth_gbps = hello_.link_bandwidth_gbps;
    link.seed = hello_.link_seed;
    const int max_rd_atomic =
        std::min<int>(options.max_rd_atomic, static_cast<int>(hello_.max_rd_atomic));
    const std::string description = Describe(fd_.get());
    return MakeQueuePair(shared_, std::move(fd_),
                         MakeConfig(shared_, options, max_rd_atomic, link, hello_.host_id,
                                    hello_.link_seed ^ kAcceptorSeedSalt, description));
  }

  void Reject(const std::string& reason) override {
    if (answered_) return;
    answered_ = true;
    const std::string text = reason.substr(0, kMaxRejectReason);
    ReplyHeader header = {};
    header.magic = kSetupMagic;
    header.version = kWireVersion;
    header.verdict = static_cast<uint8_t>(SetupVerdict::kReject);
    header.payload_length = static_cast<uint32_t>(text.size());
    std::string message(reinterpret_cast<const char*>(&header), sizeof(header));
    message += text;
    absl::Status sent =
        SendAll(fd_.get(), message.data(), message.size(), absl::Now() + kRejectSendTimeout);
    if (!sent.ok()) {
      VLOG(1) << "rejecting " << peer_ << ": " << sent;
    }
    // Only our FIN follows: the peer reads the reason, then end of stream.
    shutdown(fd_.get(), SHUT_WR);
    fd_.Reset();
  }

 private:
  const Shared shared_;
  Fd fd_;
  const HelloHeader hello_;
  const std::string payload_;
  const std::string peer_;
  bool answered_ = false;
};

class SoftListener : public Listener {
 public:
  static absl::StatusOr<std::unique_ptr<Listener>> Create(const Shared& shared,
                                                          const std::string& host, uint16_t port) {
    uint16_t bound = 0;
    ASSIGN_OR_RETURN(Fd fd, ListenTcp(host, port, &bound));
    Fd wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!wake.valid()) {
      return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
    }
    return std::unique_ptr<Listener>(
        new SoftListener(shared, std::move(fd), std::move(wake), host, bound));
  }

  ~SoftListener() override { Shutdown(); }

  uint16_t port() const override { return port_; }
  std::string host() const override { return host_; }

  absl::StatusOr<std::unique_ptr<PendingConnection>> Accept(absl::Duration timeout) override {
    MutexLock lock(&accept_mu_);
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      if (shutdown_.load(std::memory_order_acquire)) {
        return absl::CancelledError(absl::StrCat("listener ", host_, ":", port_, " was shut down"));
      }
      const absl::Time now = absl::Now();
      DropExpired(now);
      if (now >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("no connection on ", host_, ":", port_,
                                                        " within ", absl::FormatDuration(timeout)));
      }
      absl::Time wake_at = deadline;
      std::vector<pollfd> fds = {{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
      for (const HalfOpen& h : half_open_) {
        fds.push_back({h.fd.get(), POLLIN, 0});
        wake_at = std::min(wake_at, h.deadline);
      }
      const int64_t wait_ms = std::clamp<int64_t>(
          absl::ToInt64Milliseconds(absl::Ceil(wake_at - now, absl::Milliseconds(1))), 0, INT_MAX);
      const int rc = poll(fds.data(), fds.size(), static_cast<int>(wait_ms));
      if (rc < 0) {
        if (errno == EINTR) continue;
        return absl::InternalError(absl::StrCat("poll: ", strerror(errno)));
      }
      if (fds[1].revents != 0) continue;  // Shutdown()
      // Peers already in setup first, then new ones.
      std::vector<size_t> finished;
      std::unique_ptr<PendingConnection> ready;
      for (size_t i = 0; i < half_open_.size() && ready == nullptr; ++i) {
        if (fds[i + 2].revents == 0) continue;
        std::string why;
        switch (ReadHello(&half_open_[i], &why)) {
          case HelloState::kNeedMore:
            break;
          case HelloState::kDrop:
            LOG(WARNING) << "listener " << host_ << ":" << port_ << ": dropping "
                         << half_open_[i].peer << ": " << why;
            finished.push_back(i);
            break;
          case HelloState::kComplete: {
            HalfOpen& h = half_open_[i];
            ready = std::make_unique<SoftPendingConnection>(shared_, std::move(h.fd), h.hello,
                                                            std::move(h.payload), h.peer);
            finished.push_back(i);
            break;
          }
        }
      }
      for (auto it = finished.rbegin(); it != finished.rend(); ++it) {
        half_open_.erase(half_open_.begin() + *it);
      }
      if (ready != nullptr) return ready;
      if (fds[0].revents != 0) AcceptNew(absl::Now());
    }
  }

  void Shutdown() override {
    shutdown_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_.get(), &one, sizeof(one));
    (void)ignored;
  }

 private:
  struct HalfOpen {
    Fd fd;
    std::string peer;
    absl::Time deadline;
    HelloHeader hello = {};
    size_t header_got = 0;
    std::string payload;
    size_t payload_got = 0;
  };
  enum class HelloState { kNeedMore, kComplete, kDrop };

  SoftListener(const Shared& shared, Fd listen_fd, Fd wake_fd, const std::string& host,
               uint16_t port)
      : shared_(shared),
        listen_fd_(std::move(listen_fd)),
        wake_fd_(std::move(wake_fd)),
        host_(host),
        port_(port) {}

  void DropExpired(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(accept_mu_) {
    for (size_t i = half_open_.size(); i-- > 0;) {
      if (half_open_[i].deadline <= now) {
        LOG(WARNING) << "listener " << host_ << ":" << port_ << ": dropping " << half_open_[i].peer
                     << ": no complete hello within " << absl::FormatDuration(kSetupTimeout);
        half_open_.erase(half_open_.begin() + i);
      }
    }
  }

  void AcceptNew(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(accept_mu_) {
    for (;;) {
      Fd fd = AcceptTcp(listen_fd_.get());
      if (!fd.valid()) return;
      if (half_open_.size() >= kMaxHalfOpen) {
        LOG(WARNING) << "listener " << host_ << ":" << port_ << ": " << kMaxHalfOpen
                     << " connections in setup; dropping " << half_open_.front().peer;
        half_open_.erase(half_open_.begin());
      }
      HalfOpen h;
      h.peer = PeerAddress(fd.get());
      h.fd = std::move(fd);
      h.deadline = now + kSetupTimeout;
      half_open_.push_back(std::move(h));
    }
  }

  // Reads what has arrived of a hello. Never reads past its end: what follows
  // belongs to the queue pair.
  static HelloState ReadHello(HalfOpen* h, std::string* why) {
    for (;;) {
      char* dst;
      size_t want;
      if (h->header_got < sizeof(HelloHeader)) {
        dst = reinterpret_cast<char*>(&h->hello) + h->header_got;
        want = sizeof(HelloHeader) - h->header_got;
      } else if (h->payload_got < h->payload.size()) {
        dst = h->payload.data() + h->payload_got;
        want = h->payload.size() - h->payload_got;
      } else {
        return HelloState::kComplete;
      }
      const ssize_t got = recv(h->fd.get(), dst, want, MSG_DONTWAIT);
      if (got == 0) {
        *why = "closed during setup";
        return HelloState::kDrop;
      }
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return HelloState::kNeedMore;
        *why = absl::StrCat("recv: ", strerror(errno));
        return HelloState::kDrop;
      }
      if (h->header_got < sizeof(HelloHeader)) {
        h->header_got += got;
        if (h->header_got == sizeof(HelloHeader)) {
          if (!CheckHello(h->hello, why)) return HelloState::kDrop;
          h->payload.resize(h->hello.payload_length);
        }
      } else {
        h->payload_got += got;
      }
    }
  }

  static bool CheckHello(const HelloHeader& hello, std::string* why) {
    if (hello.magic != kSetupMagic) {
      *why = "not a dreplay soft peer (bad magic)";
      return false;
    }
    if (hello.version != kWireVersion) {
      *why = absl::StrCat("wire version ", hello.version, ", expected ", kWireVersion);
      return false;
    }
    if (hello.payload_length > kMaxSetupPayload) {
      *why = absl::StrCat("setup payload of ", hello.payload_length, " bytes exceeds ",
                          kMaxSetupPayload);
      return false;
    }
    if (hello.max_rd_atomic < 1 || hello.max_rd_atomic > kMaxRdAtomicOnWire) {
      *why = absl::StrCat("max_rd_atomic ", hello.max_rd_atomic, " is out of range");
      return false;
    }
    LinkModel link;
    link.one_way_delay = absl::Nanoseconds(hello.link_delay_ns);
    link.jitter = absl::Nanoseconds(hello.link_jitter_ns);
    link.bandwidth_gbps = hello.link_bandwidth_gbps;
    const absl::Status valid = CheckLinkModel(link);
    if (!valid.ok()) {
      *why = absl::StrCat("bad link model: ", valid.message());
      return false;
    }
    return true;
  }

  const Shared shared_;
  const Fd listen_fd_;
  const Fd wake_fd_;
  const std::string host_;
  const uint16_t port_;
  std::atomic<bool> shutdown_{false};
  Mutex accept_mu_;
  std::vector<HalfOpen> half_open_ ABSL_GUARDED_BY(accept_mu_);
};

class SoftProvider : public Provider {
 public:
  explicit SoftProvider(Shared shared) : shared_(std::move(shared)) {}
  ~SoftProvider() override { shared_.nic->Stop(); }

  std::string name() const override { return "soft"; }

  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, size_t length,
                                                               uint32_t access) override {
    if (addr == nullptr || length == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cannot register a null or empty buffer (addr %p, length %u)", addr, length));
    }
    RETURN_IF_ERROR(CheckAccessFlags(access));  // the rule of both providers
    const uint32_t key = shared_.regions->Add(static_cast<char*>(addr), length, access);
    return std::unique_ptr<MemoryRegion>(new SoftMemoryRegion(shared_, addr, length, access, key));
  }

  absl::StatusOr<std::unique_ptr<Listener>> Listen(const std::string& host,
                                                   uint16_t port) override {
    return SoftListener::Create(shared_, host, port);
  }

  absl::StatusOr<Connection> Connect(const std::string& host, uint16_t port,
                                     const std::string& payload,
                                     const QueuePairOptions& options) override {
    RETURN_IF_ERROR(options.Validate());
    RETURN_IF_ERROR(CheckLinkModel(options.link));
    if (payload.size() > kMaxSetupPayload) {
      return absl::InvalidArgumentError(
          absl::StrCat("setup payload of ", payload.size(), " bytes exceeds ", kMaxSetupPayload));
    }
    const std::string target = absl::StrCat(host, ":", port);
    const absl::Time deadline = absl::Now() + options.connect_timeout;
    ASSIGN_OR_RETURN(Fd fd, ConnectTcp(host, port, deadline));

    HelloHeader hello = {};
    hello.magic = kSetupMagic;
    hello.version = kWireVersion;
    hello.max_rd_atomic = static_cast<uint32_t>(options.max_rd_atomic);
    hello.payload_length = static_cast<uint32_t>(payload.size());
    hello.link_delay_ns = absl::ToInt64Nanoseconds(options.link.one_way_delay);
    hello.link_jitter_ns = absl::ToInt64Nanoseconds(options.link.jitter);
    hello.link_bandwidth_gbps = options.link.bandwidth_gbps;
    hello.link_seed = options.link.seed;
    hello.host_id = shared_.host_id;
    std::string message(reinterpret_cast<const char*>(&hello), sizeof(hello));
    message += payload;
    absl::Status status = SendAll(fd.get(), message.data(), message.size(), deadline);
    ReplyHeader reply = {};
    if (status.ok()) status = RecvAll(fd.get(), &reply, sizeof(reply), deadline);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("connecting to ", target, ": ", status.message()));
    }
    const bool accepted = reply.verdict == static_cast<uint8_t>(SetupVerdict::kAccept);
    const bool rejected = reply.verdict == static_cast<uint8_t>(SetupVerdict::kReject);
    if (reply.magic != kSetupMagic || reply.version != kWireVersion || !(accepted || rejected) ||
        reply.payload_length > (accepted ? kMaxSetupPayload : kMaxRejectReason) ||
        (accepted && (reply.max_rd_atomic < 1 || reply.max_rd_atomic > kMaxRdAtomicOnWire))) {
      return absl::UnavailableError(
          absl::StrCat("connecting to ", target, ": not a valid dreplay soft reply"));
    }
    std::string reply_payload(reply.payload_length, '\0');
    status = RecvAll(fd.get(), reply_payload.data(), reply_payload.size(), deadline);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("connecting to ", target, ": ", status.message()));
    }
    if (rejected) {
      return absl::PermissionDeniedError(
          absl::StrCat("connection to ", target, " rejected: ", PrintablePeerText(reply_payload)));
    }
    const int max_rd_atomic =
        std::min<int>(options.max_rd_atomic, static_cast<int>(reply.max_rd_atomic));
    const std::string description = Describe(fd.get());
    ASSIGN_OR_RETURN(std::unique_ptr<QueuePair> qp,
                     MakeQueuePair(shared_, std::move(fd),
                                   MakeConfig(shared_, options, max_rd_atomic, options.link,
                                              reply.host_id, options.link.seed, description)));
    return Connection{std::move(qp), std::move(reply_payload)};
  }

 private:
  const Shared shared_;
};

}  // namespace
}  // namespace soft

absl::StatusOr<std::unique_ptr<Provider>> CreateSoftProvider(const ProviderOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<soft::Nic> nic, soft::Nic::Start("soft"));
  soft::Shared shared;
  shared.regions = std::make_shared<soft::RegionTable>();
  shared.links = std::make_shared<soft::LinkTable>();
  absl::BitGen rng;
  shared.host_id = absl::Uniform<uint64_t>(absl::IntervalClosed, rng, 1, UINT64_MAX);
  shared.nic = std::shared_ptr<soft::Nic>(std::move(nic));
  return std::unique_ptr<Provider>(new soft::SoftProvider(std::move(shared)));
}

}  // namespace dreplay::verbs
