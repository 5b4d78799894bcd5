// Copyright dreplay authors.
//
// frame_writer.h: the outgoing side of one soft queue pair's connection: the
// queue of frames (this side's requests and its responses to the peer), the
// link emulator that holds each frame until its arrival time, and the
// socket writes.
//
// Where copies are avoided:
//  * A payload of up to kInlineCopyBytes is copied next to its header; a
//    larger one (a WRITE's source, a READ response's data) is sent straight
//    from registered memory (iovec), so Flush() writes many frames with one
//    sendmsg().
//  * A READ response that still points into registered memory is copied
//    (MaterializeResponseRefs) before the responder executes a later WRITE
//    or atomic, and before its region is deregistered, so that the READ
//    sees memory as it was when the READ was executed (RC order).
//
// Frames leave in the order they were queued. A close marker ends the
// output once everything queued before it is out.
//
// With a link model, a frame is held until its modelled arrival time, less
// the host's own path (link.h); where both ends read one clock it is also
// stamped with that time, and the peer's reader holds it if it comes early.
// With LinkRelease::kReceiver a small frame goes out at once and the peer's
// reader alone holds it (wire.h, "Receiver-released frames"); with
// LinkRelease::kStamped, a small response.
//
// Not thread-safe: owned by a Channel (channel.h) and used under its lock.

#ifndef DREPLAY_VERBS_SOFT_FRAME_WRITER_H_
#define DREPLAY_VERBS_SOFT_FRAME_WRITER_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "verbs/options.h"
#include "verbs/soft/link.h"
#include "verbs/soft/link_table.h"
#include "verbs/soft/ring.h"
#include "verbs/soft/wire.h"

namespace dreplay::verbs::soft {

// Payloads up to this many bytes are copied into the frame; larger ones are
// sent from registered memory.
inline constexpr uint32_t kInlineCopyBytes = 256;
static_assert(kMaxNakDetail <= kInlineCopyBytes, "a NAK's text goes inline");
static_assert(sizeof(AtomicPayload) <= kInlineCopyBytes, "operands go inline");

class FrameWriter {
 public:
  // Writes to `fd` (not owned; non-blocking), holding frames as `link`
  // (shared with the other queue pairs to the same host; link_table.h)
  // says; null: no link model.
  FrameWriter(int fd, std::shared_ptr<SharedLink> link);
  FrameWriter(const FrameWriter&) = delete;
  FrameWriter& operator=(const FrameWriter&) = delete;

  // Queues one of this side's requests: `header`, then `length` bytes of
  // `payload`, not sent before `not_before` (nor before the link emulator's
  // arrival time). A payload larger than kInlineCopyBytes is not copied: it
  // must stay valid until the frame is out or the output is closed.
  void QueueRequest(const FrameHeader& header, const char* payload, uint32_t length,
                    int64_t not_before);
  // Queues a response to the peer, to go now; dropped when a close is
  // queued or the output is closed (nobody would read it). A large payload
  // is registered memory: see MaterializeResponseRefs().
  void QueueResponse(const FrameHeader& header, const char* payload, uint32_t length);
  // Ends the output after everything queued so far; `reason` is what
  // Flush() reports when it gets there.
  void QueueClose(int64_t not_before, const std::string& reason);
  // Without a link model, raises the seq of a queued ACK that has not
  // started to go out to `seq`, so that it covers more; false when there is
  // no such ACK at the back of the queue (then a new one must be queued).
  bool ExtendQueuedAck(uint64_t seq);
  // Copies the queued READ responses that still point into registered
  // memory.
  void MaterializeResponseRefs();

  // READ and atomic responses queued and not yet fully sent (they count
  // against max_rd_atomic).
  int responses_queued() const { return responses_queued_; }
  // Bytes of the queued READ responses that still point into registered
  // memory: what MaterializeResponseRefs() would copy.
  uint64_t response_ref_bytes() const { return response_ref_bytes_; }
  bool close_queued() const { return close_queued_; }
  // True once the write side is shut: nothing more will be sent.
  bool closed() const { return out_closed_; }
  // True when the socket would take no more at the last Flush().
  bool blocked() const { return out_blocked_; }

  enum class Stop {
    kNone,        // the output goes on
    kCloseSent,   // a queued close was reached; the write side is shut
    kSendFailed,  // the socket failed; the output is closed
  };
  // Writes the frames whose send time is at or before `send_by`, until the
  // socket is full. When it returns other than kNone, `*why` says why (the
  // reason given to QueueClose(), or the socket's error).
  Stop Flush(int64_t send_by, std::string* why);

  // When the first queued frame is to go (`send_ns`) and how much later it
  // may go without harm (`slack_ns`). False when nothing is waiting for
  // time: the queue is empty, blocked on the socket or closed.
  bool NextSend(int64_t* send_ns, int64_t* slack_ns) const;

  // The connection is unusable: drops every frame; nothing more is sent.
  void Abort();
  // The queue pair failed: drops this side's requests that have not started
  // to go out, copies what a half-sent one still needs from application
  // memory, and queues a close behind the responses already queued. Nothing
  // when a close is already queued or the output is closed.
  void CloseAfterQueued(const std::string& reason);
  // The queue pair is being destroyed: drops every frame.
  void Discard();

 private:
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
    // Copies the `ref` bytes into `owned`, so the frame no longer points
    // into memory that the application owns.
    void TakeCopy() {
      owned.reset(new char[ref_len]);
      std::memcpy(owned.get(), ref, ref_len);
      ref = owned.get();
    }
    static constexpr uint32_t kHeadCapacity = sizeof(FrameHeader) + kInlineCopyBytes;
    int64_t send_ns = 0;   // not sent before this time
    int64_t slack_ns = 0;  // how much later it may go without harm
    uint32_t head_len = 0;
    uint32_t ref_len = 0;
    uint64_t sent = 0;          // bytes of head + ref already written
    bool is_request = false;    // false: a response to the peer
    bool response_ref = false;  // `ref` is registered memory (READ response)
    bool response = false;      // READ or atomic response (credit count)
    bool close_after = false;   // shut the connection once this is out
    const char* ref = nullptr;
    std::unique_ptr<char[]> owned;  // a private copy that `ref` points into
    alignas(8) char head[kHeadCapacity];
  };

  OutFrame& QueueFrame(const FrameHeader& header, const char* payload, uint32_t length,
                       int64_t not_before);
  // Marks the first `wrote` bytes of the queue as sent and releases the
  // frames that are complete.
  void Consume(size_t wrote);

  const int fd_;
  const std::shared_ptr<SharedLink> link_;  // null: no link model
  Ring<OutFrame> out_;
  bool out_blocked_ = false;  // socket full
  bool out_closed_ = false;
  bool close_queued_ = false;
  std::string close_reason_;
  // LinkRelease::kReceiver: the latest modelled arrival of a queued frame
  // (a close waits for it).
  int64_t last_release_ns_ = 0;
  int responses_queued_ = 0;
  int response_refs_ = 0;            // queued frames with response_ref set
  uint64_t response_ref_bytes_ = 0;  // their ref_len, summed
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_FRAME_WRITER_H_
