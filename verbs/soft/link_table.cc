// Copyright dreplay authors.

#include "verbs/soft/link_table.h"

#include "absl/time/time.h"

namespace dreplay::verbs::soft {

std::shared_ptr<SharedLink> LinkTable::Get(uint64_t peer_host, const LinkModel& model,
                                           uint64_t seed, LinkRelease release) {
  const Key key{peer_host, absl::ToInt64Nanoseconds(model.one_way_delay),
                absl::ToInt64Nanoseconds(model.jitter), model.bandwidth_gbps, release};
  MutexLock lock(&mu_);
  // Forget the links nobody uses any more.
  absl::erase_if(links_, [](const auto& entry) { return entry.second.expired(); });
  std::shared_ptr<SharedLink> link = links_[key].lock();
  if (link == nullptr) {
    link = std::make_shared<SharedLink>(model, seed, release);
    links_[key] = link;
  }
  return link;
}

}  // namespace dreplay::verbs::soft
