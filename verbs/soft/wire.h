// Copyright dreplay authors.
//
// wire.h: the soft provider's protocol on its TCP connection.
//
// One TCP connection per queue pair carries, in order:
//
//   connector -> listener   the connection manager's Preamble (kHello, soft;
//                           verbs/setup_preamble.h), then HelloHeader and
//                           `payload_length` bytes of the application payload.
//   listener -> connector   Preamble kAccept, then ReplyHeader and
//                           `payload_length` bytes of the reply payload; or
//                           Preamble kReject, then the reason (text).
//
// After an accepted reply, both directions carry frames: a FrameHeader and
// `payload_length` bytes. Each side is requester and responder at once, so
// one direction interleaves its requests with its responses to the peer's
// requests. Requests are numbered 0, 1, 2, ... per direction (`seq`) and the
// responder executes them in that order.
//
//   kWrite, kWriteWithImm   payload: the data, placed at remote_addr.
//                           kWriteWithImm: aux is the immediate.
//   kRead                   no payload; aux: bytes to read at remote_addr.
//   kFetchAdd, kCompareSwap payload: AtomicPayload (16 bytes).
//   kAck                    no payload; seq: requests executed so far (every
//                           request below seq). Sent once per batch of input,
//                           not per request.
//   kReadResponse           payload: the data; seq: the READ it answers.
//   kAtomicResponse         payload: the 8-byte old value; seq: the request.
//   kNak                    payload: a short text; seq: the failed request;
//                           status: its WcStatus. The connection ends after it.
//
// Same-host transport (provider.h): when the setup linked the two ends by a
// Unix socket (HelloHeader::shm_name, ReplyHeader::shm), three more frames,
// outside the request numbering, hand the peer mappings of whole memfd
// segments under a key it holds:
//   kShareAsk               requester -> responder; rkey: a key it uses.
//   kShareGrant             rkey; remote_addr: the start of the range;
//                           aux: its remote access bits; payload:
//                           ShareGrant. The segments' fds went ahead on the
//                           Unix socket, tagged with the rkey.
//   kShareDeny              rkey: not shareable (stays on TCP).
//   kShareRevoke            rkey: its range is gone; unmap it.
//
// Receiver-released frames: with a link model, when both ends read the same
// CLOCK_MONOTONIC (equal, non-zero clock ids in hello and reply: the same
// kernel boot and time namespace, so also across network namespaces), the
// sender stamps each frame with the time from which it may be released
// (FrameHeader::release_ns), and the receiver leaves a frame that comes
// sooner, and everything behind it, unparsed until then. The sender still
// holds each request until that time less the host's own path (link.h), so
// a request is never early however fast the host; it writes small responses
// at once, and with ProviderOptions::soft_link_release = kReceiver every
// small frame, and the receiver alone holds them. Between hosts (different clock
// ids, or a provider with kSender: clock id 0) release_ns is 0 and only the
// sender holds frames.
//
// Every field is little-endian (both ends run this code on the same kind of
// host; see the static_assert below). Each receiver checks every length
// against its bounds before it trusts it.

#ifndef DREPLAY_VERBS_SOFT_WIRE_H_
#define DREPLAY_VERBS_SOFT_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dreplay::verbs::soft {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the soft provider's wire format is little-endian");

inline constexpr uint32_t kSetupMagic = 0x31565244;  // "DRV1" in memory
// 2: hello and reply carry the sender's host id (link_table.h).
// 3: hello and answer follow the connection manager's preamble, which
//    carries the reject (ReplyHeader::verdict is always kAccept).
// 4: hello and reply offer and answer the same-host transport (shm_*
//    fields, ReplyHeader::shm); the kShare* frames.
// 5: the same-host usage page carries each side's closed word
//    (shm_link.h): a peer stops using its mappings once the other side's
//    queue pair failed or was destroyed.
// 6: hello and reply carry the sender's clock id; FrameHeader carries
//    release_ns (frames released by the receiver, below).
inline constexpr uint16_t kWireVersion = 6;

// Bytes of the random abstract Unix socket name and of the nonce a hello
// offers for the same-host transport.
inline constexpr size_t kShmNameBytes = 16;
inline constexpr size_t kShmNonceBytes = 16;

// Bounds on what a peer may send during setup.
inline constexpr uint32_t kMaxSetupPayload = 64 * 1024;
inline constexpr uint32_t kMaxRejectReason = 1024;

// Largest READ or WRITE (InfiniBand allows 2^31 bytes).
inline constexpr uint32_t kMaxMessageBytes = 1u << 30;
// Longest text a NAK carries.
inline constexpr uint32_t kMaxNakDetail = 200;

struct HelloHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint32_t max_rd_atomic;
  uint32_t payload_length;
  // The connector's LinkModel; both sides apply it to what they send.
  int64_t link_delay_ns;
  int64_t link_jitter_ns;
  double link_bandwidth_gbps;
  uint64_t link_seed;
  // The connecting provider's random id: queue pairs between the same two
  // providers share one emulated link.
  uint64_t host_id;
  // The same-host transport offer: an abstract Unix socket name the
  // connector listens on (all zero: no offer) and the nonce the listener
  // must send there.
  uint8_t shm_name[kShmNameBytes];
  uint8_t shm_nonce[kShmNonceBytes];
  // The connector's clock id (ClockId(), link.h; 0: unknown).
  uint64_t clock_id;
};
static_assert(sizeof(HelloHeader) == 96, "HelloHeader is a wire structure");
static_assert(alignof(HelloHeader) == 8, "HelloHeader is a wire structure");

enum class SetupVerdict : uint8_t { kAccept = 1, kReject = 2 };

struct ReplyHeader {
  uint32_t magic;
  uint16_t version;
  uint8_t verdict;  // SetupVerdict
  uint8_t shm;      // 1: the listener connected to the offer's socket
  uint32_t max_rd_atomic;
  uint32_t payload_length;
  uint64_t host_id;   // the listening provider's id (see HelloHeader)
  uint64_t clock_id;  // the listener's clock id (see HelloHeader)
};
static_assert(sizeof(ReplyHeader) == 32, "ReplyHeader is a wire structure");

enum class FrameType : uint8_t {
  // Requests.
  kWrite = 1,
  kWriteWithImm = 2,
  kRead = 3,
  kFetchAdd = 4,
  kCompareSwap = 5,
  // Responses.
  kAck = 6,
  kReadResponse = 7,
  kAtomicResponse = 8,
  kNak = 9,
  // Same-host transport.
  kShareAsk = 10,
  kShareGrant = 11,
  kShareDeny = 12,
  kShareRevoke = 13,
};

inline bool IsRequest(FrameType t) {
  return t >= FrameType::kWrite && t <= FrameType::kCompareSwap;
}
inline bool IsResponse(FrameType t) { return t >= FrameType::kAck && t <= FrameType::kNak; }
inline bool IsShare(FrameType t) {
  return t >= FrameType::kShareAsk && t <= FrameType::kShareRevoke;
}

struct FrameHeader {
  uint8_t type;    // FrameType
  uint8_t status;  // kNak: the WcStatus of the failed request
  // Receiver-released frames (above): how much later than release_ns the
  // frame may be released without harm, in microseconds (saturating): a
  // frame queued behind others on the modelled link.
  uint16_t release_slack_us;
  uint32_t payload_length;  // bytes that follow this header
  uint64_t seq;
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t aux;  // kRead: length to read; kWriteWithImm: immediate
  // Receiver-released frames (above): the CLOCK_MONOTONIC nanosecond from
  // which the frame may be released: its modelled arrival, or, for a frame
  // queued behind others, up to 50 us before it but never before it would
  // arrive on an idle link (as a sender holding frames sends them; link.h).
  // 0: at once.
  int64_t release_ns;
};
static_assert(sizeof(FrameHeader) == 40, "FrameHeader is a wire structure");
static_assert(alignof(FrameHeader) == 8, "FrameHeader is a wire structure");

struct AtomicPayload {
  uint64_t compare_add;  // FETCH_ADD: addend; COMPARE_SWAP: compare
  uint64_t swap;         // COMPARE_SWAP: new value
};
static_assert(sizeof(AtomicPayload) == 16, "AtomicPayload is a wire structure");

// The payload of kShareGrant: `segments` segments of `segment_bytes`
// each, mapped one after another from remote_addr; `length` bytes of them
// may be used.
struct ShareGrant {
  uint64_t length;
  uint64_t segment_bytes;
  uint32_t segments;
  uint32_t reserved;
};
static_assert(sizeof(ShareGrant) == 24, "ShareGrant is a wire structure");

inline constexpr uint32_t kAtomicResponseBytes = sizeof(uint64_t);

// Text a peer sent (a reject reason, a NAK's detail), made safe to log and to
// put in a Status: bytes outside printable ASCII become '?'.
inline std::string PrintablePeerText(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_WIRE_H_
