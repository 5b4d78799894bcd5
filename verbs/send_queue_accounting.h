// Copyright dreplay authors.
//
// send_queue_accounting.h: the send-queue bookkeeping of an RC queue pair
// with selective signalling, kept apart from libibverbs so it can be tested
// without a device.
//
// A device retires send requests only through completions, and writes a
// completion only for a signalled request; on RC a completion also retires
// every unsignalled request posted before it. So an unsignalled request that
// no later signalled request follows is never retired, and its slot is lost
// until something signalled is posted behind it. If the room left is then
// smaller than the next span, that span is refused for good. Two rules keep
// every posted request retirable:
//
//  * The last request of every post is signalled on the wire (whatever the
//    caller asked), so no post leaves an unsignalled run behind it.
//  * Within a post, one request in every `signal_every` is signalled too, so
//    a long span retires in pieces.
//
// Signals forced by these rules are the queue pair's business: it reports a
// completion only for the requests its caller signalled (or that failed).
//
// Sequence numbers start at 0 and increase by one per posted request; the
// queue pair uses them as the ibv wr_id.
//
// Thread safety: none; owned by one queue pair and used by one thread.

#ifndef DREPLAY_VERBS_SEND_QUEUE_ACCOUNTING_H_
#define DREPLAY_VERBS_SEND_QUEUE_ACCOUNTING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace dreplay::verbs {

class SendQueueAccounting {
 public:
  // `capacity` is the send queue's max_send_wr; `signal_every` the longest
  // run of unsignalled requests within a post.
  // REQUIRES: 1 <= signal_every <= capacity.
  SendQueueAccounting(int capacity, int signal_every);

  int capacity() const { return capacity_; }
  int signal_every() const { return signal_every_; }
  uint64_t posted() const { return posted_; }    // next sequence number
  uint64_t retired() const { return retired_; }  // all below are complete
  uint64_t outstanding() const { return posted_ - retired_; }
  // Posted requests that no posted signalled request at or after them will
  // retire. 0 after every complete post; only a partial post leaves some.
  uint64_t uncovered() const;

  // OK when `n` more requests fit; kResourceExhausted otherwise.
  absl::Status CheckRoom(size_t n) const;

  // Plans a post: call PlanNext once per request, in order, with `last` set
  // for the final one; it says whether that request is signalled on the
  // wire. Then EndPost(k) with how many of the planned requests the device
  // took (the first k). REQUIRES: CheckRoom(number planned) was OK.
  bool PlanNext(bool user_signaled, bool last);
  void EndPost(size_t taken);

  // Whether request `seq` was signalled on the wire.
  // REQUIRES: retired() <= seq < posted().
  bool IsSignaled(uint64_t seq) const;

  // A completion for request `seq` retires it and everything before it
  // (RC completes in order). False, and nothing changes, when `seq` is not
  // outstanding (a stale completion).
  bool Retire(uint64_t seq);
  // Retires everything outstanding (the queue pair failed and flushed it).
  void RetireAll() { retired_ = posted_; }

 private:
  const int capacity_;
  const int signal_every_;
  std::vector<uint8_t> wire_signaled_;  // ring of capacity_, by sequence number
  uint64_t posted_ = 0;
  uint64_t retired_ = 0;
  uint64_t covered_end_ = 0;  // 1 + the last signalled posted sequence number
  // The post being planned.
  uint64_t planned_ = 0;
  uint64_t plan_covered_end_ = 0;
};

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_SEND_QUEUE_ACCOUNTING_H_
