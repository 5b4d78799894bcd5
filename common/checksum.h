// Copyright dreplay authors.
//
// checksum.h: XXH3-64, the checksum of every slot, staged batch, parameter
// half, mailbox entry, stats line and checkpoint (protocol/config.h's seed).
//
//   const uint64_t sum = Xxh3(data, length, kChecksumSeed);
//   Xxh3Stream stream(kChecksumSeed);
//   stream.Update(header, 56);
//   stream.Update(payload, n);
//   const uint64_t same = stream.Digest();  // == Xxh3 of the concatenation
//
// The values are XXH3's, the same on every machine: the hashing itself is
// xxHash's own code (its header, compiled here), built twice, for the
// baseline x86-64 vector unit (SSE2) and for AVX2, and chosen once per
// process from what the processor has. The system's libxxhash is built for
// SSE2 only, which hashes 28 KiB slots about 3x slower than AVX2 on the same
// core; hashing was a third of the CPU of a 28 KiB replay run.
//
// Thread safety: Xxh3 is thread-safe; an Xxh3Stream is used by one thread.

#ifndef DREPLAY_COMMON_CHECKSUM_H_
#define DREPLAY_COMMON_CHECKSUM_H_

#include <cstddef>
#include <cstdint>

namespace dreplay {

// XXH3-64 of [data, data + length) with `seed`.
uint64_t Xxh3(const void* data, size_t length, uint64_t seed);

// XXH3-64 of a sequence of byte ranges, as if they were one.
class Xxh3Stream {
 public:
  explicit Xxh3Stream(uint64_t seed);
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;

  void Update(const void* data, size_t length);
  // The checksum of everything given so far; Update may go on after it.
  uint64_t Digest() const;

  // The size of XXH3's streaming state (checked against xxhash.h).
  static constexpr size_t kStateBytes = 576;

 private:
  alignas(64) unsigned char state_[kStateBytes];
};

// "avx2" or "sse2": the implementation this process uses.
const char* Xxh3Implementation();

}  // namespace dreplay

#endif  // DREPLAY_COMMON_CHECKSUM_H_
