// Copyright dreplay authors.
//
// options.h: options of the verbs layer, each with Validate().

#ifndef DREPLAY_VERBS_OPTIONS_H_
#define DREPLAY_VERBS_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dreplay::verbs {

enum class ProviderKind { kAuto, kIbverbs, kSoft };
// "auto", "ibverbs", "soft".
absl::StatusOr<ProviderKind> ParseProviderKind(const std::string& name);
const char* ProviderKindName(ProviderKind kind);

// How the soft provider reaches a peer on the same host (provider.h,
// "Same-host transport"): kAuto shares memory when both ends are on one
// host and trust each other's uid, else TCP; kTcp always TCP (for fault
// injection through a TCP proxy, or same-host peers that are not trusted).
enum class SoftTransport { kAuto, kTcp };
// "auto", "tcp".
absl::StatusOr<SoftTransport> ParseSoftTransport(const std::string& name);
const char* SoftTransportName(SoftTransport transport);

// Who waits for each frame's modelled arrival on the soft provider's TCP
// path (verbs/soft/wire.h, "Receiver-released frames"). kAuto: the sender
// holds it, less the host's own latency, and where both ends read one clock
// (one host, whatever the network namespaces) the receiver also holds one
// that comes early, so that none is ever early; there a small response (an
// ACK, a short READ's data) goes at once and the requester alone holds it,
// released by the thread that polls for it. kReceiver: where both ends
// read one clock, the sender writes small frames at once and the receiver
// alone holds them (no sender waits for them); else as kAuto. kSender: the
// sender alone holds them, as between hosts (a peer that asks for this
// makes both ends do so).
enum class SoftLinkRelease { kAuto, kReceiver, kSender };
// "auto", "receiver", "sender".
absl::StatusOr<SoftLinkRelease> ParseSoftLinkRelease(const std::string& name);

struct ProviderOptions {
  ProviderKind kind = ProviderKind::kAuto;
  // soft only; see SoftTransport.
  SoftTransport soft_transport = SoftTransport::kAuto;
  // soft only; see SoftLinkRelease.
  SoftLinkRelease soft_link_release = SoftLinkRelease::kAuto;

  // ibverbs only. Empty device: the first device with an active port.
  std::string ib_device;
  int ib_port = 1;
  // -1: choose automatically (a RoCE v2 GID with an IPv4-mapped address,
  // else the first valid GID).
  int gid_index = -1;
  // ibverbs only: the IP traffic class (ibv_ah_attr.grh.traffic_class) of
  // every queue pair's packets on RoCE v2, [0, 255]: DSCP in the upper six
  // bits, ECN in the lower two (e.g. 106 = DSCP 26 with ECT(0), for a
  // lossy long link whose switches mark ECN). 0: unmarked.
  int traffic_class = 0;

  absl::Status Validate() const;
};

// Emulated link (soft provider only). Each side delays the frames it sends:
// serialisation at `bandwidth_gbps`, then `one_way_delay` (+ up to `jitter`,
// uniformly, from a generator seeded with `seed`). The connecting side's
// settings are sent to the listener, so both directions see the same link.
struct LinkModel {
  absl::Duration one_way_delay = absl::ZeroDuration();
  double bandwidth_gbps = 0;  // 0: unlimited
  absl::Duration jitter = absl::ZeroDuration();
  uint64_t seed = 1;

  bool enabled() const {
    return one_way_delay > absl::ZeroDuration() || bandwidth_gbps > 0 ||
           jitter > absl::ZeroDuration();
  }
  absl::Status Validate() const;
};

// Named presets: "none", "10km-25g" (50 us one way, 25 Gb/s), "100km-10g"
// (500 us, 10 Gb/s), "1000km-1g" (5 ms, 1 Gb/s). Or "DELAY_US:GBPS" such as
// "50:25".
absl::StatusOr<LinkModel> ParseLinkModel(const std::string& spec);

// How a torn WRITE is placed (fault injection).
enum class TearMode : uint8_t {
  kNone,
  kPrefix,      // only the first half of the bytes are placed, then the QP dies
  kOutOfOrder,  // the second half is placed before the first
};

// Faults (soft provider only, for tests). Counters are per queue pair and
// count requests this side sends.
struct FaultOptions {
  uint64_t drop_after_ops = 0;                      // 0: never. Drop the connection after N ops
  uint64_t drop_after_bytes = 0;                    // 0: never. ... after N payload bytes
  uint64_t stall_after_ops = 0;                     // 0: never. Hold later requests ...
  absl::Duration stall_for = absl::ZeroDuration();  // ... for this long
  TearMode tear = TearMode::kNone;
  uint64_t tear_op_index = 0;  // which WRITE (0-based, by post order) to tear

  bool enabled() const {
    return drop_after_ops || drop_after_bytes || stall_after_ops || tear != TearMode::kNone;
  }
  absl::Status Validate() const;
};

// 6 retries of min_rnr_timer each, then kRnrRetryExceeded; 7 would be
// infinite on hardware.
inline constexpr int kDefaultRnrRetry = 6;
inline constexpr int kInfiniteRnrRetry = 7;
static_assert(kDefaultRnrRetry < kInfiniteRnrRetry, "the default must be finite");

struct QueuePairOptions {
  int max_send_wr = 256;
  int max_recv_wr = 256;
  // Outstanding READs and atomics this side asks for; the connection uses the
  // minimum of both sides and the device limits (mlx5: 16).
  int max_rd_atomic = 16;
  uint32_t max_inline_data = 220;
  absl::Duration connect_timeout = absl::Seconds(10);

  // ibverbs: ack timeout exponent (4.096 us * 2^t) and retries, tuned for a
  // ~100 us round trip; soft: unused.
  int ack_timeout = 14;
  int retry_cnt = 7;
  // kDefaultRnrRetry: finite. 7 means "retry forever" to the hardware (IB
  // spec), so a WRITE_WITH_IMM to a peer that posts no receive would hang
  // instead of failing with kRnrRetryExceeded.
  int rnr_retry = kDefaultRnrRetry;
  int min_rnr_timer = 12;  // 0.64 ms

  LinkModel link;       // soft only
  FaultOptions faults;  // soft only

  absl::Status Validate() const;
};

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_OPTIONS_H_
