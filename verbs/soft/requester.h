// Copyright dreplay authors.
//
// requester.h: the requester side of one soft queue pair: this side's send
// queue, sent as request frames (frame_writer.h), and the peer's responses
// to them, which complete the requests.
//
//  * Outstanding READs + atomics are limited to the negotiated
//    max_rd_atomic (credits); further requests wait in the send queue until
//    a response returns a credit.
//  * The peer acknowledges WRITEs cumulatively (an ACK of seq completes
//    every request below seq); a completion is queued only for a signalled
//    request or a failure.
//  * A request whose local buffer failed its check at PostSend fails the
//    queue pair when it reaches the front of the queue, after everything
//    posted before it has completed.
//  * A WRITE or WRITE_WITH_IMM of at most max_inline_data bytes is copied at
//    Post (as a NIC copies an inline request into its work queue entry):
//    the application may reuse its source buffer as soon as PostSend
//    returns (verbs.h, "Inline contract").
//  * FaultOptions are applied here, to the requests this side sends: stalls,
//    dropped connections and torn WRITEs (provider.h).
//
// Not thread-safe: owned by a Channel (channel.h) and used under its lock.

#ifndef DREPLAY_VERBS_SOFT_REQUESTER_H_
#define DREPLAY_VERBS_SOFT_REQUESTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "verbs/options.h"
#include "verbs/soft/channel_control.h"
#include "verbs/soft/completion_queue.h"
#include "verbs/soft/frame_reader.h"
#include "verbs/soft/frame_writer.h"
#include "verbs/soft/region_table.h"
#include "verbs/soft/ring.h"
#include "verbs/soft/wire.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::soft {

// The gap between the two halves of a WRITE torn with TearMode::kOutOfOrder
// when FaultOptions::stall_for is zero.
inline constexpr absl::Duration kDefaultTearGap = absl::Milliseconds(10);

class Requester {
 public:
  // The pointers must outlive the requester.
  Requester(int max_send_wr, int max_rd_atomic, uint32_t max_inline_data,
            const FaultOptions& faults, RegionTable* regions, FrameWriter* writer,
            CompletionQueue* completions, ChannelControl* control);
  Requester(const Requester&) = delete;
  Requester& operator=(const Requester&) = delete;

  // What PostSend can refuse before it touches any state: an opcode that
  // cannot be posted, a missing or wrongly sized local buffer, or an atomic
  // on a misaligned remote word (kInvalidArgument).
  static absl::Status Validate(absl::Span<const WorkRequest> wrs);

  // Appends `wrs` to the send queue, checking each local buffer against the
  // registered regions (a failed check fails the request later, in order).
  // kResourceExhausted, and nothing queued, when they do not all fit.
  absl::Status Post(absl::Span<const WorkRequest> wrs);
  // Sends the queued requests that the credits allow, at `now` or later.
  void Transmit(int64_t now);

  // A response frame's header (ACK, READ or atomic response, NAK); says
  // where its payload goes.
  PayloadTarget StartResponse(const FrameHeader& header);
  // Its payload has arrived (`small` holds a small one).
  void CompleteResponse(const FrameHeader& header, const char* small);

  // The queue pair failed: completes every outstanding request, the first
  // with `first` unless that is kFlushed, the rest with kFlushed.
  void FlushAll(WcStatus first, const std::string& reason);
  // No request is outstanding (nothing posted and not yet completed).
  bool idle() const { return sq_.empty(); }
  // Requests posted and not yet completed.
  size_t queued() const { return sq_.size(); }
  // The check Post() applies to `wr`'s local buffer passes.
  bool LocalOk(const WorkRequest& wr);
  // True if an outstanding request uses `mr` as its local buffer.
  bool Uses(const MemoryRegion* mr) const;
  // Drops every request without a completion.
  void Clear();

 private:
  struct SendEntry {
    WorkRequest wr;
    uint64_t last_seq = 0;  // of its last frame, once transmitted
    // An inline WRITE's copy of its source, in inline_arena_; else null.
    const char* inline_copy = nullptr;
    WcStatus local_error = WcStatus::kSuccess;
    std::string local_detail;
  };

  void EmitRequest(SendEntry& e, int64_t now);
  // A WRITE's frames, torn as FaultOptions::tear says; the data come from
  // `inline_copy` when not null.
  void EmitWrite(const WorkRequest& wr, const char* inline_copy, FrameHeader h, int64_t not_before);
  // Queues one WRITE frame of `length` bytes from `data`, cut short when
  // the byte budget of FaultOptions::drop_after_bytes runs out.
  void QueueWrite(const FrameHeader& header, const char* data, uint32_t length, int64_t when);
  // Completes the transmitted requests below `seq`; false when the queue
  // pair failed (a READ or atomic acknowledged without its response).
  bool CompleteThrough(uint64_t seq);
  // Completes the front request: its completion goes to `batch` when
  // given (the caller pushes the batch), else straight to the queue.
  void CompleteFront(WcStatus status, uint32_t byte_len, std::string detail,
                     std::vector<Completion>* batch = nullptr);
  // Fails the queue pair when the front request failed its local check.
  void CheckFrontLocalError();

  // Constant after construction.
  const int max_send_wr_;
  const int max_rd_atomic_;
  const uint32_t max_inline_data_;
  const FaultOptions faults_;
  RegionTable::View regions_;  // its cached snapshot changes
  FrameWriter* const writer_;
  CompletionQueue* const completions_;
  ChannelControl* const control_;

  // max_send_wr slots of max_inline_data bytes, used in turn by inline
  // WRITEs: the send queue is FIFO and holds at most max_send_wr entries,
  // so a slot is reused only after the entry that used it completed.
  std::unique_ptr<char[]> inline_arena_;
  size_t next_inline_slot_ = 0;
  Ring<SendEntry> sq_;                 // posted, not yet completed
  size_t sq_transmitted_ = 0;          // prefix of sq_ sent
  int rd_in_flight_ = 0;               // READs + atomics sent
  std::vector<Completion> completed_;  // CompleteThrough's batch (kept empty)
  uint64_t next_request_seq_ = 0;
  // Fault injection state.
  uint64_t ops_sent_ = 0;
  uint64_t payload_bytes_sent_ = 0;
  uint64_t writes_sent_ = 0;
  int64_t stall_until_ns_ = 0;
  bool stalled_ = false;
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_REQUESTER_H_
