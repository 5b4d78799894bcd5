// Copyright dreplay authors.

#include "tools/bench/peer_bench_copy.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "tools/bench/tcp_baseline.h"

namespace dreplay::tools {
namespace {

// A stride coprime with any power-of-two block count scatters the reads
// over the whole ring (and it is odd, so coprime with every such count).
constexpr uint64_t kReadStride = 40503;

// Copies one lap: block k of `to` from block (k * stride) mod blocks of
// `from`.
void CopyLap(const char* from, char* to, uint64_t blocks, uint64_t block_bytes) {
  uint64_t source = 0;
  for (uint64_t k = 0; k < blocks; ++k) {
    std::memcpy(to + k * block_bytes, from + source * block_bytes, block_bytes);
    source += kReadStride;
    source %= blocks;
  }
}

// The median of `all` by `rate`, with its low and high set.
template <typename Reference>
Reference Median(std::vector<Reference> all, double Reference::*rate) {
  CHECK(!all.empty()) << "no reference measured";
  std::sort(all.begin(), all.end(),
            [rate](const Reference& a, const Reference& b) { return a.*rate < b.*rate; });
  Reference r = all[(all.size() - 1) / 2];
  r.low = all.front().*rate;
  r.high = all.back().*rate;
  return r;
}

}  // namespace

PeerCopyReference MedianReference(std::vector<PeerCopyReference> all) {
  return Median(std::move(all), &PeerCopyReference::blocks_per_s);
}

PeerTcpReference MedianReference(std::vector<PeerTcpReference> all) {
  return Median(std::move(all), &PeerTcpReference::transitions_per_s);
}

absl::StatusOr<PeerCopyReference> MeasurePeerCopy(uint32_t block_bytes, uint64_t ring_bytes,
                                                  absl::Duration duration) {
  if (block_bytes == 0 || block_bytes > ring_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy reference: block of ", block_bytes, " bytes in a ring of ", ring_bytes));
  }
  if (duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy reference: duration ", absl::FormatDuration(duration)));
  }
  const uint64_t blocks = ring_bytes / block_bytes;
  const uint64_t bytes = blocks * block_bytes;
  std::unique_ptr<char[]> from(new (std::nothrow) char[bytes]);
  std::unique_ptr<char[]> to(new (std::nothrow) char[bytes]);
  if (from == nullptr || to == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("copy reference: two rings of ", bytes));
  }
  std::memset(from.get(), 0x5a, bytes);
  std::memset(to.get(), 0, bytes);
  CopyLap(from.get(), to.get(), blocks, block_bytes);  // untimed: pages in
  uint64_t laps = 0;
  const absl::Time start = absl::Now();
  absl::Duration elapsed;
  do {
    CopyLap(from.get(), to.get(), blocks, block_bytes);
    ++laps;
    elapsed = absl::Now() - start;
  } while (elapsed < duration);
  // The copies are observable: the last block holds what was copied.
  if (std::memcmp(to.get() + bytes - block_bytes, from.get(), block_bytes) != 0) {
    return absl::InternalError("copy reference: the copy did not land");
  }
  PeerCopyReference r;
  r.payload_bytes = block_bytes;
  const double seconds = absl::ToDoubleSeconds(elapsed);
  r.blocks_per_s = static_cast<double>(laps * blocks) / seconds;
  r.bytes_per_s = r.blocks_per_s * block_bytes;
  r.low = r.high = r.blocks_per_s;
  return r;
}

absl::StatusOr<PeerTcpReference> MeasurePeerTcpStream(uint32_t payload_bytes,
                                                      uint64_t message_bytes,
                                                      absl::Duration duration) {
  if (payload_bytes == 0 || message_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("TCP reference: transitions of ", payload_bytes,
                                                   " bytes in messages of ", message_bytes));
  }
  ASSIGN_OR_RETURN(const TcpStreamResult stream, RunLoopbackTcpStream(message_bytes, duration));
  PeerTcpReference r;
  r.payload_bytes = payload_bytes;
  r.message_bytes = message_bytes;
  r.bytes_per_s = stream.seconds > 0 ? static_cast<double>(stream.bytes) / stream.seconds : 0;
  r.transitions_per_s = r.bytes_per_s / payload_bytes;
  r.low = r.high = r.transitions_per_s;
  return r;
}

}  // namespace dreplay::tools
