// Copyright dreplay authors.

#include "common/checksum.h"

namespace dreplay {
namespace checksum_internal {

uint64_t OneShotBaseline(const void* data, size_t length, uint64_t seed);
void ResetBaseline(void* state, uint64_t seed);
void UpdateBaseline(void* state, const void* data, size_t length);
uint64_t DigestBaseline(const void* state);
#if defined(__x86_64__)
uint64_t OneShotAvx2(const void* data, size_t length, uint64_t seed);
void ResetAvx2(void* state, uint64_t seed);
void UpdateAvx2(void* state, const void* data, size_t length);
uint64_t DigestAvx2(const void* state);
#endif

}  // namespace checksum_internal
namespace {

struct Implementation {
  const char* name;
  uint64_t (*one_shot)(const void*, size_t, uint64_t);
  void (*reset)(void*, uint64_t);
  void (*update)(void*, const void*, size_t);
  uint64_t (*digest)(const void*);
};

Implementation Choose() {
  namespace ci = checksum_internal;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) {
    return {"avx2", ci::OneShotAvx2, ci::ResetAvx2, ci::UpdateAvx2, ci::DigestAvx2};
  }
  return {"sse2", ci::OneShotBaseline, ci::ResetBaseline, ci::UpdateBaseline, ci::DigestBaseline};
#else
  return {"scalar", ci::OneShotBaseline, ci::ResetBaseline, ci::UpdateBaseline, ci::DigestBaseline};
#endif
}

const Implementation& Chosen() {
  static const Implementation chosen = Choose();
  return chosen;
}

}  // namespace

uint64_t Xxh3(const void* data, size_t length, uint64_t seed) {
  return Chosen().one_shot(data, length, seed);
}

Xxh3Stream::Xxh3Stream(uint64_t seed) { Chosen().reset(state_, seed); }

void Xxh3Stream::Update(const void* data, size_t length) { Chosen().update(state_, data, length); }

uint64_t Xxh3Stream::Digest() const { return Chosen().digest(state_); }

const char* Xxh3Implementation() { return Chosen().name; }

}  // namespace dreplay
