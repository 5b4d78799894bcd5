// Copyright dreplay authors.
//
// XXH3 for AVX2: this file is compiled with -mavx2 (common/BUILD) and only
// called where the processor has AVX2 (checksum.cc).

#if defined(__x86_64__)
#if !defined(__AVX2__)
#error "checksum_avx2.cc must be compiled with -mavx2"
#endif
#define DREPLAY_XXH3_SUFFIX Avx2
#include "common/checksum_impl.inc"
#endif
