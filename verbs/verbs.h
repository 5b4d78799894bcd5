// Copyright dreplay authors.
//
// verbs.h: dreplay's RDMA interface, modelled on libibverbs and rdma_cm.
//
// Everything above verbs/ talks to the network through these classes:
//
//   Provider        one per process (or per test "host"): registers memory,
//                   listens for and opens connections. Implementations:
//                   "ibverbs" (libibverbs, RoCE / Soft-RoCE NICs) and "soft"
//                   (the same semantics over TCP, with a link emulator and
//                   fault injection). CreateProvider() picks one.
//   MemoryRegion    registered memory with access flags; peers reach it
//                   through its RemoteRegion {addr, length, rkey}.
//   Listener        a TCP control channel (host:port) that accepts peers.
//   QueuePair       a connected reliable (RC) queue pair with its own
//                   completion queue: post WRITE, WRITE_WITH_IMM, READ,
//                   FETCH_ADD and COMPARE_SWAP, post receives, poll.
//
// Connection setup carries an application payload both ways, like rdma_cm's
// private data: the connecting side sends one with Connect(), the listening
// side reads it from PendingConnection::payload() and either accepts (with a
// reply payload) or rejects (with a reason the peer sees in its Status).
//
// RC semantics, the same on every provider:
//  * Order at the responder, as RC hardware gives it: WRITEs and
//    WRITE_WITH_IMMs on one queue pair execute in the order they were
//    posted (a WRITE posted after another is placed after it), and a READ or
//    atomic sees every request posted before it. A request posted *after* a
//    READ or atomic has no such promise: it may execute before that READ
//    has fetched its data or that atomic has acted (a NIC may pipeline or
//    retry a READ), so a WRITE may change what an earlier READ returns. Set
//    WorkRequest::fence on the later request when it must wait for every
//    earlier READ and atomic on the queue pair. Data placement *within* one
//    WRITE has no defined order. Completions arrive in posting order.
//  * FETCH_ADD and COMPARE_SWAP act on 8-byte aligned words (PostSend
//    refuses a misaligned one) and are atomic with respect to every other
//    atomic on the same provider, from any queue pair. They are not atomic
//    against CPU stores to the same word.
//  * A work request that fails completes with an error status and moves the
//    queue pair to the error state; every request still outstanding or posted
//    later completes with kFlushed. Nothing else in the process is affected.
//  * Unsignalled requests produce a completion only when they fail.
//  * Inline contract (when a local buffer may be reused): a WRITE or
//    WRITE_WITH_IMM of 1 to max_inline_data() bytes is copied by PostSend
//    (the NIC's inline send), so its source may be changed or reused as soon
//    as PostSend returns. The local buffer of every other request belongs to
//    the provider until that request completes; for an unsignalled request,
//    until a later signalled request on the same queue pair completes.
//
// Thread safety: Provider and MemoryRegion methods are thread-safe. A
// QueuePair may be used by one thread at a time (post and poll from the same
// thread, or guard it); different queue pairs are independent.

#ifndef DREPLAY_VERBS_VERBS_H_
#define DREPLAY_VERBS_VERBS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "verbs/options.h"

namespace dreplay::verbs {

// Access rights of a memory region; combine with |.
enum Access : uint32_t {
  kLocalWrite = 1u << 0,        // the local NIC may write it (READ results, atomics)
  kRemoteRead = 1u << 1,        // peers may RDMA READ it
  kRemoteWrite = 1u << 2,       // peers may RDMA WRITE it
  kRemoteAtomic = 1u << 3,      // peers may FETCH_ADD / COMPARE_SWAP it
  kMemoryWindowBind = 1u << 4,  // QueuePair::BindWindow may bind windows to it
};

// What a peer needs to address a region: fixed size, safe to copy into a
// wire structure.
struct RemoteRegion {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(RemoteRegion) == 24, "RemoteRegion is a wire structure");

// Registered memory. Owned by the caller; must outlive every work request
// that names it. Destroying it deregisters the memory (the memory itself is
// the caller's and is not freed).
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual void* addr() const = 0;
  virtual size_t length() const = 0;
  virtual uint32_t lkey() const = 0;
  virtual uint32_t rkey() const = 0;
  virtual uint32_t access() const = 0;

  RemoteRegion remote() const {
    return RemoteRegion{reinterpret_cast<uint64_t>(addr()), length(), rkey(), 0};
  }
  // True if [p, p + n) lies inside this region.
  bool Contains(const void* p, size_t n) const {
    const auto begin = reinterpret_cast<uintptr_t>(addr());
    const auto q = reinterpret_cast<uintptr_t>(p);
    return q >= begin && n <= length() && q - begin <= length() - n;
  }
};

enum class Opcode : uint8_t {
  kWrite,
  kWriteWithImm,  // consumes one posted receive at the peer
  kRead,
  kFetchAdd,
  kCompareSwap,
  kRecv,  // only in completions: a receive consumed by a WRITE_WITH_IMM
};
const char* OpcodeName(Opcode op);

// One work request. `local` names the registered buffer of [local_addr,
// local_addr + length): the source of a WRITE, the destination of a READ, and
// the 8-byte buffer that receives the old value of an atomic.
struct WorkRequest {
  uint64_t wr_id = 0;
  Opcode opcode = Opcode::kWrite;
  bool signaled = true;
  // Execute only after every READ and atomic posted before it on this queue
  // pair has completed at the responder (IBV_SEND_FENCE). Costs a round
  // trip when such a request is outstanding; needed only for order after a
  // READ or atomic (see "Order at the responder" above).
  bool fence = false;
  const MemoryRegion* local = nullptr;
  void* local_addr = nullptr;
  uint32_t length = 0;  // atomics: must be 8
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;  // FETCH_ADD: the addend; COMPARE_SWAP: compare
  uint64_t swap = 0;         // COMPARE_SWAP: the new value
  uint32_t imm_data = 0;     // WRITE_WITH_IMM
};

// A receive for WRITE_WITH_IMM notifications (no data buffer: the payload of
// a WRITE_WITH_IMM lands at its remote address; only the immediate arrives).
struct RecvRequest {
  uint64_t wr_id = 0;
};

// Completion status, mirroring the ibv_wc_status values dreplay can see.
enum class WcStatus : uint8_t {
  kSuccess,
  kLocalLengthError,      // IBV_WC_LOC_LEN_ERR
  kLocalProtectionError,  // IBV_WC_LOC_PROT_ERR: bad lkey or local bounds
  kFlushed,               // IBV_WC_WR_FLUSH_ERR: the QP was already in error
  kRemoteAccessError,     // IBV_WC_REM_ACCESS_ERR: rkey, bounds or rights
  kRemoteInvalidRequest,  // IBV_WC_REM_INV_REQ: e.g. misaligned atomic
  kRemoteOperationError,  // IBV_WC_REM_OP_ERR
  kRetryExceeded,         // IBV_WC_RETRY_EXC_ERR: peer gone, link down
  kRnrRetryExceeded,      // IBV_WC_RNR_RETRY_EXC_ERR: no receive posted
  kGeneralError,          // anything else
};
const char* WcStatusName(WcStatus s);

struct Completion {
  uint64_t wr_id = 0;
  Opcode opcode = Opcode::kWrite;
  WcStatus status = WcStatus::kSuccess;
  // READ: bytes read (the request's length); kRecv: bytes written by the
  // peer; not to be relied on for other opcodes.
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // kRecv only
  // `detail` explains a failure (verb, provider message); empty on success.
  std::string detail;

  bool ok() const { return status == WcStatus::kSuccess; }
  // OK, or an error whose message names the opcode, the wr_id and the status.
  absl::Status ToStatus() const;
};

enum class QpState : uint8_t { kReady, kError };

// Data bytes a queue pair moved, by who initiated the operation. Transport
// headers (RoCE, the soft provider's framing) are not included.
//   initiated_out  WRITE and WRITE_WITH_IMM lengths, atomic operands (8 B)
//   initiated_in   READ lengths, atomic results (8 B)
//   peer_in        what peers' WRITEs placed here, their atomics' operands
//   peer_out       what peers READ from here, their atomics' results
// Operations this side posts are counted when PostSend() accepts them (a
// request flushed by an earlier failure included). Peer-initiated operations
// are counted when executed, where the provider sees them: the soft provider
// does; ibverbs cannot (the NIC executes them without the host), so its
// peer_* stay 0.
struct QueuePairTraffic {
  uint64_t initiated_out = 0;
  uint64_t initiated_in = 0;
  uint64_t peer_in = 0;
  uint64_t peer_out = 0;

  uint64_t initiated() const { return initiated_out + initiated_in; }
  uint64_t peer() const { return peer_in + peer_out; }
  uint64_t total() const { return initiated() + peer(); }
  QueuePairTraffic& operator+=(const QueuePairTraffic& o) {
    initiated_out += o.initiated_out;
    initiated_in += o.initiated_in;
    peer_in += o.peer_in;
    peer_out += o.peer_out;
    return *this;
  }
  bool operator==(const QueuePairTraffic& o) const {
    return initiated_out == o.initiated_out && initiated_in == o.initiated_in &&
           peer_in == o.peer_in && peer_out == o.peer_out;
  }
  bool operator!=(const QueuePairTraffic& o) const { return !(*this == o); }
};

// Adds the data bytes of the requests in `wrs` to `t`'s initiated counts.
void CountInitiated(absl::Span<const WorkRequest> wrs, QueuePairTraffic* t);

// The alignment of the remote word a FETCH_ADD or COMPARE_SWAP acts on.
inline constexpr uint64_t kAtomicAlignment = sizeof(uint64_t);

// What every provider's PostSend checks before it posts anything:
// kInvalidArgument for an atomic whose remote_addr is not a multiple of
// kAtomicAlignment (a NIC would fail the queue pair with a remote invalid
// request instead); OK for anything else.
absl::Status CheckAtomicAlignment(const WorkRequest& wr);

// The longest memory window the ibverbs provider binds: mlx5 refuses longer
// ones (EOPNOTSUPP). The ibverbs provider's BindWindow refuses them by name,
// and a server on it refuses at start a region it would grant whole.
inline constexpr uint64_t kMaxDeviceWindowBytes = uint64_t{1} << 31;

// A connected RC queue pair with its own completion queue.
class QueuePair {
 public:
  virtual ~QueuePair() = default;

  // Posts `wrs` in order; a provider may ring one doorbell for all of them.
  // Non-blocking. Returns kResourceExhausted (and posts none) when the send
  // queue has no room for all of them, kInvalidArgument (and posts none) for
  // a request that is malformed locally (unknown opcode, atomic length != 8
  // or remote address not 8-byte aligned, null region). A queue pair in the
  // error state accepts the requests and flushes them.
  virtual absl::Status PostSend(absl::Span<const WorkRequest> wrs) = 0;

  // Posts receives for WRITE_WITH_IMM notifications. Non-blocking.
  virtual absl::Status PostRecv(absl::Span<const RecvRequest> rrs) = 0;

  // Moves up to out.size() completions into `out`; returns how many (0 when
  // none is ready). Non-blocking.
  virtual int Poll(absl::Span<Completion> out) = 0;

  virtual QpState state() const = 0;
  // Why the queue pair is in the error state (OK while kReady).
  virtual absl::Status error() const = 0;

  // Limits in force on this connection, after negotiation with the peer.
  virtual int max_send_wr() const = 0;
  virtual int max_rd_atomic() const = 0;  // outstanding READs + atomics
  virtual uint32_t max_inline_data() const = 0;

  // Human-readable "local <-> remote" description, for logs.
  virtual std::string Describe() const = 0;

  // Binds a memory window (type 2, as IBV_MW_TYPE_2) over [offset, offset +
  // length) of `mr` with `remote_access` (a mask of kRemoteRead,
  // kRemoteWrite; remote write needs kLocalWrite on `mr`) and returns its
  // address, length and fresh rkey. The key is unpredictable, is honoured
  // only for requests that arrive on this queue pair (the same key on any
  // other queue pair is a remote access error), and dies with the queue pair
  // or with `mr`. `mr` must carry kMemoryWindowBind; it needs no remote
  // access of its own, so a region registered without any is reachable only
  // through windows. The peer may use the key once a request this side
  // posts after BindWindow (with WorkRequest::fence) has reached it.
  // Non-blocking. kInvalidArgument for an empty or out-of-bounds range,
  // rights `mr` cannot back or a region without kMemoryWindowBind;
  // kFailedPrecondition on a queue pair in the error state; kUnimplemented
  // where the provider has no windows.
  virtual absl::StatusOr<RemoteRegion> BindWindow(const MemoryRegion& mr, uint64_t offset,
                                                  uint64_t length, uint32_t remote_access);

  // The data bytes this queue pair moved so far (see QueuePairTraffic).
  // Same thread rules as PostSend; the peer-initiated counts may grow at
  // any time (the provider executes those operations on its own).
  virtual QueuePairTraffic traffic() const = 0;
};

// An incoming connection that has not been answered yet. It holds only the
// peer's socket and hello: no queue pair, channel, key or registered memory
// exists for it before Accept(), so an application may check the payload
// (e.g. authenticate it) before anything is allocated.
class PendingConnection {
 public:
  virtual ~PendingConnection() = default;
  // The application payload the peer sent with Connect().
  virtual const std::string& payload() const = 0;
  // The peer's address "host:port", for logs.
  virtual std::string peer() const = 0;
  // Completes the connection; the peer's Connect() returns `reply`.
  virtual absl::StatusOr<std::unique_ptr<QueuePair>> Accept(const std::string& reply,
                                                            const QueuePairOptions& options) = 0;
  // Refuses the connection; the peer's Connect() fails with
  // kPermissionDenied and `reason` in its message.
  virtual void Reject(const std::string& reason) = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  // The bound port (useful with port 0).
  virtual uint16_t port() const = 0;
  virtual std::string host() const = 0;
  // Blocks up to `timeout` for the next peer. kDeadlineExceeded when none
  // came; kCancelled after Shutdown(). A peer that sends garbage, speaks
  // another provider (refused, naming this one) or hangs up
  // during setup is logged and skipped, never returned.
  virtual absl::StatusOr<std::unique_ptr<PendingConnection>> Accept(absl::Duration timeout) = 0;
  // Wakes a blocked Accept() and makes later calls return kCancelled.
  virtual void Shutdown() = 0;
};

struct Connection {
  std::unique_ptr<QueuePair> qp;
  std::string reply;  // the listener's reply payload
};

class Provider {
 public:
  virtual ~Provider() = default;

  // "ibverbs" or "soft".
  virtual std::string name() const = 0;

  // Registers [addr, addr + length) with `access` (a mask of Access).
  // kInvalidArgument for a null or empty buffer or an unknown flag.
  virtual absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, size_t length,
                                                                       uint32_t access) = 0;

  // Listens on host:port (port 0: the OS picks one).
  virtual absl::StatusOr<std::unique_ptr<Listener>> Listen(const std::string& host,
                                                           uint16_t port) = 0;

  // Connects to a listener, sending `payload`; blocks up to
  // options.connect_timeout. kUnavailable when nobody listens or the peer
  // goes away, kPermissionDenied when the peer rejects (its reason in the
  // message), kDeadlineExceeded on timeout.
  virtual absl::StatusOr<Connection> Connect(const std::string& host, uint16_t port,
                                             const std::string& payload,
                                             const QueuePairOptions& options) = 0;
};

// Creates the provider that options.kind names. kAuto picks ibverbs when an
// RDMA device is present and soft otherwise, and logs the choice.
absl::StatusOr<std::unique_ptr<Provider>> CreateProvider(const ProviderOptions& options);

// True if libibverbs sees at least one RDMA device on this host. `why` (if
// given) receives a one-line explanation either way.
bool RdmaDeviceAvailable(std::string* why = nullptr);

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_VERBS_H_
