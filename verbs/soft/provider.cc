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
#include "verbs/connection_manager.h"
#include "verbs/setup_preamble.h"
#include "verbs/soft/channel.h"
#include "verbs/soft/link.h"
#include "verbs/soft/link_table.h"
#include "verbs/soft/nic.h"
#include "verbs/soft/region_table.h"
#include "verbs/soft/shm_link.h"
#include "verbs/soft/socket.h"
#include "verbs/soft/wire.h"

namespace dreplay::verbs {
namespace soft {
namespace {

// A connecting peer must deliver its whole hello within this time.
constexpr absl::Duration kSetupTimeout = absl::Seconds(5);
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
  uint64_t host_id = 0;   // random, not 0
  uint64_t clock_id = 0;  // ClockId() (link.h); 0: unknown
  SoftLinkRelease link_release = SoftLinkRelease::kAuto;
  SoftTransport transport = SoftTransport::kAuto;
};

// Whether a queue pair with `options` may use the same-host transport:
// not when TCP is forced, nor with injected faults (they act on frames).
bool MayShareMemory(const Shared& shared, const QueuePairOptions& options) {
  return shared.transport == SoftTransport::kAuto && !options.faults.enabled();
}

ChannelConfig MakeConfig(const Shared& shared, const QueuePairOptions& options, int max_rd_atomic,
                         const LinkModel& link, uint64_t peer_host, uint64_t peer_clock,
                         uint64_t link_seed, std::string description) {
  ChannelConfig config;
  config.max_send_wr = options.max_send_wr;
  config.max_recv_wr = options.max_recv_wr;
  config.max_rd_atomic = max_rd_atomic;
  config.max_inline_data = options.max_inline_data;
  config.link = link;
  // Both ends read the same clock: frames carry their arrival (wire.h).
  config.same_clock = link.enabled() && shared.clock_id != 0 && shared.clock_id == peer_clock;
  if (link.enabled()) {
    const LinkRelease release = !config.same_clock ? LinkRelease::kSender
                                : shared.link_release == SoftLinkRelease::kReceiver
                                    ? LinkRelease::kReceiver
                                    : LinkRelease::kStamped;
    config.link_out = shared.links->Get(peer_host, link, link_seed, release);
  }
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
                                                         const ChannelConfig& config,
                                                         std::unique_ptr<ShmLink> shm) {
  auto channel = std::make_shared<Channel>(std::move(fd), config, shared.regions, std::move(shm));
  ASSIGN_OR_RETURN(const uint64_t id, shared.nic->Add(channel));
  return std::unique_ptr<QueuePair>(new SoftQueuePair(shared.nic, std::move(channel), id));
}

// The connection manager's preamble of a soft setup message.
std::string SetupPreamble(PreambleKind kind, size_t body_length) {
  Preamble p;
  p.kind = kind;
  p.provider = SetupProvider::kSoft;
  p.body_length = static_cast<uint32_t>(body_length);
  return EncodePreamble(p);
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
    std::unique_ptr<ShmLink> shm;
    if (MayShareMemory(shared_, options)) shm = AnswerShmOffer(hello_);
    ReplyHeader header = {};
    header.magic = kSetupMagic;
    header.version = kWireVersion;
    header.verdict = static_cast<uint8_t>(SetupVerdict::kAccept);
    header.shm = shm != nullptr ? 1 : 0;
    header.max_rd_atomic = static_cast<uint32_t>(options.max_rd_atomic);
    header.payload_length = static_cast<uint32_t>(reply.size());
    header.host_id = shared_.host_id;
    header.clock_id = shared_.clock_id;
    std::string message = SetupPreamble(PreambleKind::kAccept, sizeof(header) + reply.size());
    message.append(reinterpret_cast<const char*>(&header), sizeof(header));
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
    return MakeQueuePair(
        shared_, std::move(fd_),
        MakeConfig(shared_, options, max_rd_atomic, link, hello_.host_id, hello_.clock_id,
                   hello_.link_seed ^ kAcceptorSeedSalt, description),
        std::move(shm));
  }

  void Reject(const std::string& reason) override {
    if (answered_) return;
    answered_ = true;
    const std::string text = reason.substr(0, kMaxRejectReason);
    const std::string message = SetupPreamble(PreambleKind::kReject, text.size()) + text;
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

// Checks a hello body (HelloHeader, then the payload) on the connection
// manager's thread.
absl::Status CheckHello(absl::string_view body) {
  if (body.size() < sizeof(HelloHeader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a soft hello of ", body.size(), " bytes is shorter than its header"));
  }
  HelloHeader hello;
  std::memcpy(&hello, body.data(), sizeof(hello));
  if (hello.magic != kSetupMagic) {
    return absl::InvalidArgumentError("not a dreplay soft peer (bad magic)");
  }
  if (hello.version != kWireVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("soft wire version ", hello.version, ", expected ", kWireVersion));
  }
  if (hello.payload_length > kMaxSetupPayload ||
      hello.payload_length != body.size() - sizeof(HelloHeader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup payload of ", hello.payload_length, " bytes (carried ",
                     body.size() - sizeof(HelloHeader), ", limit ", kMaxSetupPayload, ")"));
  }
  if (hello.max_rd_atomic < 1 || hello.max_rd_atomic > kMaxRdAtomicOnWire) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_rd_atomic ", hello.max_rd_atomic, " is out of range"));
  }
  LinkModel link;
  link.one_way_delay = absl::Nanoseconds(hello.link_delay_ns);
  link.jitter = absl::Nanoseconds(hello.link_jitter_ns);
  link.bandwidth_gbps = hello.link_bandwidth_gbps;
  const absl::Status valid = CheckLinkModel(link);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad link model: ", valid.message()));
  }
  return absl::OkStatus();
}

// The soft listener: the shared connection manager (connection_manager.h)
// reads hellos; Accept() turns a complete one into a pending connection.
class SoftListener : public Listener {
 public:
  static absl::StatusOr<std::unique_ptr<Listener>> Create(const Shared& shared,
                                                          const std::string& host, uint16_t port) {
    ConnectionManagerOptions options;
    options.provider = SetupProvider::kSoft;
    options.hello_timeout = kSetupTimeout;
    options.max_hello_bytes = sizeof(HelloHeader) + kMaxSetupPayload;
    options.check_hello = CheckHello;
    ASSIGN_OR_RETURN(std::unique_ptr<ConnectionManager> manager,
                     ConnectionManager::Start(host, port, std::move(options)));
    return std::unique_ptr<Listener>(new SoftListener(shared, std::move(manager)));
  }

  ~SoftListener() override { Shutdown(); }

  uint16_t port() const override { return manager_->port(); }
  std::string host() const override { return manager_->host(); }

  absl::StatusOr<std::unique_ptr<PendingConnection>> Accept(absl::Duration timeout) override {
    ASSIGN_OR_RETURN(CompletedHello hello, manager_->Accept(timeout));
    HelloHeader header;
    std::memcpy(&header, hello.body.data(), sizeof(header));  // checked by CheckHello
    std::string peer = hello.connection->peer();
    Fd fd(hello.connection->Release());
    return std::unique_ptr<PendingConnection>(new SoftPendingConnection(
        shared_, std::move(fd), header, hello.body.substr(sizeof(header)), std::move(peer)));
  }

  void Shutdown() override { manager_->Shutdown(); }

 private:
  SoftListener(const Shared& shared, std::unique_ptr<ConnectionManager> manager)
      : shared_(shared), manager_(std::move(manager)) {}

  const Shared shared_;
  const std::unique_ptr<ConnectionManager> manager_;
};

// Reads the listener's answer to a hello: the preamble, then the
// ReplyHeader and reply payload of an accept. kPermissionDenied with the
// reason for a reject, kFailedPrecondition for a listener of another
// provider, kUnavailable for anything malformed or a peer that went away.
absl::Status ReceiveAnswer(int fd, const std::string& target, absl::Time deadline,
                           ReplyHeader* reply, std::string* payload) {
  std::string bytes(kPreambleBytes, '\0');
  absl::Status status = RecvAll(fd, bytes.data(), bytes.size(), deadline);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("connecting to ", target, ": ", status.message()));
  }
  absl::StatusOr<Preamble> p = DecodePreamble(bytes, target);
  if (!p.ok()) {
    return absl::UnavailableError(
        absl::StrCat("connecting to ", target, ": ", p.status().message()));
  }
  if (p->provider != SetupProvider::kSoft) {
    return absl::FailedPreconditionError(
        ProviderMismatchMessage(target, p->provider, SetupProvider::kSoft));
  }
  const bool accepted = p->kind == PreambleKind::kAccept;
  const uint32_t limit = accepted ? sizeof(ReplyHeader) + kMaxSetupPayload : kMaxRejectReasonBytes;
  if (p->kind == PreambleKind::kHello || p->body_length > limit ||
      (accepted && p->body_length < sizeof(ReplyHeader))) {
    return absl::UnavailableError(
        absl::StrCat("connecting to ", target, ": not a valid dreplay soft answer"));
  }
  std::string body(p->body_length, '\0');
  status = RecvAll(fd, body.data(), body.size(), deadline);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("connecting to ", target, ": ", status.message()));
  }
  if (!accepted) {
    return absl::PermissionDeniedError(
        absl::StrCat("connection to ", target, " rejected: ", PrintablePeerText(body)));
  }
  std::memcpy(reply, body.data(), sizeof(*reply));
  if (reply->magic != kSetupMagic || reply->version != kWireVersion ||
      reply->verdict != static_cast<uint8_t>(SetupVerdict::kAccept) || reply->shm > 1 ||
      reply->payload_length != body.size() - sizeof(*reply) || reply->max_rd_atomic < 1 ||
      reply->max_rd_atomic > kMaxRdAtomicOnWire) {
    return absl::UnavailableError(
        absl::StrCat("connecting to ", target, ": not a valid dreplay soft reply"));
  }
  *payload = body.substr(sizeof(*reply));
  return absl::OkStatus();
}

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
    hello.clock_id = shared_.clock_id;
    std::unique_ptr<ShmOffer> offer;
    if (MayShareMemory(shared_, options)) {
      absl::StatusOr<std::unique_ptr<ShmOffer>> made = ShmOffer::Create();
      if (made.ok()) {
        offer = std::move(*made);
        offer->Fill(&hello);
      } else {
        VLOG(1) << "no same-host offer: " << made.status();
      }
    }
    std::string message = SetupPreamble(PreambleKind::kHello, sizeof(hello) + payload.size());
    message.append(reinterpret_cast<const char*>(&hello), sizeof(hello));
    message += payload;
    absl::Status status = SendAll(fd.get(), message.data(), message.size(), deadline);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("connecting to ", target, ": ", status.message()));
    }
    ReplyHeader reply = {};
    std::string reply_payload;
    RETURN_IF_ERROR(ReceiveAnswer(fd.get(), target, deadline, &reply, &reply_payload));
    std::unique_ptr<ShmLink> shm;
    if (reply.shm == 1) {
      if (offer == nullptr) {
        return absl::UnavailableError(
            absl::StrCat("connecting to ", target, ": a same-host answer to no offer"));
      }
      absl::StatusOr<std::unique_ptr<ShmLink>> linked = offer->Complete(deadline);
      if (!linked.ok()) {
        return absl::Status(linked.status().code(), absl::StrCat("connecting to ", target, ": ",
                                                                 linked.status().message()));
      }
      shm = std::move(*linked);
    }
    const int max_rd_atomic =
        std::min<int>(options.max_rd_atomic, static_cast<int>(reply.max_rd_atomic));
    const std::string description = Describe(fd.get());
    ASSIGN_OR_RETURN(
        std::unique_ptr<QueuePair> qp,
        MakeQueuePair(shared_, std::move(fd),
                      MakeConfig(shared_, options, max_rd_atomic, options.link, reply.host_id,
                                 reply.clock_id, options.link.seed, description),
                      std::move(shm)));
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
  shared.transport = options.soft_transport;
  absl::BitGen rng;
  shared.host_id = absl::Uniform<uint64_t>(absl::IntervalClosed, rng, 1, UINT64_MAX);
  // A provider whose senders hold frames names no clock, so that no peer
  // releases frames for it nor stamps frames for it to release.
  shared.clock_id = options.soft_link_release == SoftLinkRelease::kSender ? 0 : soft::ClockId();
  shared.link_release = options.soft_link_release;
  shared.nic = std::shared_ptr<soft::Nic>(std::move(nic));
  return std::unique_ptr<Provider>(new soft::SoftProvider(std::move(shared)));
}

}  // namespace dreplay::verbs
