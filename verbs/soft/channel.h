// Copyright dreplay authors.
//
// channel.h: one soft queue pair's connection: the requester (send
// queue, credits, completions), the responder (checks and executes the
// peer's requests on registered memory) and the outgoing frame queue with its
// link emulator and fault injection.
//
// Two kinds of threads use a Channel:
//  * the application, through SoftQueuePair (PostSend, PostRecv, Poll; one
//    thread at a time, as verbs.h says of a QueuePair);
//  * the provider's NIC thread (nic.h): OnEvents() when the socket is
//    readable or writable, OnTimer() when a held frame is due.
// One mutex guards the connection's state; the NIC thread holds it while it
// processes a batch of input, so the frames of one connection are executed
// in order. It lets go only while it receives a large payload straight into
// its destination; Detach() and deregistration wait for that to end, so a
// region is never written after it is gone. Completions have their own lock.
//
// Datapath, and where copies are avoided:
//  * PostSend builds frames and, with no link model, writes them at once with
//    one sendmsg() per posted span: small WRITE payloads (<= kInlineCopyBytes)
//    are copied next to their header, larger ones are sent straight from
//    registered memory (iovec).
//  * The responder reads input in large chunks and parses many frames per
//    read; the payload of a large WRITE or READ response is received straight
//    into its destination once the header has been checked.
//  * WRITEs are acknowledged once per batch of input (cumulative ACK);
//    completions are queued only for signalled requests and for failures.
//  * READ responses are sent from registered memory. To keep RC order (a
//    READ sees memory before any later WRITE on the same queue pair) the
//    responder copies a still-queued READ response before it executes a
//    later WRITE or atomic, and before its region is deregistered.
//  * With a link model every frame is held until its arrival time
//    (link.h); the NIC thread sends it then.
//
// Errors: a failed request completes with its status, every other
// outstanding request and posted receive with kFlushed, and the channel
// stops. A peer that sends something invalid gets a NAK and the connection is
// closed; no input can make this code crash or touch memory outside a
// registered region.

#ifndef DREPLAY_VERBS_SOFT_CHANNEL_H_
#define DREPLAY_VERBS_SOFT_CHANNEL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "verbs/options.h"
#include "verbs/soft/link.h"
#include "verbs/soft/region_table.h"
#include "verbs/soft/ring.h"
#include "verbs/soft/socket.h"
#include "verbs/soft/wire.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::soft {

class Nic;

// Settings of one connection, fixed at setup.
struct ChannelConfig {
  int max_send_wr = 256;
  int max_recv_wr = 256;
  int max_rd_atomic = 16;  // negotiated: min of both sides
  uint32_t max_inline_data = 0;
  LinkModel link;          // applied to the frames this side sends
  uint64_t link_seed = 1;
  FaultOptions faults;     // applied to the requests this side sends
  std::string description;  // "local <-> peer"
};

// WRITE payloads up to this many bytes are copied into the frame; larger ones
// are sent from registered memory.
inline constexpr uint32_t kInlineCopyBytes = 256;
// The gap between the two halves of a WRITE torn with TearMode::kOutOfOrder
// when FaultOptions::stall_for is zero.
inline constexpr absl::Duration kDefaultTearGap = absl::Milliseconds(10);

class Channel {
 public:
  Channel(Fd fd, const ChannelConfig& config,
          std::shared_ptr<RegionTable> regions);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // ---- Application side: the QueuePair contract of verbs.h. ----
  absl::Status PostSend(absl::Span<const WorkRequest> wrs);
  absl::Status PostRecv(absl::Span<const RecvRequest> rrs);
  int Poll(absl::Span<Completion> out);
  QpState state() const;
  absl::Status error() const;
  const ChannelConfig& config() const { return config_; }

  // ---- Lifetime (called by Nic and SoftQueuePair). ----
  // Starts serving the socket through `nic` under the epoll id `id`.
  void Attach(Nic* nic, uint64_t id);
  // The queue pair is being destroyed: closes the connection and drops all
  // state without completions. Afterwards the channel never touches
  // application memory again.
  void Detach();
  // The provider is being destroyed: the queue pair moves to the error state
  // (its requests are flushed) and stops.
  void OnNicStopped();
  // [begin, begin + length) of `mr` is being deregistered. Kills the
  // connection if it still needs that memory; copies queued READ responses.
  // Thread-safe.
  void OnDeregister(const MemoryRegion* mr, const char* begin, size_t length);

  // ---- NIC thread. ----
  // `events`: the epoll events of the socket.
  void OnEvents(uint32_t events);
  // Sends the held frames that are due.
  void OnTimer();
  struct Timer {
    int64_t due_ns;   // when the first held frame may go; 0: none held
    int64_t wake_ns;  // when the NIC thread should wake for it (spin after)
  };
  Timer timer() const {
    return Timer{next_due_ns_.load(std::memory_order_acquire),
                 next_wake_ns_.load(std::memory_order_acquire)};
  }

 private:
  struct SendEntry {
    WorkRequest wr;
    uint64_t last_seq = 0;  // of its last frame, once transmitted
    WcStatus local_error = WcStatus::kSuccess;
    std::string local_detail;
  };

  // An outgoing frame: `head` (header and any small payload) followed by
  // `ref_len` bytes at `ref`.
  struct OutFrame {
    // `head` is not initialised, and moves copy only its used bytes: a
    // frame is built, moved and released millions of times a second.
    OutFrame() {}
    OutFrame(OutFrame&& other) { *this = std::move(other); }
    OutFrame& operator=(OutFrame&& other) {
      send_ns = other.send_ns;
      slack_ns = other.slack_ns;
      head_len = other.head_len;
      ref_len = other.ref_len;
      sent = other.sent;
      is_request = other.is_request;
      response_ref = other.response_ref;
      response = other.response;
      close_after = other.close_after;
      ref = other.ref;
      owned = std::move(other.owned);
      std::memcpy(head, other.head, head_len);
      return *this;
    }
    static constexpr uint32_t kHeadCapacity =
        sizeof(FrameHeader) + kInlineCopyBytes;
    int64_t send_ns = 0;   // not sent before this time
    int64_t slack_ns = 0;  // how much later it may go without harm
    uint32_t head_len = 0;
    uint32_t ref_len = 0;
    uint64_t sent = 0;           // bytes of head + ref already written
    bool is_request = false;     // false: a response to the peer
    bool response_ref = false;   // `ref` is registered memory (READ response)
    bool response = false;       // READ or atomic response (credit count)
    bool close_after = false;    // shut the connection once this is out
    const char* ref = nullptr;
    std::unique_ptr<char[]> owned;  // a private copy that `ref` points into
    alignas(8) char head[kHeadCapacity];
  };

  enum class InPhase { kHeader, kPayload, kDrain };
  enum class Teardown {
    kAbort,        // connection unusable: drop everything, close now
    kAfterQueued,  // send what responses are queued, then close
  };

  // Requester.
  void Transmit(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EmitRequest(SendEntry& e, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  OutFrame& QueueFrame(const FrameHeader& header, const char* inline_payload,
                       uint32_t inline_len, const char* ref, uint32_t ref_len,
                       int64_t not_before) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueClose(int64_t not_before) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CompleteThrough(uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteFront(WcStatus status, uint32_t byte_len, std::string detail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckFrontLocalError() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Responder and input.
  void ReadInput() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ParseBuffered() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartFrame() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishFrame() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpectPayload(char* dst, uint32_t length) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CheckRequestSeq() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteAtomic() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueResponse(const FrameHeader& header, const char* inline_payload,
                     uint32_t inline_len, const char* ref, uint32_t ref_len)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaterializeResponseRefs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The peer's request `seq` failed here: NAK it and close.
  void RejectRequest(uint64_t seq, WcStatus status, const std::string& detail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The peer broke the protocol.
  void ProtocolError(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Output.
  void Flush(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateNextDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SyncInterest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Moves the queue pair to the error state: the first outstanding request
  // completes with `first` (kFlushed: all of them are flushed), the others and
  // every posted receive with kFlushed.
  void Fail(WcStatus first, const std::string& reason, Teardown teardown)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushCompletion(Completion c) ABSL_LOCKS_EXCLUDED(cq_mu_);
  // Waits until the NIC thread is not placing data with mu_ released.
  void WaitForPlacement() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Fd fd_;
  const ChannelConfig config_;
  const std::shared_ptr<RegionTable> regions_;

  mutable Mutex mu_;
  Nic* nic_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t nic_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t epoll_events_ ABSL_GUARDED_BY(mu_) = 0;  // current registration
  bool detached_ ABSL_GUARDED_BY(mu_) = false;
  QpState state_ ABSL_GUARDED_BY(mu_) = QpState::kReady;
  absl::Status error_ ABSL_GUARDED_BY(mu_);

  // Requester.
  Ring<SendEntry> sq_ ABSL_GUARDED_BY(mu_);  // posted, not yet completed
  size_t sq_transmitted_ ABSL_GUARDED_BY(mu_) = 0;  // prefix of sq_ sent
  int rd_in_flight_ ABSL_GUARDED_BY(mu_) = 0;       // READs + atomics sent
  uint64_t next_request_seq_ ABSL_GUARDED_BY(mu_) = 0;
  LinkEmulator link_ ABSL_GUARDED_BY(mu_);
  // Fault injection state.
  uint64_t ops_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t payload_bytes_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writes_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stall_until_ns_ ABSL_GUARDED_BY(mu_) = 0;
  bool stalled_ ABSL_GUARDED_BY(mu_) = false;
  bool close_queued_ ABSL_GUARDED_BY(mu_) = false;
  std::string close_reason_ ABSL_GUARDED_BY(mu_);

  // Responder.
  uint64_t next_exec_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool ack_pending_ ABSL_GUARDED_BY(mu_) = false;
  int responses_queued_ ABSL_GUARDED_BY(mu_) = 0;
  int response_refs_ ABSL_GUARDED_BY(mu_) = 0;
  Ring<RecvRequest> rq_ ABSL_GUARDED_BY(mu_);

  // Input parser.
  InPhase in_phase_ ABSL_GUARDED_BY(mu_) = InPhase::kHeader;
  FrameHeader in_header_ ABSL_GUARDED_BY(mu_) = {};
  char* in_dst_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint32_t in_left_ ABSL_GUARDED_BY(mu_) = 0;
  bool in_dst_is_memory_ ABSL_GUARDED_BY(mu_) = false;  // vs in_small_
  bool last_frame_large_ ABSL_GUARDED_BY(mu_) = false;
  alignas(8) char in_small_[kMaxNakDetail] ABSL_GUARDED_BY(mu_);
  std::unique_ptr<char[]> in_buf_ ABSL_GUARDED_BY(mu_);
  size_t in_begin_ ABSL_GUARDED_BY(mu_) = 0;
  size_t in_end_ ABSL_GUARDED_BY(mu_) = 0;
  bool in_closed_ ABSL_GUARDED_BY(mu_) = false;

  // Output.
  Ring<OutFrame> out_ ABSL_GUARDED_BY(mu_);
  bool out_blocked_ ABSL_GUARDED_BY(mu_) = false;  // socket full
  bool out_closed_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> next_due_ns_{0};
  std::atomic<int64_t> next_wake_ns_{0};

  // The NIC thread is receiving straight into application memory with mu_
  // released; Detach() and OnDeregister() wait for it to finish.
  bool placing_ ABSL_GUARDED_BY(mu_) = false;
  CondVar placement_done_;

  // Completions have their own lock (taken inside mu_ when pushing), so
  // that Poll() never waits for the NIC thread's batch; their count is
  // readable without a lock so that an idle Poll() takes none.
  mutable Mutex cq_mu_ ABSL_ACQUIRED_AFTER(mu_);
  Ring<Completion> cq_ ABSL_GUARDED_BY(cq_mu_);
  std::atomic<size_t> cq_size_{0};
  std::atomic<bool> failed_{false};
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_CHANNEL_H_
