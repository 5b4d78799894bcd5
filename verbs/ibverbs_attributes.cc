// Copyright dreplay authors.

#include "verbs/ibverbs_attributes.h"

#include "verbs/verbs.h"

namespace dreplay::verbs::ibverbs {

int ToIbvAccess(uint32_t access) {
  int flags = 0;
  if (access & kLocalWrite) flags |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  if (access & kRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  if (access & kRemoteAtomic) flags |= IBV_ACCESS_REMOTE_ATOMIC;
  return flags;
}

}  // namespace dreplay::verbs::ibverbs
