// Copyright dreplay authors.
//
// link.h: the soft provider's link emulator and precise clock.
//
// A LinkEmulator models one direction of a link: a frame handed to it at time
// `now` waits for the frames before it to finish serialising, takes
// bytes * 8 / bandwidth to serialise, then `one_way_delay` plus a uniform
// jitter in [0, jitter] to propagate. The sender holds the frame until that
// arrival time and then writes it to TCP (on loopback, TCP adds only a few
// microseconds). Frames never overtake each other: jitter delays a frame and
// everything behind it, as on a real fibre.
//
//   LinkEmulator link(model, seed);
//   int64_t arrive_ns = link.Schedule(MonotonicNowNs(), frame_bytes);
//
// When the sender holds frames (between hosts), the loopback path itself (a
// send, a wake-up of the receiving thread, a receive) takes about kHostPathNs
// one way after the frame leaves; that emulator is made with host_path_ns =
// kHostPathNs and holds frames that much less than `one_way_delay` (never
// less than zero), so that measured round trips match the model instead of
// exceeding it by the host's own latency. When the receiver releases frames
// (wire.h) the arrival time is exact and host_path_ns is 0.
//
// Not thread-safe: each connection direction owns one, used under its lock.

#ifndef DREPLAY_VERBS_SOFT_LINK_H_
#define DREPLAY_VERBS_SOFT_LINK_H_

#include <cstddef>
#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "verbs/options.h"

namespace dreplay::verbs::soft {

// CLOCK_MONOTONIC in nanoseconds.
int64_t MonotonicNowNs();

inline constexpr int64_t kHostPathNs = 20000;

// The slowest link the emulator models: 1 Mb/s. Below it the serialisation
// time of a large frame leaves int64 nanoseconds.
inline constexpr double kMinLinkBandwidthGbps = 0.001;

// What the soft provider accepts as a link model, from the application or
// from a connecting peer: LinkModel::Validate(), and a bandwidth that is 0
// (unlimited) or at least kMinLinkBandwidthGbps. kInvalidArgument naming
// the bad field otherwise.
absl::Status CheckLinkModel(const LinkModel& model);

// An id of this host's CLOCK_MONOTONIC: equal in two processes that read the
// same clock (the same kernel boot and time namespace, whatever their
// network namespaces). 0 when it cannot be told (no boot id).
uint64_t ClockId();

// Sets the calling thread's timer slack to the minimum, so that its timed
// waits wake within microseconds instead of the default 50 us.
void UsePreciseTimers();

// Who waits for a frame's modelled arrival (wire.h, "Receiver-released
// frames"):
enum class LinkRelease {
  // The sender holds it, less kHostPathNs; no stamp (ends on different
  // clocks).
  kSender,
  // The sender holds a request as kSender does and stamps its exact
  // arrival; the receiver holds it if it comes sooner (a host path under
  // kHostPathNs), so that no frame is ever early. A small response (under
  // 4 KiB: an ACK, a short READ's data) goes at once, stamped, and the
  // requester holds it, where the thread that polls for it releases it.
  kStamped,
  // The sender writes a small frame at once and a large one about when it
  // is due; the receiver holds each until its stamp.
  kReceiver,
};

class LinkEmulator {
 public:
  // `model` must pass CheckLinkModel(); `host_path_ns`: what the host's own
  // path adds after a frame leaves (above), taken off the modelled delay.
  LinkEmulator(const LinkModel& model, uint64_t seed, int64_t host_path_ns = kHostPathNs);

  // The part of the one-way delay left to the host's own path (at most
  // host_path_ns): what the emulator does not hold.
  int64_t host_path_ns() const { return host_path_ns_; }

  // False for a model with no delay, bandwidth limit or jitter: frames go out
  // at once and Schedule() need not be called.
  bool enabled() const { return enabled_; }

  struct Slot {
    // When the frame arrives at the peer (MonotonicNowNs scale).
    // Non-decreasing across calls.
    int64_t arrival_ns;
    // When it would arrive had the link been idle (no frames queued ahead
    // of it); <= arrival_ns.
    int64_t idle_arrival_ns;
  };
  // Schedules a frame of `bytes` handed to the link at `now_ns`.
  Slot Schedule(int64_t now_ns, size_t bytes);
  // When a frame of `bytes` handed to an idle link at `at_ns` would arrive
  // (no jitter); changes nothing.
  Slot Preview(int64_t at_ns, size_t bytes) const;

 private:
  const bool enabled_;
  const int64_t host_path_ns_;
  const int64_t delay_ns_;
  const int64_t jitter_ns_;
  const double ns_per_byte_;  // 0: unlimited bandwidth
  std::mt19937_64 rng_;
  int64_t link_free_ns_ = 0;  // when the last frame finished serialising
  int64_t last_arrival_ns_ = 0;
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_LINK_H_
