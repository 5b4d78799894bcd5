// Copyright dreplay authors.
//
// channel.h: one soft queue pair's connection. It owns the parts that do the
// work and ties them together:
//  * Requester (requester.h): the send queue, credits, and the completions
//    of this side's requests;
//  * Responder (responder.h): checks and executes the peer's requests on
//    registered memory and answers them;
//  * FrameReader (frame_reader.h): reads the socket and cuts it into frames,
//    which the channel hands to the requester or the responder;
//  * FrameWriter (frame_writer.h): the outgoing frames, with the link
//    emulator and the socket writes;
//  * CompletionQueue (completion_queue.h): what Poll() returns.
// The channel itself keeps the queue pair's state, moves it to the error
// state (Fail), and registers the socket with the NIC thread.
//
// Two kinds of threads use a Channel:
//  * the application, through SoftQueuePair (PostSend, PostRecv, Poll; one
//    thread at a time, as verbs.h says of a QueuePair). A Poll that finds no
//    completion while requests of its own are outstanding on TCP reads and
//    executes the socket's input itself when the lock is free (progress by
//    the polling thread, as UCX and libfabric do with manual progress), so
//    a busy poller needs no wake-up of the NIC thread. Once it spins on
//    its completions (polls, finding completions or reading, for
//    kSpinningNs with no gap of kSpinningPollGapNs), and no link is
//    emulated, the input is the poller's alone: the NIC thread stops
//    watching the socket for input, so the two do not hand the lock to
//    each other for every arrival, and looks again when the poller has not
//    polled for kPollerGraceNs (the channel's timer). A thread that polls
//    now and then between other work (a server's housekeeping, a writer
//    waiting a moment for its batch) leaves the input to the NIC thread;
//  * the provider's NIC thread (nic.h): OnEvents() when the socket is
//    readable or writable, OnTimer() when a held frame is due.
// One mutex guards the connection's state; the NIC thread holds it while it
// processes a batch of input, so the frames of one connection are executed
// in order. It lets go only while it receives a large payload straight into
// its destination; Detach() and deregistration wait for that to end, so a
// region is never written after it is gone. Completions have their own lock.
//
// Datapath: PostSend builds frames and, with no link model, writes them at
// once with one sendmsg() per posted span; with a link model every frame is
// held until its arrival time (link.h) and the NIC thread sends it then
// (and, on one clock, the receiver holds one that comes early; wire.h).
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
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "verbs/options.h"
#include "verbs/soft/channel_control.h"
#include "verbs/soft/completion_queue.h"
#include "verbs/soft/frame_reader.h"
#include "verbs/soft/frame_writer.h"
#include "verbs/soft/link_table.h"
#include "verbs/soft/region_table.h"
#include "verbs/soft/requester.h"
#include "verbs/soft/responder.h"
#include "verbs/soft/shared_path.h"
#include "verbs/soft/shm_link.h"
#include "verbs/soft/socket.h"
#include "verbs/soft/wire.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::soft {

class Nic;

// A poller that read the input this recently keeps it from the NIC thread
// (above); one that has been away longer gives it back. The longest extra
// delay of the peer's requests and acknowledgements when an application
// stops polling.
inline constexpr int64_t kPollerGraceNs = 200000;
// A poller takes the input once it has polled for kSpinningNs, each poll
// within kSpinningPollGapNs of the one before: it spins on its completions.
inline constexpr int64_t kSpinningNs = 1000000;
inline constexpr int64_t kSpinningPollGapNs = 100000;

// Settings of one connection, fixed at setup.
struct ChannelConfig {
  int max_send_wr = 256;
  int max_recv_wr = 256;
  int max_rd_atomic = 16;  // negotiated: min of both sides
  uint32_t max_inline_data = 0;
  LinkModel link;  // the model of `link_out`
  // The direction of the link this side sends over, shared with the other
  // queue pairs to the same host (link_table.h); null: no link model.
  std::shared_ptr<SharedLink> link_out;
  // Both ends read one clock: this side holds the frames that come before
  // their stamped arrival (wire.h, "Receiver-released frames").
  bool same_clock = false;
  FaultOptions faults;      // applied to the requests this side sends
  std::string description;  // "local <-> peer"
};

class Channel final : private ChannelControl, private FrameReader::Handler {
 public:
  // `shm`: the link to a same-host peer (shm_link.h), or null: TCP only.
  Channel(Fd fd, const ChannelConfig& config, std::shared_ptr<RegionTable> regions,
          std::unique_ptr<ShmLink> shm = nullptr);
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
  // QueuePair::BindWindow (verbs.h). Thread-safe.
  absl::StatusOr<RemoteRegion> BindWindow(const MemoryRegion& mr, uint64_t offset, uint64_t length,
                                          uint32_t remote_access);
  // The peer's operations executed here (Responder::traffic). Thread-safe.
  QueuePairTraffic peer_traffic() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    QueuePairTraffic t = responder_.traffic();
    if (shared_ != nullptr) t += shared_->PeerShared();
    return t;
  }
  // True when the queue pair has a same-host link to its peer.
  bool same_host() const { return shared_ != nullptr; }

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
    Timer t{next_due_ns_.load(std::memory_order_acquire),
            next_wake_ns_.load(std::memory_order_acquire)};
    if (input_parked_.load(std::memory_order_acquire)) {
      // Input left to a poller: look again when it may have gone away.
      const int64_t back = polled_at_ns_.load(std::memory_order_acquire) + kPollerGraceNs;
      if (t.due_ns == 0 || back < t.due_ns) t.due_ns = back;
      if (t.wake_ns == 0 || back < t.wake_ns) t.wake_ns = back;
    }
    return t;
  }

 private:
  enum class Teardown {
    kAbort,        // connection unusable: drop everything, close now
    kAfterQueued,  // send what responses are queued, then close
  };

  // ChannelControl, for the requester and the responder.
  bool ready() const override;
  void Fail(WcStatus first, const std::string& reason) override;
  void ProtocolError(const std::string& what) override;

  // FrameReader::Handler: frames go to the requester or the responder.
  PayloadTarget OnFrameHeader(const FrameHeader& header) override;
  void OnFrameComplete(const FrameHeader& header, const char* small) override;

  // Reads and executes the input, then acknowledges it.
  void ReadInput() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads input again when it was paused for output that has drained
  // (responder.h, "Backpressure").
  void ResumeInput() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends what is due by `now` and updates the timer.
  void Flush(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateNextDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SyncInterest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True while a polling thread reads the input (channel.h, above).
  bool PollerReads() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a poll by the application at `now` (PollerReads).
  void NotePoll(int64_t now);
  // Stops serving the socket through the NIC.
  void Unregister() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Moves the queue pair to the error state: the first outstanding request
  // completes with `first` (kFlushed: all of them are flushed), the others and
  // every posted receive with kFlushed.
  void Fail(WcStatus first, const std::string& reason, Teardown teardown)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until the NIC thread is not placing data with mu_ released.
  void WaitForPlacement() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Fd fd_;
  const ChannelConfig config_;
  const std::shared_ptr<RegionTable> regions_;
  const bool emulated_link_;  // frames are held for a link model

  mutable Mutex mu_;
  Nic* nic_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t nic_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t epoll_events_ ABSL_GUARDED_BY(mu_) = 0;  // current registration
  bool detached_ ABSL_GUARDED_BY(mu_) = false;
  QpState state_ ABSL_GUARDED_BY(mu_) = QpState::kReady;
  absl::Status error_ ABSL_GUARDED_BY(mu_);

  // The parts, in the order they are built (each refers to those above).
  CompletionQueue completions_;  // its own lock, taken inside mu_
  FrameWriter writer_ ABSL_GUARDED_BY(mu_);
  FrameReader reader_ ABSL_GUARDED_BY(mu_);
  Requester requester_ ABSL_GUARDED_BY(mu_);
  Responder responder_ ABSL_GUARDED_BY(mu_);
  // The same-host transport (null: TCP only). Its requester and responder
  // halves are used under mu_, its completions by the application thread
  // (shared_path.h).
  const std::unique_ptr<SharedPath> shared_;

  // The writer's next frame, for the NIC thread (which reads it unlocked).
  std::atomic<int64_t> next_due_ns_{0};
  std::atomic<int64_t> next_wake_ns_{0};
  // The error state, readable without a lock.
  std::atomic<bool> failed_{false};
  // When the application last polled (NotePoll), and whether the NIC
  // thread has left the input to it (EPOLLIN off; written under mu_).
  std::atomic<int64_t> polled_at_ns_{0};
  std::atomic<bool> input_parked_{false};
  // When the polling thread's latest run of polls with no gap of
  // kSpinningPollGapNs began.
  std::atomic<int64_t> spinning_since_ns_{0};
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_CHANNEL_H_
