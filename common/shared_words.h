// Copyright dreplay authors.
//
// shared_words.h: access to memory that remote peers (through the NIC) or, in
// tests, other threads change concurrently.
//
// The replay regions are plain memory that RDMA WRITEs and atomics change
// behind the CPU's back. The server reads such words with atomic loads, so the
// compiler neither tears nor caches them, and copies racy byte ranges with
// word-wise relaxed atomic loads and stores (a correct seqlock reader in the
// C++ memory model: the copy is validated afterwards by a commit word and a
// checksum). Tests that emulate remote peers with threads use the same helpers
// on their side, which keeps them ThreadSanitizer-clean.
//
// All pointers to words must be 8-byte aligned. Copies take 8-byte aligned
// shared addresses; the private side may be unaligned. Lengths need not be
// multiples of 8 (the tail is copied byte by byte).

#ifndef DREPLAY_COMMON_SHARED_WORDS_H_
#define DREPLAY_COMMON_SHARED_WORDS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dreplay {

static_assert(__atomic_always_lock_free(sizeof(uint64_t), 0), "u64 atomics must be lock-free");

inline uint64_t LoadAcquire(const uint64_t* word) {
  return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}
inline uint64_t LoadRelaxed(const uint64_t* word) {
  return __atomic_load_n(word, __ATOMIC_RELAXED);
}
inline void StoreRelease(uint64_t* word, uint64_t value) {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
}
inline void StoreRelaxed(uint64_t* word, uint64_t value) {
  __atomic_store_n(word, value, __ATOMIC_RELAXED);
}
// What a remote FETCH_ADD does; used by tests that emulate actors.
inline uint64_t FetchAdd(uint64_t* word, uint64_t addend) {
  return __atomic_fetch_add(word, addend, __ATOMIC_ACQ_REL);
}

inline void StoreReleaseDouble(double* word, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  static_assert(sizeof(double) == sizeof(uint64_t), "");
  __atomic_store_n(reinterpret_cast<uint64_t*>(word), bits, __ATOMIC_RELEASE);
}

// Copies n bytes out of shared memory `src` (8-byte aligned) into private `dst`.
inline void CopyFromShared(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint64_t*>(src);
  const size_t words = n / sizeof(uint64_t);
  for (size_t i = 0; i < words; ++i) {
    const uint64_t w = __atomic_load_n(s + i, __ATOMIC_RELAXED);
    std::memcpy(d + i * sizeof(uint64_t), &w, sizeof(w));
  }
  const auto* sb = reinterpret_cast<const uint8_t*>(s + words);
  for (size_t i = words * sizeof(uint64_t); i < n; ++i) {
    d[i] = __atomic_load_n(sb + (i - words * sizeof(uint64_t)), __ATOMIC_RELAXED);
  }
}

// Copies n bytes from private `src` into shared memory `dst` (8-byte aligned).
inline void CopyToShared(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint64_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  const size_t words = n / sizeof(uint64_t);
  for (size_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, s + i * sizeof(uint64_t), sizeof(w));
    __atomic_store_n(d + i, w, __ATOMIC_RELAXED);
  }
  auto* db = reinterpret_cast<uint8_t*>(d + words);
  for (size_t i = words * sizeof(uint64_t); i < n; ++i) {
    __atomic_store_n(db + (i - words * sizeof(uint64_t)), s[i], __ATOMIC_RELAXED);
  }
}

// Copies n bytes between two shared buffers (both 8-byte aligned), the
// reader side of a seqlock: every load is an acquire, so a load that follows
// the copy in program order (the second read of a commit word) cannot be
// performed before it. (No fences: ThreadSanitizer does not model them. On
// x86-64 acquire loads and relaxed stores are plain moves.)
inline void CopySharedToShared(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint64_t*>(dst);
  const auto* s = static_cast<const uint64_t*>(src);
  const size_t words = n / sizeof(uint64_t);
  for (size_t i = 0; i < words; ++i) {
    __atomic_store_n(d + i, __atomic_load_n(s + i, __ATOMIC_ACQUIRE), __ATOMIC_RELAXED);
  }
  auto* db = reinterpret_cast<uint8_t*>(d + words);
  const auto* sb = reinterpret_cast<const uint8_t*>(s + words);
  for (size_t i = 0; i < n - words * sizeof(uint64_t); ++i) {
    __atomic_store_n(db + i, __atomic_load_n(sb + i, __ATOMIC_ACQUIRE), __ATOMIC_RELAXED);
  }
}

}  // namespace dreplay

#endif  // DREPLAY_COMMON_SHARED_WORDS_H_
