// Copyright dreplay authors.
//
// frame_reader.h: the incoming side of one soft queue pair's connection:
// reads the socket and cuts the byte stream into frames (wire.h), handing
// each frame's header and then its payload to a Handler.
//
// Input is read in large chunks and many frames are parsed per read. The
// Handler decides from each header where the payload goes: nowhere (the
// frame was dealt with at its header), the reader's small buffer (NAK text,
// atomic operands and results), or registered memory. A large payload bound
// for registered memory is received straight into place once its header has
// been checked; the channel's lock is released meanwhile, and
// WaitForPlacement() lets whoever must not race with that placement
// (destroying the queue pair, deregistering memory) wait for it to end.
//
// Receiver-released frames (wire.h): a reader made with `releases` leaves a
// frame whose release_ns is still ahead, and everything behind it, unparsed
// (and the socket unread) until that time; held_until() says when.
//
// Not thread-safe: owned by a Channel (channel.h) and used under its lock.

#ifndef DREPLAY_VERBS_SOFT_FRAME_READER_H_
#define DREPLAY_VERBS_SOFT_FRAME_READER_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "verbs/soft/wire.h"

namespace dreplay::verbs::soft {

// The largest payload received into the reader's own small buffer.
inline constexpr uint32_t kMaxSmallPayload = kMaxNakDetail;
static_assert(sizeof(AtomicPayload) <= kMaxSmallPayload, "operands fit");
static_assert(kAtomicResponseBytes <= kMaxSmallPayload, "results fit");

// Where the payload of a frame goes; its length is the header's
// payload_length.
struct PayloadTarget {
  enum class Kind {
    kNone,    // dealt with at the header, or refused: nothing to receive
    kSmall,   // the reader's small buffer (at most kMaxSmallPayload bytes)
    kMemory,  // registered memory at `memory`
    kPause,   // not now: keep the frame, stop parsing until Resume()
  };
  static PayloadTarget None() { return {Kind::kNone, nullptr}; }
  static PayloadTarget Pause() { return {Kind::kPause, nullptr}; }
  static PayloadTarget Small() { return {Kind::kSmall, nullptr}; }
  static PayloadTarget Memory(char* at) { return {Kind::kMemory, at}; }

  Kind kind;
  char* memory;
};

class FrameReader {
 public:
  // What the reader calls, on the thread that called Read().
  class Handler {
   public:
    // A frame's header has arrived; says where its payload goes.
    virtual PayloadTarget OnFrameHeader(const FrameHeader& header) = 0;
    // The frame's payload is in place (its header's target); `small` holds
    // it when the target was kSmall.
    virtual void OnFrameComplete(const FrameHeader& header, const char* small) = 0;

   protected:
    ~Handler() = default;
  };

  // `releases`: honour the frames' release_ns (above); else they are
  // parsed when they arrive.
  FrameReader(Handler* handler, bool releases);
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  enum class End {
    kOpen,        // input goes on
    kPeerClosed,  // the peer closed the connection
    kFailed,      // the socket failed; `*why` says how
  };
  // Reads what `fd` has (up to a budget per call, so that other sockets get
  // their turn) and hands every complete header and payload to the
  // handler. Releases `mu` while it receives a large payload straight into
  // registered memory. After kPeerClosed or kFailed the reader is closed.
  End Read(int fd, Mutex* mu, std::string* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Waits until Read() is not receiving into registered memory with `mu`
  // released; while the caller then holds `mu`, it cannot start to.
  void WaitForPlacement(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // True while another thread is inside Read(), receiving into registered
  // memory with `mu` released: Read() must not be called meanwhile.
  bool placing() const { return placing_; }

  // True while a payload is being received into [begin, end) of registered
  // memory (the header() frame's).
  bool PlacingInto(const char* begin, const char* end) const;
  // The header of the frame being received (or the last one).
  const FrameHeader& header() const { return header_; }

  // True after the handler answered a header with kPause: the frame is kept
  // and Read() parses and reads nothing until Resume(). The socket's input
  // stays in the socket, so the peer's sends block, as a NIC that cannot
  // send its responses stops taking requests.
  bool paused() const { return paused_; }
  // The next Read() offers the kept frame's header to the handler again.
  void Resume() { paused_ = false; }

  // When the frame at the head of the input is released (CLOCK_MONOTONIC
  // ns); 0 when none is held. Read() parses nothing before then.
  int64_t held_until() const { return held_until_; }
  // Of the held frame: how much later it may be released without harm
  // (FrameHeader::release_slack_us), and whether it is a response.
  int64_t held_slack_ns() const { return held_slack_ns_; }
  bool held_response() const { return held_response_; }

  // Ignores all further input (the queue pair failed).
  void Drain();
  // Stops reading: the socket is shut.
  void Close() { closed_ = true; }
  bool closed() const { return closed_; }

 private:
  enum class Phase { kHeader, kPayload, kDrain };

  // Parses the buffered input.
  void ParseBuffered();
  void StartFrame();
  void ExpectPayload(char* dst, bool into_memory);
  void FinishFrame();
  // recv() into the buffer; returns what recv() returned. *drained: it
  // returned less than there was room for (the socket is empty).
  ssize_t ReceiveBuffered(int fd, bool* drained);
  // readv() of the pending payload straight into its destination, plus
  // the start of whatever follows it, with `mu` released. *placed is false
  // when the bytes were dropped because the queue pair failed meanwhile;
  // *drained as for ReceiveBuffered().
  ssize_t ReceiveInPlace(int fd, Mutex* mu, bool* placed, bool* drained)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // True when the frame at the head of the buffer must wait for its
  // release time (sets held_until_).
  bool MustHold(const char* header);

  Handler* const handler_;
  const bool releases_;
  int64_t held_until_ = 0;
  int64_t held_slack_ns_ = 0;
  bool held_response_ = false;
  int64_t now_ns_ = 0;  // the clock as last read in this Read(); 0: not yet
  std::unique_ptr<char[]> buf_;
  size_t begin_ = 0;  // [begin_, end_) of buf_ is unparsed input
  size_t end_ = 0;
  bool closed_ = false;
  bool paused_ = false;

  Phase phase_ = Phase::kHeader;
  FrameHeader header_ = {};
  char* dst_ = nullptr;         // where the rest of the payload goes
  uint32_t left_ = 0;           // payload bytes still to come
  bool dst_is_memory_ = false;  // vs small_
  bool last_frame_large_ = false;
  alignas(8) char small_[kMaxSmallPayload];

  // Read() is receiving into registered memory with the lock released.
  bool placing_ = false;
  CondVar placement_done_;
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_FRAME_READER_H_
