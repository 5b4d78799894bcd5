// Copyright dreplay authors.
//
// ibverbs_attributes.h: what the verbs layer's flags and options become in
// libibverbs' structures, as pure functions (no verb is called), so that the
// exact flags and attribute masks are tested without a device.
//
// Thread-safe (pure).

#ifndef DREPLAY_VERBS_IBVERBS_ATTRIBUTES_H_
#define DREPLAY_VERBS_IBVERBS_ATTRIBUTES_H_

#include <infiniband/verbs.h>

#include <cstdint>

namespace dreplay::verbs::ibverbs {

// verbs.h access flags -> ibv_access_flags, one for one. Nothing is added:
// the caller checks them with CheckAccessFlags (access_rules.h) first, which
// refuses remote write or atomic access without local write, as
// libibverbs does.
int ToIbvAccess(uint32_t access);

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_ATTRIBUTES_H_
