// Copyright dreplay authors.

#include "verbs/ibverbs_windows.h"

#include <utility>

#include "glog/logging.h"
#include "verbs/ibverbs_errors.h"

namespace dreplay::verbs::ibverbs {

void WindowTable::Add(ibv_mw* mw, const void* queue_pair, const ibv_mr* region) {
  absl::MutexLock lock(&mu_);
  entries_.push_back(Entry{mw, queue_pair, region});
}

template <typename Match>
int WindowTable::Release(IbvApi* api, Match match) {
  std::vector<ibv_mw*> doomed;
  {
    absl::MutexLock lock(&mu_);
    std::vector<Entry> kept;
    for (const Entry& e : entries_) {
      if (match(e)) {
        doomed.push_back(e.mw);
      } else {
        kept.push_back(e);
      }
    }
    entries_ = std::move(kept);
  }
  for (ibv_mw* mw : doomed) {
    const absl::Status s = IbvResultToStatus(api->DeallocMw(mw), "ibv_dealloc_mw");
    LOG_IF(WARNING, !s.ok()) << s;
  }
  return static_cast<int>(doomed.size());
}

int WindowTable::ReleaseQueuePair(IbvApi* api, const void* queue_pair) {
  return Release(api, [queue_pair](const Entry& e) { return e.queue_pair == queue_pair; });
}

int WindowTable::ReleaseRegion(IbvApi* api, const ibv_mr* region) {
  return Release(api, [region](const Entry& e) { return e.region == region; });
}

size_t WindowTable::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace dreplay::verbs::ibverbs
