// Copyright dreplay authors.

#include "verbs/ibverbs_connection.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "verbs/connection_manager.h"
#include "verbs/ibverbs_attributes.h"
#include "verbs/ibverbs_errors.h"
#include "verbs/ibverbs_queue_pair.h"
#include "verbs/ibverbs_wire.h"
#include "verbs/setup_preamble.h"
#include "verbs/tcp_channel.h"

namespace dreplay::verbs::ibverbs {
namespace {

// The largest path MTU we ask for.
constexpr ibv_mtu kMaxPathMtu = IBV_MTU_4096;
// ibv_qp_attr::max_rd_atomic and max_dest_rd_atomic are uint8_t.
constexpr int kMaxRdAtomicField = std::numeric_limits<uint8_t>::max();
// How long a connected peer has to deliver its hello (the connection
// manager's per-peer deadline).
constexpr absl::Duration kHelloTimeout = absl::Seconds(5);
// How long a rejection waits to be sent.
constexpr absl::Duration kRejectSendTimeout = absl::Seconds(1);
// Ack timeouts (4.096 us x 2^t) suited to a ~100 us round trip: 12 is 16.8 ms,
// 14 is 67 ms. Shorter ones retry spuriously under load on a long link.
constexpr int kMinLongLinkAckTimeout = 12;

absl::Status SoftProviderOnly(const QueuePairOptions& options) {
  if (options.link.enabled()) {
    return absl::InvalidArgumentError(
        "QueuePairOptions.link: a link model is soft provider only; the "
        "ibverbs provider runs on the real link");
  }
  if (options.faults.enabled()) {
    return absl::InvalidArgumentError(
        "QueuePairOptions.faults: fault injection is soft provider only");
  }
  return absl::OkStatus();
}

absl::Status CheckPayload(const std::string& payload, const char* what) {
  if (payload.size() > kMaxPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " of ", payload.size(), " bytes exceeds the limit of ", kMaxPayloadBytes));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Creating a queue pair and bringing it up.
// ---------------------------------------------------------------------------

// A queue pair on its way to RTS: its verbs objects and what this side tells
// the peer about it.
struct NewQp {
  QpObjects objects;
  PeerInfo local;
};

// The completion queue's size: every send and receive request may complete.
int CqEntries(const QueuePairOptions& options) {
  return options.max_send_wr + std::max(options.max_recv_wr, 1);
}

// What `options` ask of `device` beyond what Validate() checks.
absl::Status CheckQueuePairOptions(const Device& device, const QueuePairOptions& options) {
  const ibv_device_attr& attr = device.attr;
  if (options.max_send_wr > attr.max_qp_wr || options.max_recv_wr > attr.max_qp_wr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QueuePairOptions max_send_wr ", options.max_send_wr, " / max_recv_wr ",
        options.max_recv_wr, " exceed ", device.name, "'s max_qp_wr ", attr.max_qp_wr));
  }
  const int cqe = CqEntries(options);
  if (cqe > attr.max_cqe) {
    return absl::InvalidArgumentError(absl::StrCat("a CQ of ", cqe,
                                                   " entries (max_send_wr + max_recv_wr) exceeds ",
                                                   device.name, "'s max_cqe ", attr.max_cqe));
  }
  if (options.ack_timeout == 0) {
    LOG(WARNING) << "ack_timeout 0 means no timeout: a peer that dies is never "
                    "detected by this queue pair";
  } else if (options.ack_timeout < kMinLongLinkAckTimeout) {
    LOG(WARNING) << "ack_timeout " << options.ack_timeout << " ("
                 << 4.096 * (1 << options.ack_timeout)
                 << " us) is short for a long link; 12 to 14 is recommended";
  }
  return absl::OkStatus();
}

// Creates the RC QP on objects->cq. Queue depths beyond the device's
// max_qp_wr are refused first, by name: ibv_create_qp says only EINVAL for
// them (mlx5) as for an inline size the device cannot give. Then the inline
// size the options name is asked for, and halved on EINVAL until it fits (0
// always does).
absl::Status CreateRcQp(const Device& device, const QueuePairOptions& options, QpObjects* objects) {
  const int max_recv_wr = std::max(options.max_recv_wr, 1);
  if (options.max_send_wr > device.attr.max_qp_wr || max_recv_wr > device.attr.max_qp_wr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "queue depths max_send_wr ", options.max_send_wr, " and max_recv_wr ", max_recv_wr,
        " must not exceed ", device.name, "'s max_qp_wr ", device.attr.max_qp_wr));
  }
  uint32_t inline_wanted = options.max_inline_data;
  for (;;) {
    ibv_qp_init_attr init;
    std::memset(&init, 0, sizeof(init));
    init.send_cq = objects->cq;
    init.recv_cq = objects->cq;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 0;
    init.cap.max_send_wr = options.max_send_wr;
    init.cap.max_recv_wr = max_recv_wr;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = inline_wanted;
    errno = 0;
    objects->qp = ibv_create_qp(device.pd, &init);
    if (objects->qp != nullptr) {
      // The created QP's capabilities, which may exceed the request.
      objects->max_inline_data = init.cap.max_inline_data;
      return absl::OkStatus();
    }
    const int error_number = errno;
    if (error_number != EINVAL || inline_wanted == 0) {
      return IbvNullResultToStatus(error_number, "ibv_create_qp(RC)");
    }
    inline_wanted /= 2;
    LOG(WARNING) << device.name << ": ibv_create_qp refused max_inline_data " << inline_wanted * 2
                 << "; trying " << inline_wanted;
  }
}

absl::Status ModifyToInit(ibv_qp* qp, const Device& device) {
  QpTransition init = BuildInitTransition(device);
  return IbvResultToStatus(device.api->ModifyQp(qp, &init.attr, init.mask),
                           "ibv_modify_qp(RESET->INIT)");
}

// What this side sends in its setup frame, with the GID its entry holds now.
absl::StatusOr<PeerInfo> LocalInfo(const Device& device, const QueuePairOptions& options,
                                   const ibv_qp* qp, uint32_t psn) {
  PeerInfo info;
  info.qpn = qp->qp_num;
  info.psn = psn;
  ASSIGN_OR_RETURN(std::tie(info.gid, info.gid_kind), CurrentGid(device));
  info.lid = device.port_attr.lid;
  info.mtu = device.port_attr.active_mtu;
  const int wanted = std::min(options.max_rd_atomic, kMaxRdAtomicField);
  info.initiator_depth = std::min(wanted, device.attr.max_qp_init_rd_atom);
  info.responder_resources = std::min(wanted, device.attr.max_qp_rd_atom);
  return info;
}

// Creates the CQ and the QP and moves the QP to INIT.
absl::StatusOr<NewQp> CreateQp(const std::shared_ptr<Device>& device,
                               const QueuePairOptions& options) {
  RETURN_IF_ERROR(CheckQueuePairOptions(*device, options));
  NewQp qp{QpObjects(device->name, device->api), PeerInfo()};
  ASSIGN_OR_RETURN(qp.objects.cq, IbvCheckPointer(ibv_create_cq(device->context, CqEntries(options),
                                                                nullptr, nullptr, 0),
                                                  "ibv_create_cq"));
  RETURN_IF_ERROR(CreateRcQp(*device, options, &qp.objects));
  // A random initial PSN, so that packets of an old connection that reused
  // this QPN cannot be taken for this one's.
  absl::BitGen gen;
  const uint32_t psn = absl::Uniform<uint32_t>(gen, 0, kPsnMask + 1);
  RETURN_IF_ERROR(ModifyToInit(qp.objects.qp, *device));
  ASSIGN_OR_RETURN(qp.local, LocalInfo(*device, options, qp.objects.qp, psn));
  return qp;
}

absl::Status ModifyToRtr(ibv_qp* qp, const Device& device, const QueuePairOptions& options,
                         const PeerInfo& local, const PeerInfo& remote, ibv_mtu path_mtu) {
  ASSIGN_OR_RETURN(QpTransition rtr, BuildRtrTransition(device, options, local, remote, path_mtu));
  return IbvResultToStatus(device.api->ModifyQp(qp, &rtr.attr, rtr.mask),
                           "ibv_modify_qp(INIT->RTR)");
}

absl::Status ModifyToRts(ibv_qp* qp, const Device& device, const QueuePairOptions& options,
                         const PeerInfo& local, int max_rd_atomic) {
  QpTransition rts = BuildRtsTransition(options, local, max_rd_atomic);
  return IbvResultToStatus(device.api->ModifyQp(qp, &rts.attr, rts.mask),
                           "ibv_modify_qp(RTR->RTS)");
}

// INIT -> RTR -> RTS against `remote`, negotiating max_rd_atomic and the
// path MTU; the queue pair is then ready for its datapath.
absl::StatusOr<std::unique_ptr<IbverbsQueuePair>> ConnectQp(std::shared_ptr<Device> device,
                                                            const QueuePairOptions& options,
                                                            NewQp qp, const PeerInfo& remote) {
  const PeerInfo& local = qp.local;
  // Our READs/atomics in flight may not exceed what the peer serves; we
  // serve what we can, which covers the peer's (equally clipped) depth.
  const int max_rd_atomic = std::min(local.initiator_depth, remote.responder_resources);
  const ibv_mtu path_mtu = std::min({device->port_attr.active_mtu, remote.mtu, kMaxPathMtu});
  RETURN_IF_ERROR(ModifyToRtr(qp.objects.qp, *device, options, local, remote, path_mtu));
  RETURN_IF_ERROR(ModifyToRts(qp.objects.qp, *device, options, local, max_rd_atomic));
  auto connected = std::make_unique<IbverbsQueuePair>(std::move(device), options,
                                                      std::move(qp.objects), remote, max_rd_atomic);
  VLOG(1) << "connected " << connected->Describe() << ", path MTU " << MtuBytes(path_mtu)
          << ", max_rd_atomic " << max_rd_atomic << ", max_inline_data "
          << connected->max_inline_data();
  return connected;
}

// The listener's side: a queue pair brought up against the peer's `remote`
// at once; *local receives what to answer the peer.
absl::StatusOr<std::unique_ptr<IbverbsQueuePair>> AcceptQp(const std::shared_ptr<Device>& device,
                                                           const QueuePairOptions& options,
                                                           const PeerInfo& remote,
                                                           PeerInfo* local) {
  ASSIGN_OR_RETURN(NewQp qp, CreateQp(device, options));
  *local = qp.local;
  return ConnectQp(device, options, std::move(qp), remote);
}

// ---------------------------------------------------------------------------
// The listener.
// ---------------------------------------------------------------------------

// `body` behind the connection manager's preamble of `kind`.
std::string WithPreamble(PreambleKind kind, const std::string& body) {
  Preamble p;
  p.kind = kind;
  p.provider = SetupProvider::kIbverbs;
  p.body_length = static_cast<uint32_t>(body.size());
  return EncodePreamble(p) + body;
}

// A hello body, checked on the connection manager's thread before anything
// is allocated for the peer.
absl::Status CheckHello(absl::string_view body, bool ethernet) {
  ASSIGN_OR_RETURN(SetupMessage hello, DecodeSetup(std::string(body), "the peer"));
  if (hello.kind != SetupKind::kHello) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup kind ", static_cast<int>(hello.kind), " instead of a hello"));
  }
  return CheckPeerInfo(hello.info, ethernet, "the peer");
}

class IbverbsPendingConnection : public PendingConnection {
 public:
  IbverbsPendingConnection(std::shared_ptr<Device> device, std::unique_ptr<TcpConnection> channel,
                           PeerInfo remote, std::string payload)
      : device_(std::move(device)),
        peer_(channel->peer()),
        channel_(std::move(channel)),
        remote_(remote),
        payload_(std::move(payload)) {}

  ~IbverbsPendingConnection() override {
    if (!answered_) Reject("the listener dropped the connection unanswered");
  }

  const std::string& payload() const override { return payload_; }
  std::string peer() const override { return peer_; }

  absl::StatusOr<std::unique_ptr<QueuePair>> Accept(const std::string& reply,
                                                    const QueuePairOptions& options) override {
    if (answered_) {
      return absl::FailedPreconditionError(
          absl::StrCat("connection from ", peer(), " was already answered"));
    }
    absl::Status status = options.Validate();
    if (status.ok()) status = SoftProviderOnly(options);
    if (status.ok()) status = CheckPayload(reply, "Accept reply");
    if (!status.ok()) {
      Reject(absl::StrCat("listener error: ", status.message()));
      return status;
    }
    absl::StatusOr<std::pair<ibv_gid, GidKind>> gid = CurrentGid(*device_);
    const absl::Status reachable =
        gid.ok() ? CheckGidCompatible(gid->second, gid->first, remote_, peer()) : gid.status();
    if (!reachable.ok()) {
      Reject(std::string(reachable.message()));
      return reachable;
    }
    answered_ = true;
    const absl::Time deadline = absl::Now() + options.connect_timeout;
    PeerInfo local;
    absl::StatusOr<std::unique_ptr<IbverbsQueuePair>> qp =
        AcceptQp(device_, options, remote_, &local);
    if (!qp.ok()) {
      SendReject(absl::StrCat("listener could not create its queue pair: ", qp.status().message()));
      return qp.status();
    }
    SetupMessage accept;
    accept.kind = SetupKind::kAccept;
    accept.info = local;
    accept.payload = reply;
    const std::string message = WithPreamble(PreambleKind::kAccept, EncodeSetup(accept));
    RETURN_IF_ERROR(channel_->WriteAll(message.data(), message.size(), deadline));
    // Wait for the peer's kReady: then its QP is in RTS too.
    auto frame = channel_->ReceiveFrame(kMaxSetupFrameBytes, deadline);
    if (!frame.ok()) {
      return absl::Status(
          absl::IsDeadlineExceeded(frame.status()) ? absl::StatusCode::kDeadlineExceeded
                                                   : absl::StatusCode::kUnavailable,
          absl::StrCat("peer ", peer(), " went away during setup: ", frame.status().message()));
    }
    ASSIGN_OR_RETURN(SetupMessage ready, DecodeSetup(*frame, peer()));
    if (ready.kind != SetupKind::kReady) {
      return absl::UnavailableError(
          absl::StrCat("peer ", peer(), " could not bring up its queue pair: ", ready.payload));
    }
    (*qp)->AttachControl(std::move(channel_));
    return std::unique_ptr<QueuePair>(std::move(*qp));
  }

  void Reject(const std::string& reason) override {
    if (answered_) return;
    answered_ = true;
    SendReject(reason);
  }

 private:
  void SendReject(const std::string& reason) {
    const std::string message =
        WithPreamble(PreambleKind::kReject, reason.substr(0, kMaxRejectReasonBytes));
    const absl::Status s =
        channel_->WriteAll(message.data(), message.size(), absl::Now() + kRejectSendTimeout);
    LOG_IF(WARNING, !s.ok()) << "rejecting " << peer() << ": " << s;
  }

  const std::shared_ptr<Device> device_;
  const std::string peer_;
  std::unique_ptr<TcpConnection> channel_;  // to the queue pair once accepted
  const PeerInfo remote_;
  const std::string payload_;
  bool answered_ = false;
};

// The ibverbs listener: the shared connection manager (connection_manager.h)
// reads hellos on its own thread and checks them (CheckPeerInfo) before
// Accept() hands one out; queue pairs are created in
// PendingConnection::Accept only.
class IbverbsListener : public Listener {
 public:
  IbverbsListener(std::shared_ptr<Device> device, std::unique_ptr<ConnectionManager> manager)
      : device_(std::move(device)), manager_(std::move(manager)) {}
  ~IbverbsListener() override { Shutdown(); }

  uint16_t port() const override { return manager_->port(); }
  std::string host() const override { return manager_->host(); }

  absl::StatusOr<std::unique_ptr<PendingConnection>> Accept(absl::Duration timeout) override {
    ASSIGN_OR_RETURN(CompletedHello completed, manager_->Accept(timeout));
    // Checked by the manager (CheckHello); decoding again cannot fail.
    ASSIGN_OR_RETURN(SetupMessage hello, DecodeSetup(completed.body, completed.connection->peer()));
    return std::unique_ptr<PendingConnection>(new IbverbsPendingConnection(
        device_, std::move(completed.connection), hello.info, std::move(hello.payload)));
  }

  void Shutdown() override { manager_->Shutdown(); }

 private:
  const std::shared_ptr<Device> device_;
  const std::unique_ptr<ConnectionManager> manager_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Listener>> Listen(std::shared_ptr<Device> device,
                                                 const std::string& host, uint16_t port) {
  ConnectionManagerOptions options;
  options.provider = SetupProvider::kIbverbs;
  options.hello_timeout = kHelloTimeout;
  options.max_hello_bytes = kMaxSetupFrameBytes;
  const bool ethernet = device->is_ethernet();
  options.check_hello = [ethernet](absl::string_view body) { return CheckHello(body, ethernet); };
  ASSIGN_OR_RETURN(std::unique_ptr<ConnectionManager> manager,
                   ConnectionManager::Start(host, port, std::move(options)));
  return std::unique_ptr<Listener>(new IbverbsListener(std::move(device), std::move(manager)));
}

// ---------------------------------------------------------------------------
// The connecting side.
// ---------------------------------------------------------------------------

namespace {

// Reads the listener's answer to a hello: its preamble, then the accept.
// kPermissionDenied with the reason for a reject, kFailedPrecondition for a
// listener of another provider, kDeadlineExceeded, kUnavailable for
// anything malformed or a listener that went away.
absl::StatusOr<SetupMessage> ReceiveAnswer(TcpConnection* channel, absl::Time deadline,
                                           absl::Duration timeout) {
  const std::string& peer = channel->peer();
  auto read = [&](std::string* bytes) -> absl::Status {
    const absl::Status s = channel->ReadAll(bytes->data(), bytes->size(), deadline);
    if (s.ok()) return s;
    if (absl::IsDeadlineExceeded(s)) {
      return absl::DeadlineExceededError(
          absl::StrCat("connect to ", peer, ": no answer within ", absl::FormatDuration(timeout)));
    }
    return absl::UnavailableError(absl::StrCat("connect to ", peer, ": ", s.message()));
  };
  std::string bytes(kPreambleBytes, '\0');
  RETURN_IF_ERROR(read(&bytes));
  absl::StatusOr<Preamble> p = DecodePreamble(bytes, peer);
  if (!p.ok())
    return absl::UnavailableError(absl::StrCat("connect to ", peer, ": ", p.status().message()));
  if (p->provider != SetupProvider::kIbverbs) {
    return absl::FailedPreconditionError(
        ProviderMismatchMessage(peer, p->provider, SetupProvider::kIbverbs));
  }
  const uint32_t limit =
      p->kind == PreambleKind::kAccept ? kMaxSetupFrameBytes : kMaxRejectReasonBytes;
  if (p->kind == PreambleKind::kHello || p->body_length > limit) {
    return absl::UnavailableError(absl::StrCat("connect to ", peer, ": not a valid answer"));
  }
  std::string body(p->body_length, '\0');
  RETURN_IF_ERROR(read(&body));
  if (p->kind == PreambleKind::kReject) {
    for (char& c : body) {
      if (c < 0x20 || c > 0x7e) c = '?';
    }
    return absl::PermissionDeniedError(absl::StrCat("connection to ", peer, " rejected: ", body));
  }
  absl::StatusOr<SetupMessage> answer = DecodeSetup(body, peer);
  if (answer.ok() && answer->kind != SetupKind::kAccept) {
    answer = absl::InvalidArgumentError(
        absl::StrCat("unexpected setup kind ", static_cast<int>(answer->kind)));
  }
  if (!answer.ok()) {
    return absl::UnavailableError(
        absl::StrCat("connect to ", peer, ": ", answer.status().message()));
  }
  return answer;
}

}  // namespace

absl::StatusOr<Connection> Connect(std::shared_ptr<Device> device, const std::string& host,
                                   uint16_t port, const std::string& payload,
                                   const QueuePairOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(SoftProviderOnly(options));
  RETURN_IF_ERROR(CheckPayload(payload, "Connect payload"));
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  ASSIGN_OR_RETURN(std::unique_ptr<TcpConnection> channel,
                   TcpConnection::Connect(host, port, deadline));
  ASSIGN_OR_RETURN(NewQp qp, CreateQp(device, options));
  SetupMessage hello;
  hello.kind = SetupKind::kHello;
  hello.info = qp.local;
  hello.payload = payload;
  const std::string message = WithPreamble(PreambleKind::kHello, EncodeSetup(hello));
  RETURN_IF_ERROR(channel->WriteAll(message.data(), message.size(), deadline));
  ASSIGN_OR_RETURN(SetupMessage answer,
                   ReceiveAnswer(channel.get(), deadline, options.connect_timeout));
  // The listener's queue pair must be sane before ours is modified against it.
  absl::Status sane = CheckPeerInfo(answer.info, device->is_ethernet(), channel->peer());
  if (sane.ok()) {
    sane = CheckGidCompatible(qp.local.gid_kind, qp.local.gid, answer.info, channel->peer());
  }
  absl::StatusOr<std::unique_ptr<IbverbsQueuePair>> up =
      sane.ok() ? ConnectQp(device, options, std::move(qp), answer.info)
                : absl::StatusOr<std::unique_ptr<IbverbsQueuePair>>(sane);
  SetupMessage ready;
  ready.kind = up.ok() ? SetupKind::kReady : SetupKind::kReject;
  ready.payload = up.ok() ? "" : std::string(up.status().message());
  const absl::Status sent = channel->SendFrame(EncodeSetup(ready), deadline);
  RETURN_IF_ERROR(up.status());
  RETURN_IF_ERROR(sent);
  (*up)->AttachControl(std::move(channel));
  return Connection{std::move(*up), std::move(answer.payload)};
}

}  // namespace dreplay::verbs::ibverbs
