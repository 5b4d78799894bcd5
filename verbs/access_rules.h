// Copyright dreplay authors.
//
// access_rules.h: the one rule both providers apply to the access flags of a
// memory region (verbs.h's kLocalWrite, kRemoteRead, kRemoteWrite,
// kRemoteAtomic), so a region that registers on one provider registers on
// the other.
//
// The rule is libibverbs' own (ibv_reg_mr fails with EINVAL otherwise):
//  * only the four flags above and kMemoryWindowBind are known;
//  * kRemoteWrite or kRemoteAtomic needs kLocalWrite as well. It is never
//    added silently: a caller that asks for remote write access asks for
//    local write access too, and access() reports exactly what was asked.
//
// Pure and thread-safe.

#ifndef DREPLAY_VERBS_ACCESS_RULES_H_
#define DREPLAY_VERBS_ACCESS_RULES_H_

#include <cstdint>

#include "absl/status/status.h"

namespace dreplay::verbs {

// Every access flag verbs.h defines.
uint32_t AllAccessFlags();

// OK, or kInvalidArgument naming the unknown bits or the missing
// kLocalWrite.
absl::Status CheckAccessFlags(uint32_t access);

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_ACCESS_RULES_H_
