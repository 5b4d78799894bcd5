// Copyright dreplay authors.
//
// peer_bench_copy.h: tools/bench/peer_bench's memory reference. Every arm moves
// each transition it counts through memory at least once (a writer's bytes
// into the memory, a sampled transition's bytes to the reader), and most
// several times (copies, checksums, sockets). One thread copying blocks of
// the payload size between two rings of the arms' memory size, out of
// cache, tells how many transitions per second one core can move once: the
// ceiling that a ratio between arms cannot escape when they all run on the
// same two cores.
//
//   ASSIGN_OR_RETURN(PeerCopyReference r,
//                    MeasurePeerCopy(28672, 256 << 20, absl::Seconds(1)));
//   // r.bytes_per_s, r.blocks_per_s
//
// Blocks are read in a scattered order (as sampling reads them) and written
// in ring order (as inserts write them), with memcpy.
//
// Thread-safe; allocates two rings of `ring_bytes` for the call.

#ifndef DREPLAY_TOOLS_BENCH_PEER_BENCH_COPY_H_
#define DREPLAY_TOOLS_BENCH_PEER_BENCH_COPY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dreplay::tools {

struct PeerCopyReference {
  uint32_t payload_bytes = 0;
  double bytes_per_s = 0;   // bytes copied per second by one thread
  double blocks_per_s = 0;  // payload-sized blocks per second
};

// Copies `block_bytes` blocks for about `duration` (at least one full lap of
// the ring) after one untimed lap. InvalidArgument when block_bytes is 0,
// larger than ring_bytes, or duration is not positive; ResourceExhausted
// when the rings cannot be allocated.
absl::StatusOr<PeerCopyReference> MeasurePeerCopy(uint32_t block_bytes, uint64_t ring_bytes,
                                                  absl::Duration duration);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_PEER_BENCH_COPY_H_
