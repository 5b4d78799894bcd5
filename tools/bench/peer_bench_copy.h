// Copyright dreplay authors.
//
// peer_bench_copy.h: tools/bench/peer_bench's two references.
//
// Memory: every arm moves each transition it counts through memory at
// least once (a writer's bytes into the memory, a sampled transition's
// bytes to the reader), and most several times (copies, checksums,
// sockets). One thread copying blocks of the payload size between two rings
// of the arms' memory size, out of cache, tells how many transitions per
// second one core can move once: the ceiling that a ratio between arms
// cannot escape when they all run on the same two cores.
//
//   ASSIGN_OR_RETURN(PeerCopyReference r,
//                    MeasurePeerCopy(28672, 256 << 20, absl::Seconds(1)));
//   // r.bytes_per_s, r.blocks_per_s
//
// Blocks are read in a scattered order (as sampling reads them) and written
// in ring order (as inserts write them), with memcpy.
//
// Sockets: where every counted transition crosses a socket at
// least once (Redis, gRPC, dreplay over the soft provider's TCP path), the
// kernel's own TCP stream over loopback on the same CPUs, sending messages
// of one insert's bytes with nothing else to do, tells how many
// transitions per second the two ends of one socket move, the sockets'
// copies and protocol work alone (tcp_baseline.h):
//
//   ASSIGN_OR_RETURN(PeerTcpReference t,
//                    MeasurePeerTcpStream(28672, 36 * 28672, absl::Seconds(1)));
//   // t.bytes_per_s, t.transitions_per_s
//
// Thread-safe; MeasurePeerCopy allocates two rings of `ring_bytes` for the
// call, MeasurePeerTcpStream opens its own sockets.

#ifndef DREPLAY_TOOLS_BENCH_PEER_BENCH_COPY_H_
#define DREPLAY_TOOLS_BENCH_PEER_BENCH_COPY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dreplay::tools {

struct PeerCopyReference {
  uint32_t payload_bytes = 0;
  double bytes_per_s = 0;   // bytes copied per second by one thread
  double blocks_per_s = 0;  // payload-sized blocks per second
  // Over several measurements (MedianReference): the lowest and highest
  // blocks_per_s; both equal blocks_per_s for one.
  double low = 0;
  double high = 0;
};

struct PeerTcpReference {
  uint32_t payload_bytes = 0;
  uint64_t message_bytes = 0;    // bytes per send()
  double bytes_per_s = 0;        // received by the far end
  double transitions_per_s = 0;  // bytes_per_s / payload_bytes
  // Over several measurements (MedianReference): the lowest and highest
  // transitions_per_s; both equal transitions_per_s for one.
  double low = 0;
  double high = 0;
};

// Copies `block_bytes` blocks for about `duration` (at least one full lap of
// the ring) after one untimed lap. InvalidArgument when block_bytes is 0,
// larger than ring_bytes, or duration is not positive; ResourceExhausted
// when the rings cannot be allocated.
absl::StatusOr<PeerCopyReference> MeasurePeerCopy(uint32_t block_bytes, uint64_t ring_bytes,
                                                  absl::Duration duration);

// Streams `message_bytes`-byte messages over loopback TCP for about
// `duration`. InvalidArgument when payload_bytes or message_bytes is 0 or
// duration is not positive; the socket calls' errors otherwise.
absl::StatusOr<PeerTcpReference> MeasurePeerTcpStream(uint32_t payload_bytes,
                                                      uint64_t message_bytes,
                                                      absl::Duration duration);

// The measurement of median rate (the lower middle) among `all` (not
// empty; one payload size), with `low` and `high` set to the extremes, so
// that a reference measured once per round is compared like the arms'
// median rounds.
PeerCopyReference MedianReference(std::vector<PeerCopyReference> all);
PeerTcpReference MedianReference(std::vector<PeerTcpReference> all);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_PEER_BENCH_COPY_H_
