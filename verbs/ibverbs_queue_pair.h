// Copyright dreplay authors.
//
// ibverbs_queue_pair.h: the datapath of an ibverbs RC queue pair that
// connection setup (ibverbs_connection.h) has brought to RTS.
//
//  * A span passed to PostSend is chained and posted with one ibv_post_send
//    (one doorbell); WRITEs up to max_inline_data are sent inline, and
//    WorkRequest::fence becomes IBV_SEND_FENCE.
//  * Selective signalling (send_queue_accounting.h): unsignalled requests
//    are honoured, but the last request of every PostSend and one in every
//    signal_every (at most kMaxUnsignaledRun, at most a quarter of the send
//    queue) are signalled anyway, so every posted WQE is retired by a later
//    completion. Those forced completions are not reported.
//  * Each posted request is tracked by a sequence number (its ibv wr_id), so
//    a completion retires every request before it (RC completes in order),
//    and stale completions after an error are recognised and dropped.
//  * An ibv_post_send that fails after the send queue was checked for room
//    (the device disagrees with our accounting) moves the queue pair to the
//    error state: what it took may never be retired otherwise.
//  * An asynchronous event that kills this queue pair, its port or its
//    device (ibverbs_async_events.h) is seen at the next PostSend, PostRecv
//    or Poll: the queue pair enters the error state with the event's
//    kUnavailable status as error().
//  * After the first failure the queue pair is in the error state: every
//    outstanding request and posted receive completes with kFlushed, in
//    posting order, and later posts are flushed at once.
//
// Thread safety: as verbs.h states for a QueuePair (one thread at a time).

#ifndef DREPLAY_VERBS_IBVERBS_QUEUE_PAIR_H_
#define DREPLAY_VERBS_IBVERBS_QUEUE_PAIR_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "verbs/ibverbs_api.h"
#include "verbs/ibverbs_device.h"
#include "verbs/ibverbs_wire.h"
#include "verbs/options.h"
#include "verbs/send_queue_accounting.h"
#include "verbs/tcp_channel.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::ibverbs {

// Longest run of unsignalled send requests before one is signalled anyway,
// so the send queue can always be retired. The run is also capped at a
// quarter of the send queue (the queue pair's SendQueueAccounting).
inline constexpr int kMaxUnsignaledRun = 64;
static_assert(kMaxUnsignaledRun >= 1, "at least every request may be signalled");

// The verbs objects of one RC queue pair: the QP and the completion queue
// that both its queues use. Owns them: destroys the QP, then the CQ.
// Move-only.
struct QpObjects {
  explicit QpObjects(std::string device_name, IbvApi* api = RealIbvApi())
      : device_name(std::move(device_name)), api(api) {}
  QpObjects(QpObjects&& other);
  QpObjects& operator=(QpObjects&&) = delete;
  ~QpObjects() { Destroy(device_name); }

  // Destroys what is there; `qp_label` names the QP in the log line of a
  // failure.
  void Destroy(const std::string& qp_label);

  std::string device_name;
  IbvApi* api;  // destroys the QP and CQ
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  uint32_t max_inline_data = 0;  // what the created QP reports
};

// Implemented by the ibverbs provider's memory regions: the ibv_mr behind
// one, for binding memory windows to it.
class IbvRegionHandle {
 public:
  virtual ~IbvRegionHandle() = default;
  virtual ibv_mr* ibv_region() const = 0;
};

class IbverbsQueuePair : public QueuePair {
 public:
  // Takes over `objects`, whose QP is in RTS, connected to `remote` with
  // `max_rd_atomic` READs and atomics in flight. options.max_send_wr and
  // max_recv_wr must be those the QP was created with.
  IbverbsQueuePair(std::shared_ptr<Device> device, const QueuePairOptions& options,
                   QpObjects objects, const PeerInfo& remote, int max_rd_atomic);
  ~IbverbsQueuePair() override;
  IbverbsQueuePair(const IbverbsQueuePair&) = delete;
  IbverbsQueuePair& operator=(const IbverbsQueuePair&) = delete;

  // Keeps the TCP connection that set the queue pair up, open for its
  // lifetime, as rdma_cm keeps its connection: the peer's end closes when
  // its queue pair is destroyed or its process ends, and this side then
  // enters the error state (kUnavailable, "the peer closed ...") at its next
  // PostSend, PostRecv or Poll, checked at most every kPeerCheckInterval.
  // Without it, a peer that went away is noticed only when a request of
  // this side runs out of retries, and never by a side that sends nothing.
  void AttachControl(std::unique_ptr<TcpConnection> control);
  static constexpr absl::Duration kPeerCheckInterval = absl::Milliseconds(10);
  // The longest window BindWindow binds (verbs.h): refused by name on
  // every device, as mlx5 refuses it.
  static constexpr uint64_t kMaxWindowBytes = kMaxDeviceWindowBytes;

  absl::Status PostSend(absl::Span<const WorkRequest> wrs) override;
  absl::Status PostRecv(absl::Span<const RecvRequest> rrs) override;
  int Poll(absl::Span<Completion> out) override;
  // A type-2 window (ibv_alloc_mw) bound by an IBV_WR_BIND_MW request on
  // this queue pair, with a fresh key (ibv_inc_rkey); the window is
  // deallocated before the queue pair is destroyed, or with its region,
  // whichever comes first (ibverbs_windows.h). kUnavailable when the
  // device has no window left (max_mw). The bind takes a send
  // queue slot and is unsignalled: a failed one completes as an error with
  // wr_id 0 and fails the queue pair. `mr` must come from the ibverbs
  // provider (kInvalidArgument otherwise).
  absl::StatusOr<RemoteRegion> BindWindow(const MemoryRegion& mr, uint64_t offset, uint64_t length,
                                          uint32_t remote_access) override;
  QpState state() const override { return state_; }
  absl::Status error() const override { return error_; }
  int max_send_wr() const override { return max_send_wr_; }
  int max_rd_atomic() const override { return max_rd_atomic_; }
  uint32_t max_inline_data() const override { return objects_.max_inline_data; }
  std::string Describe() const override;
  // What this side posted only: the NIC executes the peer's operations
  // without the host, so peer_in and peer_out stay 0.
  QueuePairTraffic traffic() const override { return traffic_; }

 private:
  // Bookkeeping for one posted send request, indexed by sequence number.
  struct SendSlot {
    uint64_t user_wr_id = 0;
    Opcode opcode = Opcode::kWrite;
    bool user_signaled = true;
    uint32_t length = 0;
    bool bind = false;  // a memory window bind (BindWindow)
  };

  // Enters the error state if an asynchronous event failed this queue pair,
  // or (CheckPeer) its peer closed the control connection.
  void CheckAsyncFault();
  void CheckPeer();
  absl::Status ValidateWorkRequest(const WorkRequest& wr) const;
  // Fills `w` and `sge` for `wr`, posted as sequence number `seq`.
  void FillSendWr(const WorkRequest& wr, uint64_t seq, bool signaled, ibv_sge* sge,
                  ibv_send_wr* w) const;
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
  QpObjects objects_;
  const PeerInfo remote_;
  const int max_rd_atomic_;
  const int max_send_wr_;
  const int max_recv_wr_;
  // Set by the provider's asynchronous event thread; registered with
  // device_->faults under the QP and CQ handles until destruction.
  const std::shared_ptr<QpFault> fault_;

  // Datapath state (one thread at a time, per verbs.h).
  QpState state_ = QpState::kReady;
  absl::Status error_;
  SendQueueAccounting send_queue_;
  std::vector<SendSlot> send_slots_;  // ring of max_send_wr_, by sequence
  std::vector<uint64_t> recv_slots_;  // ring of user wr_ids
  uint64_t recv_posted_ = 0;
  uint64_t recv_retired_ = 0;
  std::vector<ibv_send_wr> send_scratch_;  // pre-allocated WR chain
  std::vector<ibv_sge> sge_scratch_;
  std::vector<ibv_recv_wr> recv_scratch_;
  std::deque<Completion> flushed_;          // synthesised kFlushed completions
  QueuePairTraffic traffic_;                // of the requests PostSend accepted
  std::unique_ptr<TcpConnection> control_;  // null: none attached
  int64_t next_peer_check_ns_ = 0;
};

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_QUEUE_PAIR_H_
