// Copyright dreplay authors.
//
// ibverbs_provider.cc: RC queue pairs over libibverbs.
//
// Layout of this file:
//   1. constants and the setup wire message;
//   2. Device: the opened context, protection domain, port and chosen GID
//      (shared by every object made from it, released last);
//   3. IbverbsMemoryRegion;
//   4. IbverbsQueuePair: creation, INIT -> RTR -> RTS, datapath;
//   5. connection setup over the TCP control channel (listener, pending
//      connection, Connect);
//   6. IbverbsProvider and the factory.
//
// Connection setup (three frames on the control channel):
//
//   client                                   listener
//   create CQ+QP, RESET->INIT
//   kHello {qpn, psn, gid, lid, mtu, rd}  -->
//                                            Listener::Accept returns it
//                                            Accept(): create CQ+QP,
//                                            INIT -> RTR -> RTS
//                                       <--  kAccept {qpn, psn, gid, ...}
//   INIT -> RTR -> RTS
//   kReady                                -->
//   Connect() returns                        Accept() returns
//                                     (or <-- kReject {reason})
//
// So when either side's call returns, both queue pairs are in RTS.

#include "verbs/ibverbs_provider.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "verbs/ibverbs_errors.h"
#include "verbs/tcp_channel.h"

namespace dreplay::verbs {
namespace {

// ---------------------------------------------------------------------------
// 1. Constants and the setup wire message.
// ---------------------------------------------------------------------------

// PSNs are 24-bit.
constexpr uint32_t kPsnMask = 0xffffff;
// Routed RoCE v2 needs a hop limit above 1; 64 is the usual IP default.
constexpr uint8_t kHopLimit = 64;
// The largest path MTU we ask for.
constexpr ibv_mtu kMaxPathMtu = IBV_MTU_4096;
// ibv_qp_attr::max_rd_atomic and max_dest_rd_atomic are uint8_t.
constexpr int kMaxRdAtomicField = std::numeric_limits<uint8_t>::max();
// Longest run of unsignalled send requests before one is signalled anyway,
// so the send queue can always be retired. The run is also capped at a
// quarter of the send queue (see IbverbsQueuePair::signal_every_).
constexpr int kMaxUnsignaledRun = 64;
// Completions taken from the CQ per ibv_poll_cq call.
constexpr int kPollBatch = 32;
// Largest application payload (Connect payload, Accept reply, Reject reason).
constexpr size_t kMaxPayloadBytes = 64 * 1024;
// How long Listener::Accept waits for a connected peer's hello before it
// drops the peer and keeps listening.
constexpr absl::Duration kHelloTimeout = absl::Seconds(5);
// Ack timeouts (4.096 us x 2^t) suited to a ~100 us round trip: 12 is 16.8 ms,
// 14 is 67 ms. Shorter ones retry spuriously under load on a long link.
constexpr int kMinLongLinkAckTimeout = 12;
// wr_id tag of receive requests (send requests carry their sequence number).
constexpr uint64_t kRecvTag = uint64_t{1} << 63;

constexpr uint32_t kSetupMagic = 0x44524942;  // "DRIB"
constexpr uint16_t kSetupVersion = 1;

enum class SetupKind : uint8_t { kHello = 1, kAccept = 2, kReject = 3, kReady = 4 };

// The fixed part of each setup frame, all integers big-endian. The payload
// (application payload, reply or reject reason) follows it in the frame.
struct SetupHeader {
  uint32_t magic;
  uint16_t version;
  uint8_t kind;  // SetupKind
  uint8_t mtu;   // the sender port's active_mtu (enum ibv_mtu)
  uint32_t qpn;
  uint32_t psn;
  uint8_t gid[16];
  uint16_t lid;
  uint8_t initiator_depth;      // READs/atomics this side may have in flight
  uint8_t responder_resources;  // ... and may serve for the peer
  uint32_t payload_length;
};
static_assert(sizeof(SetupHeader) == 40, "SetupHeader is a wire structure");
static_assert(std::is_trivially_copyable<SetupHeader>::value,
              "SetupHeader is copied with memcpy");
static_assert(sizeof(ibv_gid) == sizeof(SetupHeader::gid), "GID is 16 bytes");
constexpr size_t kMaxSetupFrameBytes = sizeof(SetupHeader) + kMaxPayloadBytes;

// What one side tells the other about its queue pair.
struct PeerInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  ibv_gid gid = {};
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  int initiator_depth = 0;
  int responder_resources = 0;
};

struct SetupMessage {
  SetupKind kind = SetupKind::kHello;
  PeerInfo info;
  std::string payload;
};

std::string EncodeSetup(const SetupMessage& m) {
  SetupHeader h;
  std::memset(&h, 0, sizeof(h));
  h.magic = htonl(kSetupMagic);
  h.version = htons(kSetupVersion);
  h.kind = static_cast<uint8_t>(m.kind);
  h.mtu = static_cast<uint8_t>(m.info.mtu);
  h.qpn = htonl(m.info.qpn);
  h.psn = htonl(m.info.psn);
  std::memcpy(h.gid, m.info.gid.raw, sizeof(h.gid));
  h.lid = htons(m.info.lid);
  h.initiator_depth = static_cast<uint8_t>(m.info.initiator_depth);
  h.responder_resources = static_cast<uint8_t>(m.info.responder_resources);
  h.payload_length = htonl(static_cast<uint32_t>(m.payload.size()));
  std::string out(sizeof(h) + m.payload.size(), '\0');
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), m.payload.data(), m.payload.size());
  return out;
}

// Parses and validates a setup frame from `peer`.
absl::StatusOr<SetupMessage> DecodeSetup(const std::string& frame,
                                         const std::string& peer) {
  if (frame.size() < sizeof(SetupHeader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup frame from ", peer, " has ", frame.size(),
                     " bytes, less than the ", sizeof(SetupHeader),
                     "-byte header"));
  }
  SetupHeader h;
  std::memcpy(&h, frame.data(), sizeof(h));
  if (ntohl(h.magic) != kSetupMagic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "setup frame from %s has bad magic 0x%08x (not a dreplay ibverbs peer)",
        peer, ntohl(h.magic)));
  }
  if (ntohs(h.version) != kSetupVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("setup frame from ", peer, " has version ",
                     ntohs(h.version), ", expected ", kSetupVersion));
  }
  if (h.kind < static_cast<uint8_t>(SetupKind::kHello) ||
      h.kind > static_cast<uint8_t>(SetupKind::kReady)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "setup frame from ", peer, " has unknown kind ", h.kind));
  }
  const size_t payload_length = ntohl(h.payload_length);
  if (payload_length != frame.size() - sizeof(h)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "setup frame from ", peer, " announces a ", payload_length,
        "-byte payload but carries ", frame.size() - sizeof(h)));
  }
  if (h.mtu < IBV_MTU_256 || h.mtu > IBV_MTU_4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "setup frame from ", peer, " has invalid MTU code ", h.mtu));
  }
  SetupMessage m;
  m.kind = static_cast<SetupKind>(h.kind);
  m.info.qpn = ntohl(h.qpn) & kPsnMask;
  m.info.psn = ntohl(h.psn) & kPsnMask;
  std::memcpy(m.info.gid.raw, h.gid, sizeof(h.gid));
  m.info.lid = ntohs(h.lid);
  m.info.mtu = static_cast<ibv_mtu>(h.mtu);
  m.info.initiator_depth = h.initiator_depth;
  m.info.responder_resources = h.responder_resources;
  m.payload = frame.substr(sizeof(h));
  return m;
}

std::string GidToString(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
  return text;
}

bool GidIsZero(const ibv_gid& gid) {
  for (uint8_t b : gid.raw) {
    if (b != 0) return false;
  }
  return true;
}

// ::ffff:a.b.c.d
bool GidIsIpv4Mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid.raw[i] != 0) return false;
  }
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

// fe80::/10
bool GidIsLinkLocal(const ibv_gid& gid) {
  return gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80;
}

int MtuBytes(ibv_mtu mtu) { return 128 << static_cast<int>(mtu); }

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

// ---------------------------------------------------------------------------
// 2. Device.
// ---------------------------------------------------------------------------

// An open device with its protection domain, port and GID. Shared (by
// shared_ptr) by the provider and everything made from it, so the PD and the
// context are released after the last QP and MR, whatever order the caller
// destroys things in. Constant after construction.
struct Device {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  std::string name;
  ibv_device_attr attr = {};
  int port = 1;
  ibv_port_attr port_attr = {};
  int gid_index = 0;
  ibv_gid gid = {};
  std::string gid_type;  // "RoCE v2", "RoCE v1", "IB"

  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device() {
    if (pd != nullptr) {
      const absl::Status s = IbvResultToStatus(ibv_dealloc_pd(pd), "ibv_dealloc_pd");
      LOG_IF(ERROR, !s.ok()) << name << ": " << s;
    }
    if (context != nullptr) {
      const absl::Status s =
          IbvResultToStatus(ibv_close_device(context), "ibv_close_device");
      LOG_IF(ERROR, !s.ok()) << name << ": " << s;
    }
  }

  bool is_ethernet() const {
    return port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  }
  bool has_atomics() const { return attr.atomic_cap != IBV_ATOMIC_NONE; }
  std::string Describe() const {
    return absl::StrCat(name, ":", port, " gid[", gid_index, "] ",
                        GidToString(gid), " (", gid_type, ")");
  }
};

// RAII for ibv_get_device_list.
class DeviceList {
 public:
  DeviceList() {
    errno = 0;
    list_ = ibv_get_device_list(&count_);
    saved_errno_ = errno;
    if (list_ == nullptr) count_ = 0;
  }
  ~DeviceList() {
    if (list_ != nullptr) ibv_free_device_list(list_);
  }
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;

  // Why there is nothing to open, or OK.
  absl::Status status() const {
    if (list_ == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "no RDMA device: ",
          IbvNullResultToStatus(saved_errno_, "ibv_get_device_list").message(),
          " (no kernel RDMA support?)"));
    }
    if (count_ == 0) {
      return absl::NotFoundError(
          "no RDMA device: libibverbs found 0 devices (for Soft-RoCE, run "
          "tools/softroce_setup.sh as root)");
    }
    return absl::OkStatus();
  }
  int size() const { return count_; }
  ibv_device* operator[](int i) const { return list_[i]; }

 private:
  ibv_device** list_ = nullptr;
  int count_ = 0;
  int saved_errno_ = 0;
};

// The GID type of entry `index`: ibv_query_gid_ex where the library and
// kernel have it, else sysfs (ports/<p>/gid_attrs/types/<i>). kNotFound for
// an empty entry.
absl::StatusOr<std::pair<ibv_gid, ibv_gid_type>> QueryGid(ibv_context* ctx,
                                                         const char* ibdev_path,
                                                         int port, int index) {
  ibv_gid_entry entry;
  std::memset(&entry, 0, sizeof(entry));
  const int rc = ibv_query_gid_ex(ctx, port, index, &entry, 0);
  if (rc == 0) {
    return std::make_pair(entry.gid, static_cast<ibv_gid_type>(entry.gid_type));
  }
  const int error_number = std::abs(rc);
  if (error_number == ENODATA || error_number == ENOENT) {
    return absl::NotFoundError(absl::StrCat("GID index ", index, " is empty"));
  }
  if (error_number != EOPNOTSUPP && error_number != ENOSYS) {
    return IbvResultToStatus(rc, absl::StrCat("ibv_query_gid_ex(", index, ")"));
  }
  // Older kernels: the plain query and the type from sysfs.
  ibv_gid gid;
  RETURN_IF_ERROR(IbvResultToStatus(ibv_query_gid(ctx, port, index, &gid),
                                    absl::StrCat("ibv_query_gid(", index, ")")));
  if (GidIsZero(gid)) {
    return absl::NotFoundError(absl::StrCat("GID index ", index, " is empty"));
  }
  ibv_gid_type type = IBV_GID_TYPE_IB;
  std::ifstream in(absl::StrCat(ibdev_path, "/ports/", port,
                                "/gid_attrs/types/", index));
  std::string text;
  if (in && std::getline(in, text)) {
    text = std::string(absl::StripAsciiWhitespace(text));
    if (text == "RoCE v2") {
      type = IBV_GID_TYPE_ROCE_V2;
    } else if (text == "IB/RoCE v1") {
      type = IBV_GID_TYPE_ROCE_V1;
    }
  }
  return std::make_pair(gid, type);
}

const char* GidTypeName(ibv_gid_type type, bool ethernet) {
  switch (type) {
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case IBV_GID_TYPE_IB:
      return ethernet ? "RoCE v1" : "IB";
  }
  return "unknown";
}

// Chooses the GID of device->port: the requested index, or automatically a
// RoCE v2 GID with an IPv4-mapped address, else a RoCE v2 global GID, else
// any RoCE v2 GID, else the first valid GID.
absl::Status ChooseGid(Device* device, const char* ibdev_path,
                       int requested_index) {
  const int table = device->port_attr.gid_tbl_len;
  const bool ethernet = device->is_ethernet();
  if (requested_index >= 0) {
    if (requested_index >= table) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gid_index ", requested_index, " is out of range: ", device->name,
          " port ", device->port, " has ", table, " GID entries"));
    }
    auto gid = QueryGid(device->context, ibdev_path, device->port,
                        requested_index);
    if (!gid.ok()) {
      return absl::NotFoundError(absl::StrCat(
          "gid_index ", requested_index, " on ", device->name, " port ",
          device->port, ": ", gid.status().message()));
    }
    device->gid_index = requested_index;
    device->gid = gid->first;
    device->gid_type = GidTypeName(gid->second, ethernet);
    return absl::OkStatus();
  }
  // Lower rank is better.
  int best_rank = std::numeric_limits<int>::max();
  for (int i = 0; i < table; ++i) {
    auto gid = QueryGid(device->context, ibdev_path, device->port, i);
    if (!gid.ok()) {
      if (!absl::IsNotFound(gid.status())) {
        VLOG(1) << device->name << ": " << gid.status();
      }
      continue;
    }
    if (GidIsZero(gid->first)) continue;
    const bool v2 = gid->second == IBV_GID_TYPE_ROCE_V2;
    int rank = 3;
    if (v2 && GidIsIpv4Mapped(gid->first)) {
      rank = 0;
    } else if (v2 && !GidIsLinkLocal(gid->first)) {
      rank = 1;
    } else if (v2) {
      rank = 2;
    }
    if (rank < best_rank) {
      best_rank = rank;
      device->gid_index = i;
      device->gid = gid->first;
      device->gid_type = GidTypeName(gid->second, ethernet);
    }
    if (rank == 0) break;
  }
  if (best_rank == std::numeric_limits<int>::max()) {
    return absl::NotFoundError(
        absl::StrCat(device->name, " port ", device->port,
                     " has no valid GID (is the network interface up and "
                     "does it have an IP address?)"));
  }
  if (ethernet && best_rank > 0) {
    LOG(WARNING) << device->name << ": no IPv4-mapped RoCE v2 GID; using "
                 << device->Describe();
  }
  return absl::OkStatus();
}

// Opens `dev`, checks the port and allocates the PD. kUnavailable when the
// port is not active (the caller may try another device).
absl::StatusOr<std::shared_ptr<Device>> OpenDevice(ibv_device* dev,
                                                   const ProviderOptions& options) {
  auto device = std::make_shared<Device>();
  device->name = ibv_get_device_name(dev);
  device->port = options.ib_port;
  // Verb names are built before the calls so that nothing runs between a
  // verb and the errno it leaves.
  const std::string open_verb = absl::StrCat("ibv_open_device(", device->name, ")");
  const std::string pd_verb = absl::StrCat("ibv_alloc_pd(", device->name, ")");
  ASSIGN_OR_RETURN(device->context, IbvCheckPointer(ibv_open_device(dev), open_verb));
  RETURN_IF_ERROR(IbvResultToStatus(
      ibv_query_device(device->context, &device->attr),
      absl::StrCat("ibv_query_device(", device->name, ")")));
  if (options.ib_port > device->attr.phys_port_cnt) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ib_port ", options.ib_port, " does not exist: ", device->name, " has ",
        static_cast<int>(device->attr.phys_port_cnt), " port(s)"));
  }
  RETURN_IF_ERROR(IbvResultToStatus(
      ibv_query_port(device->context, options.ib_port, &device->port_attr),
      absl::StrCat("ibv_query_port(", device->name, ", ", options.ib_port, ")")));
  if (device->port_attr.state != IBV_PORT_ACTIVE) {
    return absl::UnavailableError(absl::StrCat(
        device->name, " port ", options.ib_port, " is ",
        ibv_port_state_str(device->port_attr.state), ", not ACTIVE"));
  }
  RETURN_IF_ERROR(ChooseGid(device.get(), dev->ibdev_path, options.gid_index));
  ASSIGN_OR_RETURN(device->pd, IbvCheckPointer(ibv_alloc_pd(device->context), pd_verb));
  return device;
}

// ---------------------------------------------------------------------------
// 3. Memory regions.
// ---------------------------------------------------------------------------

constexpr uint32_t kAllAccess = kLocalWrite | kRemoteRead | kRemoteWrite | kRemoteAtomic;

// libibverbs requires LOCAL_WRITE whenever REMOTE_WRITE or REMOTE_ATOMIC is
// asked for, so those imply it here.
int ToIbvAccess(uint32_t access) {
  int flags = 0;
  if (access & kLocalWrite) flags |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  if (access & kRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteAtomic) flags |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
  return flags;
}

class IbverbsMemoryRegion : public MemoryRegion {
 public:
  IbverbsMemoryRegion(std::shared_ptr<Device> device, ibv_mr* mr, uint32_t access)
      : device_(std::move(device)), mr_(mr), access_(access) {}
  ~IbverbsMemoryRegion() override {
    const absl::Status s = IbvResultToStatus(ibv_dereg_mr(mr_), "ibv_dereg_mr");
    LOG_IF(ERROR, !s.ok()) << device_->name << ": " << s;
  }
  IbverbsMemoryRegion(const IbverbsMemoryRegion&) = delete;
  IbverbsMemoryRegion& operator=(const IbverbsMemoryRegion&) = delete;

  void* addr() const override { return mr_->addr; }
  size_t length() const override { return mr_->length; }
  uint32_t lkey() const override { return mr_->lkey; }
  uint32_t rkey() const override { return mr_->rkey; }
  uint32_t access() const override { return access_; }

 private:
  const std::shared_ptr<Device> device_;
  ibv_mr* const mr_;
  const uint32_t access_;
};

// ---------------------------------------------------------------------------
// 4. Queue pairs.
// ---------------------------------------------------------------------------

// Bookkeeping for one posted send request, indexed by sequence number.
struct SendSlot {
  uint64_t user_wr_id = 0;
  Opcode opcode = Opcode::kWrite;
  bool user_signaled = true;
  uint32_t length = 0;
};

class IbverbsQueuePair : public QueuePair {
 public:
  // Creates the CQ and the QP (moved to INIT). Call Connect() next.
  static absl::StatusOr<std::unique_ptr<IbverbsQueuePair>> Create(
      std::shared_ptr<Device> device, const QueuePairOptions& options);

  ~IbverbsQueuePair() override;

  // What this side sends in its setup frame.
  PeerInfo local_info() const;

  // INIT -> RTR -> RTS against `remote`, negotiating max_rd_atomic and MTU.
  absl::Status Connect(const PeerInfo& remote);

  absl::Status PostSend(absl::Span<const WorkRequest> wrs) override;
  absl::Status PostRecv(absl::Span<const RecvRequest> rrs) override;
  int Poll(absl::Span<Completion> out) override;
  QpState state() const override { return state_; }
  absl::Status error() const override { return error_; }
  int max_send_wr() const override { return max_send_wr_; }
  int max_rd_atomic() const override { return max_rd_atomic_; }
  uint32_t max_inline_data() const override { return max_inline_data_; }
  std::string Describe() const override;

 private:
  IbverbsQueuePair(std::shared_ptr<Device> device, const QueuePairOptions& options);

  absl::Status ModifyToInit();
  absl::Status ValidateWorkRequest(const WorkRequest& wr) const;
  // Converts one work completion; false when it yields nothing for the
  // caller (a forced signal, or a stale completion after the error).
  bool Convert(const ibv_wc& wc, Completion* out);
  // Moves the queue pair to the error state with `why` (first error wins)
  // and queues kFlushed completions for everything outstanding.
  void EnterError(const absl::Status& why);
  void QueueFlushed(uint64_t user_wr_id, Opcode opcode);
  std::string WhatFailed(Opcode opcode, uint64_t user_wr_id) const;

  // Constant after construction.
  const std::shared_ptr<Device> device_;
  const QueuePairOptions options_;
  const int max_send_wr_;
  const int max_recv_wr_;
  const int signal_every_;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t max_inline_data_ = 0;
  uint32_t local_psn_ = 0;
  // Set by Connect().
  PeerInfo remote_;
  int max_rd_atomic_ = 0;
  ibv_mtu path_mtu_ = IBV_MTU_1024;

  // Datapath state (one thread at a time, per verbs.h).
  QpState state_ = QpState::kReady;
  absl::Status error_;
  std::vector<SendSlot> send_slots_;      // ring of max_send_wr_
  uint64_t send_posted_ = 0;              // next send sequence number
  uint64_t send_retired_ = 0;             // all below are complete
  int unsignaled_run_ = 0;
  std::vector<uint64_t> recv_slots_;      // ring of user wr_ids
  uint64_t recv_posted_ = 0;
  uint64_t recv_retired_ = 0;
  std::vector<ibv_send_wr> send_scratch_;  // pre-allocated WR chain
  std::vector<ibv_sge> sge_scratch_;
  std::vector<ibv_recv_wr> recv_scratch_;
  std::deque<Completion> flushed_;  // synthesised kFlushed completions
};

IbverbsQueuePair::IbverbsQueuePair(std::shared_ptr<Device> device,
                                   const QueuePairOptions& options)
    : device_(std::move(device)),
      options_(options),
      max_send_wr_(options.max_send_wr),
      max_recv_wr_(options.max_recv_wr),
      signal_every_(std::clamp(options.max_send_wr / 4, 1, kMaxUnsignaledRun)),
      send_slots_(options.max_send_wr),
      recv_slots_(std::max(options.max_recv_wr, 1)),
      send_scratch_(options.max_send_wr),
      sge_scratch_(options.max_send_wr),
      recv_scratch_(std::max(options.max_recv_wr, 1)) {
  static_assert(kMaxUnsignaledRun >= 1, "at least every request may be signalled");
  CHECK_LT(signal_every_, max_send_wr_ + 1)
      << "a forced signal must fall within one send queue";
}

absl::StatusOr<std::unique_ptr<IbverbsQueuePair>> IbverbsQueuePair::Create(
    std::shared_ptr<Device> device, const QueuePairOptions& options) {
  const ibv_device_attr& attr = device->attr;
  if (options.max_send_wr > attr.max_qp_wr || options.max_recv_wr > attr.max_qp_wr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QueuePairOptions max_send_wr ", options.max_send_wr, " / max_recv_wr ",
        options.max_recv_wr, " exceed ", device->name, "'s max_qp_wr ",
        attr.max_qp_wr));
  }
  const int cqe = options.max_send_wr + std::max(options.max_recv_wr, 1);
  if (cqe > attr.max_cqe) {
    return absl::InvalidArgumentError(
        absl::StrCat("a CQ of ", cqe, " entries (max_send_wr + max_recv_wr) exceeds ",
                     device->name, "'s max_cqe ", attr.max_cqe));
  }
  if (options.ack_timeout == 0) {
    LOG(WARNING) << "ack_timeout 0 means no timeout: a peer that dies is never "
                    "detected by this queue pair";
  } else if (options.ack_timeout < kMinLongLinkAckTimeout) {
    LOG(WARNING) << "ack_timeout " << options.ack_timeout << " ("
                 << 4.096 * (1 << options.ack_timeout)
                 << " us) is short for a long link; 12 to 14 is recommended";
  }
  std::unique_ptr<IbverbsQueuePair> qp(new IbverbsQueuePair(device, options));
  ASSIGN_OR_RETURN(qp->cq_, IbvCheckPointer(ibv_create_cq(device->context, cqe,
                                                          nullptr, nullptr, 0),
                                            "ibv_create_cq"));
  // Ask for the inline size the options name; a device that cannot give it
  // fails with EINVAL, so halve it until it fits (0 always does).
  uint32_t inline_wanted = options.max_inline_data;
  for (;;) {
    ibv_qp_init_attr init;
    std::memset(&init, 0, sizeof(init));
    init.send_cq = qp->cq_;
    init.recv_cq = qp->cq_;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 0;
    init.cap.max_send_wr = options.max_send_wr;
    init.cap.max_recv_wr = std::max(options.max_recv_wr, 1);
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = inline_wanted;
    errno = 0;
    qp->qp_ = ibv_create_qp(device->pd, &init);
    if (qp->qp_ != nullptr) {
      // The created QP's capabilities, which may exceed the request.
      qp->max_inline_data_ = init.cap.max_inline_data;
      break;
    }
    const int error_number = errno;
    if (error_number != EINVAL || inline_wanted == 0) {
      return IbvNullResultToStatus(error_number, "ibv_create_qp(RC)");
    }
    inline_wanted /= 2;
    LOG(WARNING) << device->name << ": ibv_create_qp refused max_inline_data "
                 << inline_wanted * 2 << "; trying " << inline_wanted;
  }
  // A random initial PSN, so that packets of an old connection that reused
  // this QPN cannot be taken for this one's.
  absl::BitGen gen;
  qp->local_psn_ = absl::Uniform<uint32_t>(gen, 0, kPsnMask + 1);
  RETURN_IF_ERROR(qp->ModifyToInit());
  return qp;
}

IbverbsQueuePair::~IbverbsQueuePair() {
  // Reverse order of creation: QP, then CQ; MRs, PD and context go with the
  // last reference to the Device.
  if (qp_ != nullptr) {
    const absl::Status s = IbvResultToStatus(ibv_destroy_qp(qp_), "ibv_destroy_qp");
    LOG_IF(ERROR, !s.ok()) << Describe() << ": " << s;
  }
  if (cq_ != nullptr) {
    const absl::Status s = IbvResultToStatus(ibv_destroy_cq(cq_), "ibv_destroy_cq");
    LOG_IF(ERROR, !s.ok()) << device_->name << ": " << s;
  }
}

absl::Status IbverbsQueuePair::ModifyToInit() {
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = device_->port;
  // The QP allows every remote operation; each memory region's own access
  // flags decide what a peer may actually do.
  attr.qp_access_flags =
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
      (device_->has_atomics() ? IBV_ACCESS_REMOTE_ATOMIC : 0);
  return IbvResultToStatus(
      ibv_modify_qp(qp_, &attr,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                        IBV_QP_ACCESS_FLAGS),
      "ibv_modify_qp(RESET->INIT)");
}

PeerInfo IbverbsQueuePair::local_info() const {
  PeerInfo info;
  info.qpn = qp_->qp_num;
  info.psn = local_psn_;
  info.gid = device_->gid;
  info.lid = device_->port_attr.lid;
  info.mtu = device_->port_attr.active_mtu;
  const int wanted = std::min(options_.max_rd_atomic, kMaxRdAtomicField);
  info.initiator_depth = std::min(wanted, device_->attr.max_qp_init_rd_atom);
  info.responder_resources = std::min(wanted, device_->attr.max_qp_rd_atom);
  return info;
}

absl::Status IbverbsQueuePair::Connect(const PeerInfo& remote) {
  remote_ = remote;
  const PeerInfo local = local_info();
  // Our READs/atomics in flight may not exceed what the peer serves; we
  // serve what we can, which covers the peer's (equally clipped) depth.
  max_rd_atomic_ = std::min(local.initiator_depth, remote.responder_resources);
  path_mtu_ = std::min({device_->port_attr.active_mtu, remote.mtu, kMaxPathMtu});

  ibv_qp_attr rtr;
  std::memset(&rtr, 0, sizeof(rtr));
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = path_mtu_;
  rtr.dest_qp_num = remote.qpn;
  rtr.rq_psn = remote.psn;
  rtr.max_dest_rd_atomic = static_cast<uint8_t>(local.responder_resources);
  rtr.min_rnr_timer = static_cast<uint8_t>(options_.min_rnr_timer);
  rtr.ah_attr.dlid = remote.lid;
  rtr.ah_attr.sl = 0;
  rtr.ah_attr.src_path_bits = 0;
  rtr.ah_attr.port_num = device_->port;
  // RoCE always routes by GID (a GRH); InfiniBand only across subnets or
  // when the peer has no LID.
  if (device_->is_ethernet() || remote.lid == 0) {
    if (GidIsZero(remote.gid)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "peer qpn ", remote.qpn, " sent an empty GID, which RoCE cannot route"));
    }
    rtr.ah_attr.is_global = 1;
    rtr.ah_attr.grh.dgid = remote.gid;
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_->gid_index);
    rtr.ah_attr.grh.hop_limit = kHopLimit;
    rtr.ah_attr.grh.traffic_class = 0;
    rtr.ah_attr.grh.flow_label = 0;
  }
  RETURN_IF_ERROR(IbvResultToStatus(
      ibv_modify_qp(qp_, &rtr,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                        IBV_QP_MIN_RNR_TIMER),
      "ibv_modify_qp(INIT->RTR)"));

  ibv_qp_attr rts;
  std::memset(&rts, 0, sizeof(rts));
  rts.qp_state = IBV_QPS_RTS;
  rts.sq_psn = local_psn_;
  rts.timeout = static_cast<uint8_t>(options_.ack_timeout);
  rts.retry_cnt = static_cast<uint8_t>(options_.retry_cnt);
  rts.rnr_retry = static_cast<uint8_t>(options_.rnr_retry);
  rts.max_rd_atomic = static_cast<uint8_t>(max_rd_atomic_);
  RETURN_IF_ERROR(IbvResultToStatus(
      ibv_modify_qp(qp_, &rts,
                    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                        IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC),
      "ibv_modify_qp(RTR->RTS)"));
  VLOG(1) << "connected " << Describe() << ", path MTU " << MtuBytes(path_mtu_)
          << ", max_rd_atomic " << max_rd_atomic_ << ", max_inline_data "
          << max_inline_data_;
  return absl::OkStatus();
}

std::string IbverbsQueuePair::Describe() const {
  return absl::StrFormat("ibverbs %s qpn 0x%x <-> %s qpn 0x%x", device_->Describe(),
                         qp_ != nullptr ? qp_->qp_num : 0, GidToString(remote_.gid),
                         remote_.qpn);
}

std::string IbverbsQueuePair::WhatFailed(Opcode opcode, uint64_t user_wr_id) const {
  return absl::StrFormat("%s wr_id %d on %s qpn 0x%x", OpcodeName(opcode),
                         user_wr_id, device_->name, qp_->qp_num);
}

absl::Status IbverbsQueuePair::ValidateWorkRequest(const WorkRequest& wr) const {
  switch (wr.opcode) {
    case Opcode::kWrite:
    case Opcode::kWriteWithImm:
    case Opcode::kRead:
      if (wr.length > device_->port_attr.max_msg_sz) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpcodeName(wr.opcode), " wr_id ", wr.wr_id, ": length ", wr.length,
            " exceeds ", device_->name, "'s max_msg_sz ",
            device_->port_attr.max_msg_sz));
      }
      break;
    case Opcode::kFetchAdd:
    case Opcode::kCompareSwap:
      if (wr.length != sizeof(uint64_t)) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpcodeName(wr.opcode), " wr_id ", wr.wr_id, ": length ", wr.length,
            " must be 8"));
      }
      if (!device_->has_atomics()) {
        return absl::UnimplementedError(absl::StrCat(
            OpcodeName(wr.opcode), ": ", device_->name,
            " has no atomic support (atomic_cap NONE)"));
      }
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "wr_id ", wr.wr_id, ": opcode ", static_cast<int>(wr.opcode),
          " cannot be posted to a send queue"));
  }
  if (wr.local == nullptr && wr.length > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        OpcodeName(wr.opcode), " wr_id ", wr.wr_id, ": null local region"));
  }
  const bool reads_or_atomic = wr.opcode == Opcode::kRead ||
                               wr.opcode == Opcode::kFetchAdd ||
                               wr.opcode == Opcode::kCompareSwap;
  if (reads_or_atomic && max_rd_atomic_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        OpcodeName(wr.opcode), ": this connection negotiated max_rd_atomic 0 "
        "(the peer serves no READs or atomics)"));
  }
  return absl::OkStatus();
}

void IbverbsQueuePair::QueueFlushed(uint64_t user_wr_id, Opcode opcode) {
  Completion c;
  c.wr_id = user_wr_id;
  c.opcode = opcode;
  c.status = WcStatus::kFlushed;
  c.detail = absl::StrCat(WhatFailed(opcode, user_wr_id),
                          ": flushed, queue pair in error state (",
                          error_.message(), ")");
  flushed_.push_back(std::move(c));
}

void IbverbsQueuePair::EnterError(const absl::Status& why) {
  if (state_ == QpState::kError) return;
  state_ = QpState::kError;
  error_ = why;
  LOG(WARNING) << Describe() << ": queue pair in error state: " << why;
  // Everything still outstanding completes with kFlushed, in posting order,
  // whatever the device does with unsignalled requests; the device's own
  // flush completions for these are dropped as stale.
  for (; send_retired_ < send_posted_; ++send_retired_) {
    const SendSlot& slot = send_slots_[send_retired_ % max_send_wr_];
    QueueFlushed(slot.user_wr_id, slot.opcode);
  }
  for (; recv_retired_ < recv_posted_; ++recv_retired_) {
    QueueFlushed(recv_slots_[recv_retired_ % recv_slots_.size()], Opcode::kRecv);
  }
  // Make sure the device stops too (it already has after an error
  // completion; not after a CQ failure).
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_ERR;
  const absl::Status s = IbvResultToStatus(ibv_modify_qp(qp_, &attr, IBV_QP_STATE),
                                           "ibv_modify_qp(->ERR)");
  LOG_IF(WARNING, !s.ok()) << Describe() << ": " << s;
}

absl::Status IbverbsQueuePair::PostSend(absl::Span<const WorkRequest> wrs) {
  if (wrs.empty()) return absl::OkStatus();
  for (const WorkRequest& wr : wrs) RETURN_IF_ERROR(ValidateWorkRequest(wr));
  if (state_ == QpState::kError) {
    for (const WorkRequest& wr : wrs) QueueFlushed(wr.wr_id, wr.opcode);
    return absl::OkStatus();
  }
  const uint64_t outstanding = send_posted_ - send_retired_;
  if (outstanding + wrs.size() > static_cast<uint64_t>(max_send_wr_)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "send queue full: ", outstanding, " outstanding + ", wrs.size(),
        " new > max_send_wr ", max_send_wr_));
  }
  // Build the whole span as one chain: one ibv_post_send, one doorbell.
  const size_t n = wrs.size();
  for (size_t i = 0; i < n; ++i) {
    const WorkRequest& wr = wrs[i];
    const uint64_t seq = send_posted_ + i;
    bool signaled = wr.signaled;
    if (!signaled && unsignaled_run_ + 1 >= signal_every_) signaled = true;
    unsignaled_run_ = signaled ? 0 : unsignaled_run_ + 1;
    send_slots_[seq % max_send_wr_] = SendSlot{wr.wr_id, wr.opcode, wr.signaled, wr.length};

    ibv_sge& sge = sge_scratch_[i];
    sge.addr = reinterpret_cast<uintptr_t>(wr.local_addr);
    sge.length = wr.length;
    sge.lkey = wr.local != nullptr ? wr.local->lkey() : 0;
    ibv_send_wr& w = send_scratch_[i];
    std::memset(&w, 0, sizeof(w));
    w.wr_id = seq;
    w.next = i + 1 < n ? &send_scratch_[i + 1] : nullptr;
    w.sg_list = &sge;
    w.num_sge = wr.length > 0 ? 1 : 0;
    w.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    switch (wr.opcode) {
      case Opcode::kWrite:
      case Opcode::kWriteWithImm:
        w.opcode = wr.opcode == Opcode::kWrite ? IBV_WR_RDMA_WRITE
                                               : IBV_WR_RDMA_WRITE_WITH_IMM;
        w.imm_data = htonl(wr.imm_data);
        w.wr.rdma.remote_addr = wr.remote_addr;
        w.wr.rdma.rkey = wr.rkey;
        // Small writes are copied into the WQE: no DMA read of the buffer.
        if (wr.length > 0 && wr.length <= max_inline_data_) {
          w.send_flags |= IBV_SEND_INLINE;
        }
        break;
      case Opcode::kRead:
        w.opcode = IBV_WR_RDMA_READ;
        w.wr.rdma.remote_addr = wr.remote_addr;
        w.wr.rdma.rkey = wr.rkey;
        break;
      case Opcode::kFetchAdd:
        w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        w.wr.atomic.remote_addr = wr.remote_addr;
        w.wr.atomic.rkey = wr.rkey;
        w.wr.atomic.compare_add = wr.compare_add;
        break;
      case Opcode::kCompareSwap:
        w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
        w.wr.atomic.remote_addr = wr.remote_addr;
        w.wr.atomic.rkey = wr.rkey;
        w.wr.atomic.compare_add = wr.compare_add;
        w.wr.atomic.swap = wr.swap;
        break;
      case Opcode::kRecv:
        LOG(FATAL) << "ValidateWorkRequest let a kRecv through";
    }
  }
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp_, send_scratch_.data(), &bad);
  if (rc == 0) {
    send_posted_ += n;
    return absl::OkStatus();
  }
  // The requests before `bad` are on the queue; the rest are not.
  const size_t posted =
      bad != nullptr ? static_cast<size_t>(bad - send_scratch_.data()) : 0;
  send_posted_ += posted;
  // The next request is signalled, whatever the run counter says.
  unsignaled_run_ = signal_every_;
  return IbvResultToStatus(
      rc, absl::StrCat("ibv_post_send on ", device_->name, " qpn ", qp_->qp_num,
                       " (", posted, " of ", n, " requests posted)"));
}

absl::Status IbverbsQueuePair::PostRecv(absl::Span<const RecvRequest> rrs) {
  if (rrs.empty()) return absl::OkStatus();
  if (state_ == QpState::kError) {
    for (const RecvRequest& rr : rrs) QueueFlushed(rr.wr_id, Opcode::kRecv);
    return absl::OkStatus();
  }
  const uint64_t outstanding = recv_posted_ - recv_retired_;
  if (outstanding + rrs.size() > static_cast<uint64_t>(max_recv_wr_)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "receive queue full: ", outstanding, " outstanding + ", rrs.size(),
        " new > max_recv_wr ", max_recv_wr_));
  }
  const size_t n = rrs.size();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t seq = recv_posted_ + i;
    recv_slots_[seq % recv_slots_.size()] = rrs[i].wr_id;
    ibv_recv_wr& w = recv_scratch_[i];
    std::memset(&w, 0, sizeof(w));
    w.wr_id = seq | kRecvTag;
    w.next = i + 1 < n ? &recv_scratch_[i + 1] : nullptr;
    w.sg_list = nullptr;  // WRITE_WITH_IMM data lands at its remote address
    w.num_sge = 0;
  }
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_recv(qp_, recv_scratch_.data(), &bad);
  if (rc == 0) {
    recv_posted_ += n;
    return absl::OkStatus();
  }
  const size_t posted =
      bad != nullptr ? static_cast<size_t>(bad - recv_scratch_.data()) : 0;
  recv_posted_ += posted;
  return IbvResultToStatus(
      rc, absl::StrCat("ibv_post_recv on ", device_->name, " qpn ", qp_->qp_num,
                       " (", posted, " of ", n, " requests posted)"));
}

bool IbverbsQueuePair::Convert(const ibv_wc& wc, Completion* out) {
  const bool failed = wc.status != IBV_WC_SUCCESS;
  if (wc.wr_id & kRecvTag) {
    const uint64_t seq = wc.wr_id & ~kRecvTag;
    if (seq < recv_retired_ || seq >= recv_posted_) return false;  // stale
    recv_retired_ = seq + 1;
    out->wr_id = recv_slots_[seq % recv_slots_.size()];
    out->opcode = Opcode::kRecv;
    out->status = FromIbvWcStatus(wc.status);
    out->byte_len = wc.byte_len;
    out->imm_data = (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
    out->detail.clear();
  } else {
    const uint64_t seq = wc.wr_id;
    if (seq < send_retired_ || seq >= send_posted_) return false;  // stale
    // RC completes in order: every unsignalled request before this one has
    // completed successfully.
    send_retired_ = seq + 1;
    const SendSlot& slot = send_slots_[seq % max_send_wr_];
    if (!failed && !slot.user_signaled) return false;  // a forced signal
    out->wr_id = slot.user_wr_id;
    out->opcode = slot.opcode;
    out->status = FromIbvWcStatus(wc.status);
    out->byte_len = slot.opcode == Opcode::kRead ? wc.byte_len : slot.length;
    out->imm_data = 0;
    out->detail.clear();
  }
  if (failed) {
    out->detail = WcFailureDetail(WhatFailed(out->opcode, out->wr_id), wc.status,
                                  wc.vendor_err);
    EnterError(out->ToStatus());
  }
  return true;
}

int IbverbsQueuePair::Poll(absl::Span<Completion> out) {
  size_t n = 0;
  ibv_wc wcs[kPollBatch];
  while (n < out.size()) {
    const int want = static_cast<int>(std::min<size_t>(kPollBatch, out.size() - n));
    errno = 0;
    const int rc = ibv_poll_cq(cq_, want, wcs);
    const absl::StatusOr<int> got = IbvCountToStatus(rc, errno, "ibv_poll_cq");
    if (!got.ok()) {
      // The CQ itself failed: nothing more will complete, so the queue pair
      // is dead; its outstanding requests are flushed.
      EnterError(absl::InternalError(absl::StrCat(Describe(), ": ", got.status().message())));
      break;
    }
    for (int i = 0; i < *got; ++i) {
      if (Convert(wcs[i], &out[n])) ++n;
    }
    if (*got < want) break;
  }
  while (n < out.size() && !flushed_.empty()) {
    out[n++] = std::move(flushed_.front());
    flushed_.pop_front();
  }
  return static_cast<int>(n);
}

// ---------------------------------------------------------------------------
// 5. Connection setup.
// ---------------------------------------------------------------------------

absl::Status CheckPayload(const std::string& payload, const char* what) {
  if (payload.size() > kMaxPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " of ", payload.size(), " bytes exceeds the limit of ",
        kMaxPayloadBytes));
  }
  return absl::OkStatus();
}

class IbverbsPendingConnection : public PendingConnection {
 public:
  IbverbsPendingConnection(std::shared_ptr<Device> device,
                           std::unique_ptr<TcpConnection> channel, PeerInfo remote,
                           std::string payload)
      : device_(std::move(device)),
        channel_(std::move(channel)),
        remote_(remote),
        payload_(std::move(payload)) {}

  ~IbverbsPendingConnection() override {
    if (!answered_) Reject("the listener dropped the connection unanswered");
  }

  const std::string& payload() const override { return payload_; }
  std::string peer() const override { return channel_->peer(); }

  absl::StatusOr<std::unique_ptr<QueuePair>> Accept(
      const std::string& reply, const QueuePairOptions& options) override {
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
    answered_ = true;
    const absl::Time deadline = absl::Now() + options.connect_timeout;
    auto qp = IbverbsQueuePair::Create(device_, options);
    if (qp.ok()) {
      status = (*qp)->Connect(remote_);
    } else {
      status = qp.status();
    }
    if (!status.ok()) {
      SendReject(absl::StrCat("listener could not create its queue pair: ",
                              status.message()));
      return status;
    }
    SetupMessage accept;
    accept.kind = SetupKind::kAccept;
    accept.info = (*qp)->local_info();
    accept.payload = reply;
    RETURN_IF_ERROR(channel_->SendFrame(EncodeSetup(accept), deadline));
    // Wait for the peer's kReady: then its QP is in RTS too.
    auto frame = channel_->ReceiveFrame(kMaxSetupFrameBytes, deadline);
    if (!frame.ok()) {
      return absl::Status(
          absl::IsDeadlineExceeded(frame.status()) ? absl::StatusCode::kDeadlineExceeded
                                                   : absl::StatusCode::kUnavailable,
          absl::StrCat("peer ", peer(), " went away during setup: ",
                       frame.status().message()));
    }
    ASSIGN_OR_RETURN(SetupMessage ready, DecodeSetup(*frame, peer()));
    if (ready.kind != SetupKind::kReady) {
      return absl::UnavailableError(absl::StrCat(
          "peer ", peer(), " could not bring up its queue pair: ", ready.payload));
    }
    return std::unique_ptr<QueuePair>(std::move(*qp));
  }

  void Reject(const std::string& reason) override {
    if (answered_) return;
    answered_ = true;
    SendReject(reason);
  }

 private:
  void SendReject(const std::string& reason) {
    SetupMessage reject;
    reject.kind = SetupKind::kReject;
    reject.payload = reason.substr(0, kMaxPayloadBytes);
    const absl::Status s = channel_->SendFrame(
        EncodeSetup(reject), absl::Now() + kHelloTimeout);
    LOG_IF(WARNING, !s.ok()) << "rejecting " << peer() << ": " << s;
  }

  const std::shared_ptr<Device> device_;
  const std::unique_ptr<TcpConnection> channel_;
  const PeerInfo remote_;
  const std::string payload_;
  bool answered_ = false;
};

class IbverbsListener : public Listener {
 public:
  IbverbsListener(std::shared_ptr<Device> device, std::unique_ptr<TcpListenSocket> socket)
      : device_(std::move(device)), socket_(std::move(socket)) {}

  uint16_t port() const override { return socket_->port(); }
  std::string host() const override { return socket_->host(); }

  absl::StatusOr<std::unique_ptr<PendingConnection>> Accept(
      absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      ASSIGN_OR_RETURN(std::unique_ptr<TcpConnection> channel,
                       socket_->Accept(deadline));
      // A peer that has connected gets kHelloTimeout to say hello, even if
      // that runs past `deadline`: dropping a slow but honest peer would be
      // worse than returning a little late.
      auto frame = channel->ReceiveFrame(kMaxSetupFrameBytes,
                                         absl::Now() + kHelloTimeout,
                                         socket_->cancel_fd());
      if (absl::IsCancelled(frame.status())) return frame.status();
      absl::StatusOr<SetupMessage> hello =
          frame.ok() ? DecodeSetup(*frame, channel->peer()) : frame.status();
      if (hello.ok() && hello->kind != SetupKind::kHello) {
        hello = absl::InvalidArgumentError(absl::StrCat(
            "peer ", channel->peer(), " opened with setup kind ",
            static_cast<int>(hello->kind), " instead of a hello"));
      }
      if (!hello.ok()) {
        LOG(WARNING) << "listener " << host() << ":" << port()
                     << ": ignoring peer " << channel->peer() << ": "
                     << hello.status();
        continue;
      }
      return std::unique_ptr<PendingConnection>(new IbverbsPendingConnection(
          device_, std::move(channel), hello->info, std::move(hello->payload)));
    }
  }

  void Shutdown() override { socket_->Shutdown(); }

 private:
  const std::shared_ptr<Device> device_;
  const std::unique_ptr<TcpListenSocket> socket_;
};

// ---------------------------------------------------------------------------
// 6. The provider.
// ---------------------------------------------------------------------------

class IbverbsProvider : public Provider {
 public:
  explicit IbverbsProvider(std::shared_ptr<Device> device) : device_(std::move(device)) {}

  std::string name() const override { return "ibverbs"; }

  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(
      void* addr, size_t length, uint32_t access) override {
    if (addr == nullptr || length == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "RegisterMemory: null or empty buffer (addr %p, length %d)", addr, length));
    }
    if ((access & ~kAllAccess) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "RegisterMemory: unknown access flags 0x%x", access & ~kAllAccess));
    }
    if ((access & kRemoteAtomic) && !device_->has_atomics()) {
      return absl::UnimplementedError(absl::StrCat(
          "RegisterMemory: kRemoteAtomic asked, but ", device_->name,
          " has no atomic support (atomic_cap NONE)"));
    }
    if (length > device_->attr.max_mr_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RegisterMemory: length ", length, " exceeds ", device_->name,
          "'s max_mr_size ", device_->attr.max_mr_size));
    }
    const std::string verb = absl::StrCat("ibv_reg_mr(", length, " bytes)");
    ASSIGN_OR_RETURN(ibv_mr * mr,
                     IbvCheckPointer(ibv_reg_mr(device_->pd, addr, length,
                                                ToIbvAccess(access)),
                                     verb));
    return std::unique_ptr<MemoryRegion>(new IbverbsMemoryRegion(device_, mr, access));
  }

  absl::StatusOr<std::unique_ptr<Listener>> Listen(const std::string& host,
                                                   uint16_t port) override {
    ASSIGN_OR_RETURN(std::unique_ptr<TcpListenSocket> socket,
                     TcpListenSocket::Listen(host, port));
    return std::unique_ptr<Listener>(new IbverbsListener(device_, std::move(socket)));
  }

  absl::StatusOr<Connection> Connect(const std::string& host, uint16_t port,
                                     const std::string& payload,
                                     const QueuePairOptions& options) override {
    RETURN_IF_ERROR(options.Validate());
    RETURN_IF_ERROR(SoftProviderOnly(options));
    RETURN_IF_ERROR(CheckPayload(payload, "Connect payload"));
    const absl::Time deadline = absl::Now() + options.connect_timeout;
    ASSIGN_OR_RETURN(std::unique_ptr<TcpConnection> channel,
                     TcpConnection::Connect(host, port, deadline));
    ASSIGN_OR_RETURN(std::unique_ptr<IbverbsQueuePair> qp,
                     IbverbsQueuePair::Create(device_, options));
    SetupMessage hello;
    hello.kind = SetupKind::kHello;
    hello.info = qp->local_info();
    hello.payload = payload;
    RETURN_IF_ERROR(channel->SendFrame(EncodeSetup(hello), deadline));
    auto frame = channel->ReceiveFrame(kMaxSetupFrameBytes, deadline);
    if (!frame.ok()) {
      if (absl::IsDeadlineExceeded(frame.status())) {
        return absl::DeadlineExceededError(absl::StrCat(
            "connect to ", channel->peer(), ": no answer within ",
            absl::FormatDuration(options.connect_timeout)));
      }
      return absl::UnavailableError(absl::StrCat(
          "connect to ", channel->peer(), ": ", frame.status().message()));
    }
    auto answer = DecodeSetup(*frame, channel->peer());
    if (!answer.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "connect to ", channel->peer(), ": ", answer.status().message()));
    }
    if (answer->kind == SetupKind::kReject) {
      return absl::PermissionDeniedError(absl::StrCat(
          "connection to ", channel->peer(), " rejected: ", answer->payload));
    }
    if (answer->kind != SetupKind::kAccept) {
      return absl::UnavailableError(absl::StrCat(
          "connect to ", channel->peer(), ": unexpected setup kind ",
          static_cast<int>(answer->kind)));
    }
    const absl::Status up = qp->Connect(answer->info);
    SetupMessage ready;
    ready.kind = up.ok() ? SetupKind::kReady : SetupKind::kReject;
    ready.payload = up.ok() ? "" : std::string(up.message());
    const absl::Status sent = channel->SendFrame(EncodeSetup(ready), deadline);
    RETURN_IF_ERROR(up);
    RETURN_IF_ERROR(sent);
    return Connection{std::move(qp), std::move(answer->payload)};
  }

 private:
  const std::shared_ptr<Device> device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Provider>> CreateIbverbsProvider(
    const ProviderOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  DeviceList devices;
  RETURN_IF_ERROR(devices.status());
  std::vector<std::string> names;
  std::vector<std::string> skipped;
  for (int i = 0; i < devices.size(); ++i) {
    const std::string name = ibv_get_device_name(devices[i]);
    names.push_back(name);
    if (!options.ib_device.empty() && name != options.ib_device) continue;
    absl::StatusOr<std::shared_ptr<Device>> device = OpenDevice(devices[i], options);
    if (!device.ok()) {
      // A named device's error is final; without a name, try the next one.
      if (!options.ib_device.empty()) return device.status();
      skipped.push_back(std::string(device.status().message()));
      continue;
    }
    LOG(INFO) << "ibverbs provider on " << (*device)->Describe() << ", active MTU "
              << MtuBytes((*device)->port_attr.active_mtu) << ", max_qp_rd_atom "
              << (*device)->attr.max_qp_rd_atom << ", atomics "
              << ((*device)->has_atomics() ? "yes" : "no");
    return std::unique_ptr<Provider>(new IbverbsProvider(std::move(*device)));
  }
  if (!options.ib_device.empty()) {
    return absl::NotFoundError(absl::StrCat("RDMA device \"", options.ib_device,
                                            "\" not found; devices: ",
                                            absl::StrJoin(names, ", ")));
  }
  return absl::NotFoundError(absl::StrCat("no usable RDMA device with port ",
                                          options.ib_port, " active: ",
                                          absl::StrJoin(skipped, "; ")));
}

bool IbverbsDeviceAvailable(std::string* why) {
  DeviceList devices;
  const absl::Status listed = devices.status();
  if (!listed.ok()) {
    if (why != nullptr) *why = std::string(listed.message());
    return false;
  }
  std::vector<std::string> usable;
  std::vector<std::string> problems;
  for (int i = 0; i < devices.size(); ++i) {
    const char* name = ibv_get_device_name(devices[i]);
    errno = 0;
    ibv_context* context = ibv_open_device(devices[i]);
    if (context == nullptr) {
      problems.push_back(std::string(
          IbvNullResultToStatus(errno, absl::StrCat("ibv_open_device(", name, ")"))
              .message()));
      continue;
    }
    ibv_device_attr attr;
    bool active = false;
    if (ibv_query_device(context, &attr) == 0) {
      for (int port = 1; port <= attr.phys_port_cnt && !active; ++port) {
        ibv_port_attr port_attr;
        active = ibv_query_port(context, port, &port_attr) == 0 &&
                 port_attr.state == IBV_PORT_ACTIVE;
      }
    }
    ibv_close_device(context);
    if (active) {
      usable.push_back(name);
    } else {
      problems.push_back(absl::StrCat(name, ": no active port"));
    }
  }
  if (usable.empty()) {
    if (why != nullptr) {
      *why = absl::StrCat("no RDMA device: ", devices.size(),
                          " device(s) listed, none usable: ",
                          absl::StrJoin(problems, "; "));
    }
    return false;
  }
  if (why != nullptr) *why = absl::StrCat("RDMA devices: ", absl::StrJoin(usable, ", "));
  return true;
}

}  // namespace dreplay::verbs
