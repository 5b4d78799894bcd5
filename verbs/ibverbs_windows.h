// Copyright dreplay authors.
//
// ibverbs_windows.h: the memory windows bound on a device, each owned jointly
// by the queue pair that bound it and the region it covers. Devices forbid
// freeing either of those while a window on them lives:
//  * rxe (kernel 6.0 and later) makes ibv_destroy_qp wait for the windows
//    bound through the queue pair, and an ibv_dealloc_mw after it touches
//    freed memory (on 5.14 to 5.19, a use-after-free at once);
//  * ibv_dereg_mr fails while a window is bound to the region.
// So whichever of the two goes first deallocates the window, and the other
// finds it gone: a queue pair's windows are gone before the queue pair is
// destroyed, and a region can always be deregistered (verbs.h: a window dies
// with its queue pair or with its region).
//
// Thread-safe.

#ifndef DREPLAY_VERBS_IBVERBS_WINDOWS_H_
#define DREPLAY_VERBS_IBVERBS_WINDOWS_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "verbs/ibverbs_api.h"

namespace dreplay::verbs::ibverbs {

class WindowTable {
 public:
  WindowTable() = default;
  WindowTable(const WindowTable&) = delete;
  WindowTable& operator=(const WindowTable&) = delete;

  // Records `mw`, allocated for `queue_pair` (any stable identity) and bound
  // (or about to be) over `region`.
  void Add(ibv_mw* mw, const void* queue_pair, const ibv_mr* region);

  // Deallocates, through `api`, the windows of `queue_pair` / over `region`
  // and forgets them. Returns how many; failures are logged.
  int ReleaseQueuePair(IbvApi* api, const void* queue_pair);
  int ReleaseRegion(IbvApi* api, const ibv_mr* region);

  size_t size() const;

 private:
  struct Entry {
    ibv_mw* mw = nullptr;
    const void* queue_pair = nullptr;
    const ibv_mr* region = nullptr;
  };
  template <typename Match>
  int Release(IbvApi* api, Match match);

  mutable absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_WINDOWS_H_
