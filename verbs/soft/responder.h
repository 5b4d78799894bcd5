// Copyright dreplay authors.
//
// responder.h: the responder side of one soft queue pair: checks the peer's
// requests against the registered regions (region_table.h), executes them
// on registered memory in the order they were sent, and answers.
//
//  * Requests are numbered per direction and executed in that order; a
//    request out of order is a protocol error. Each is executed only once
//    every earlier one has been, READs and atomics included (a READ's data
//    is taken when it executes), so this provider orders as if every
//    request carried WorkRequest::fence: the flag needs no handling here.
//  * WRITEs are acknowledged once per batch of input (one cumulative ACK,
//    SendPendingAck()), not once per request.
//  * A READ response is sent from registered memory. To keep RC order (a
//    READ sees memory before any later WRITE on the same queue pair) the
//    still-queued READ responses are copied before a later WRITE or atomic
//    is executed (FrameWriter::MaterializeResponseRefs).
//  * Backpressure: before a WRITE or atomic is executed, the READ responses
//    still queued by reference are copied; when they hold more than
//    kMaxResponseRefBytes, the request is not started (PayloadTarget::Pause)
//    and input stops until enough of them went out. A peer that queues
//    large READs and stops reading its socket therefore makes the responder
//    copy at most that much, never credits x region bytes.
//  * Atomics are executed with __atomic operations on the word, so they are
//    atomic across the queue pairs of a provider whichever thread (the NIC
//    thread or a polling application thread) executes them.
//  * WRITE_WITH_IMM consumes a posted receive (a kRecv completion here);
//    with none posted it fails with kRnrRetryExceeded (no RNR retries).
//  * A request that fails here gets a NAK with its status, and the queue
//    pair fails; so does a peer that breaks the protocol.
//  * Keys: a request's rkey is looked up among this queue pair's memory
//    windows first (BindWindow), then among the provider's regions. A window
//    bound on another queue pair is unknown here.
//
// Not thread-safe: owned by a Channel (channel.h) and used under its lock.

#ifndef DREPLAY_VERBS_SOFT_RESPONDER_H_
#define DREPLAY_VERBS_SOFT_RESPONDER_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "verbs/soft/channel_control.h"
#include "verbs/soft/completion_queue.h"
#include "verbs/soft/frame_reader.h"
#include "verbs/soft/frame_writer.h"
#include "verbs/soft/region_table.h"
#include "verbs/soft/ring.h"
#include "verbs/soft/wire.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::soft {

// The most READ response bytes a WRITE or atomic may make the responder
// copy (see "Backpressure" above).
inline constexpr uint64_t kMaxResponseRefBytes = 1 << 20;

class Responder {
 public:
  // `description` names the connection in log lines. The pointers must
  // outlive the responder.
  Responder(int max_recv_wr, int max_rd_atomic, const std::string& description,
            RegionTable* regions, FrameWriter* writer, CompletionQueue* completions,
            ChannelControl* control);
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;

  // Appends receives for WRITE_WITH_IMM. kResourceExhausted, and nothing
  // posted, when they do not all fit.
  absl::Status Post(absl::Span<const RecvRequest> rrs);

  // A request frame's header: checks it, executes a READ at once, and says
  // where the payload of a WRITE or atomic goes.
  PayloadTarget StartRequest(const FrameHeader& header);
  // True when a request that changes memory must wait for queued READ
  // responses to go out (StartRequest answers it with kPause).
  bool MustWaitForResponses() const;
  // Its payload has arrived (`small` holds a small one): completes a WRITE,
  // executes an atomic.
  void CompleteRequest(const FrameHeader& header, const char* small);
  // At the end of a batch of input: acknowledges the WRITEs executed in it.
  void SendPendingAck();

  // The peer's request `seq` failed here with `status`: NAK it and fail
  // the queue pair.
  void Reject(uint64_t seq, WcStatus status, const std::string& detail);
  // The peer broke the protocol: NAK (naming the next request due) and fail
  // the queue pair.
  void ProtocolError(const std::string& what);

  // The queue pair failed: completes every posted receive with kFlushed;
  // nothing more is acknowledged.
  void FlushAll(const std::string& reason);
  // Drops every posted receive without a completion.
  void Clear();

  // Binds a window over [addr, addr + length) of `mr` with `remote_access`
  // for this queue pair's peer (verbs.h, QueuePair::BindWindow, whose
  // status codes it returns) and returns its key.
  absl::StatusOr<uint32_t> BindWindow(const MemoryRegion& mr, char* addr, uint64_t length,
                                      uint32_t remote_access);
  // The range, access and region of `rkey` as this queue pair's peer may
  // use it: a live window of this queue pair, else a registered region
  // (region_key == rkey). False when it names neither.
  bool FindKey(uint32_t rkey, char** addr, uint64_t* length, uint32_t* access,
               uint32_t* region_key);
  // The region registered as `region_key` is going: its windows go too.
  void RemoveWindowsOf(uint32_t region_key) { windows_.RemoveRegion(region_key); }

  // Data bytes of the peer's operations executed here: peer_in (its WRITEs,
  // atomic operands) and peer_out (its READs, atomic results); the
  // initiated counts are 0. Thread-safe.
  QueuePairTraffic traffic() const;

 private:
  // False (after a protocol error) when `h` is not the request due next.
  bool CheckSeq(const FrameHeader& h);
  PayloadTarget StartWrite(const FrameHeader& h);
  void ExecuteRead(const FrameHeader& h);
  void ExecuteAtomic(const FrameHeader& h, const char* payload);
  // False (after rejecting `h`) when max_rd_atomic READ and atomic
  // responses are already queued: the peer exceeded its credits.
  bool HasResponseCredit(const FrameHeader& h);
  void QueueNak(uint64_t seq, WcStatus status, const std::string& text);
  // The remote-access check of a request: windows first, then regions.
  WcStatus CheckRemote(uint32_t rkey, uint64_t remote_addr, uint64_t length, uint32_t needed,
                       char** target, std::string* detail);

  // Constant after construction.
  const int max_recv_wr_;
  const int max_rd_atomic_;
  const std::string description_;
  RegionTable::View regions_;  // its cached snapshot changes
  WindowTable windows_;        // this queue pair's memory windows
  FrameWriter* const writer_;
  CompletionQueue* const completions_;
  ChannelControl* const control_;

  uint64_t next_exec_seq_ = 0;
  // Written by the NIC thread, read by the application's.
  std::atomic<uint64_t> peer_in_{0};
  std::atomic<uint64_t> peer_out_{0};
  bool ack_pending_ = false;  // WRITEs executed since the last ACK
  Ring<RecvRequest> rq_;
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_RESPONDER_H_
