// Copyright dreplay authors.

#include "tools/bench/replay_bench_config.h"

#include <algorithm>

namespace dreplay::tools {
namespace {

// Largest capacity chosen automatically.
constexpr uint64_t kMaxAutoCapacity = uint64_t{1} << 18;
constexpr uint64_t kMaxAutoPrefill = 65536;

uint64_t FloorPowerOfTwo(uint64_t n) {
  uint64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

uint32_t SlotSizeFor(uint32_t payload_bytes) {
  return static_cast<uint32_t>(
      protocol::RoundUp(sizeof(protocol::SlotHeader) + payload_bytes, protocol::kSlotAlignment));
}

uint64_t AutoCapacity(uint32_t slot_size, uint64_t ring_bytes) {
  const uint64_t fit = ring_bytes / slot_size;
  return std::min(kMaxAutoCapacity, FloorPowerOfTwo(std::max<uint64_t>(fit, 2)));
}

uint64_t AutoPrefill(uint64_t capacity) { return std::min(capacity / 2, kMaxAutoPrefill); }

}  // namespace dreplay::tools
