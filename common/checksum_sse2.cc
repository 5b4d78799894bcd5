// Copyright dreplay authors.
//
// XXH3 for the baseline x86-64 vector unit (or the scalar code elsewhere).

#define DREPLAY_XXH3_SUFFIX Baseline
#include "common/checksum_impl.inc"
