// Copyright dreplay authors.

#include "rl/minatar/numpy_random.h"

#include "glog/logging.h"

namespace dreplay::rl::minatar {
namespace {

// The smallest 2**k - 1 that is >= rng.
uint64_t MaskFor(uint64_t rng) {
  uint64_t mask = rng;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  return mask;
}

}  // namespace

double LegacyRandomState::Rand() {
  const uint32_t a = NextUint32() >> 5;
  const uint32_t b = NextUint32() >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

uint64_t LegacyRandomState::NextUint64() {
  const uint64_t high = NextUint32();
  return (high << 32) | NextUint32();
}

int64_t LegacyRandomState::RandInt(int64_t low, int64_t high) {
  CHECK_LT(low, high);
  const uint64_t rng = static_cast<uint64_t>(high - 1) - static_cast<uint64_t>(low);
  if (rng == 0) return low;
  const uint64_t mask = MaskFor(rng);
  uint64_t value;
  if (rng <= 0xFFFFFFFFu) {
    do {
      value = NextUint32() & mask;
    } while (value > rng);
  } else {
    do {
      value = NextUint64() & mask;
    } while (value > rng);
  }
  return static_cast<int64_t>(static_cast<uint64_t>(low) + value);
}

}  // namespace dreplay::rl::minatar
