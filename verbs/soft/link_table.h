// Copyright dreplay authors.
//
// link_table.h: one emulated link per pair of hosts.
//
// A soft provider plays one host. Every queue pair it opens to another
// provider sends over the same emulated fibre, as queue pairs between two
// machines share their link: frames of all of them are serialised one after
// another at the modelled bandwidth, so N queue pairs share it instead of
// getting N times as much. LinkTable hands out that shared direction of the
// link, keyed by the peer's host id (exchanged in setup, wire.h) and the
// link model; queue pairs to the same peer with a different model get a
// link of their own. Who waits for the frames' arrival (LinkRelease, link.h)
// is part of the key: it sets the emulator's host path. A link lives as
// long as a queue pair uses it.
//
//   LinkTable links;
//   std::shared_ptr<SharedLink> out =
//       links.Get(peer_host_id, model, seed, LinkRelease::kStamped);
//   out->Schedule(now, frame_bytes);   // from any thread
//
// Thread-safe.

#ifndef DREPLAY_VERBS_SOFT_LINK_TABLE_H_
#define DREPLAY_VERBS_SOFT_LINK_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "common/mutex.h"
#include "verbs/options.h"
#include "verbs/soft/link.h"

namespace dreplay::verbs::soft {

// One direction of a link, shared by the queue pairs that send over it.
class SharedLink {
 public:
  // `model` must pass CheckLinkModel(). With kReceiver the emulator's times
  // are the exact arrivals; else kHostPathNs is taken off (link.h).
  SharedLink(const LinkModel& model, uint64_t seed, LinkRelease release)
      : release_(release),
        emulator_(model, seed, release == LinkRelease::kReceiver ? 0 : kHostPathNs) {}

  bool enabled() const { return emulator_.enabled(); }
  LinkRelease release() const { return release_; }
  // LinkEmulator::host_path_ns (constant).
  int64_t host_path_ns() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return emulator_.host_path_ns(); }
  // A frame of `bytes` handed to the link at `at_ns`: LinkEmulator::Schedule,
  // serialised with every other user of the link. A frame that its sender
  // holds back (at_ns in the future: a stall injected by FaultOptions) does
  // not reserve the shared link ahead of time; it is timed as on an idle
  // link (LinkEmulator::Preview).
  LinkEmulator::Slot Schedule(int64_t at_ns, size_t bytes) {
    const bool held = at_ns > MonotonicNowNs();
    MutexLock lock(&mu_);
    return held ? emulator_.Preview(at_ns, bytes) : emulator_.Schedule(at_ns, bytes);
  }

 private:
  const LinkRelease release_;
  Mutex mu_;
  LinkEmulator emulator_ ABSL_GUARDED_BY(mu_);
};

class LinkTable {
 public:
  // The link to `peer_host` with `model`; made with `seed` when no queue
  // pair uses one yet. `model` must pass CheckLinkModel().
  std::shared_ptr<SharedLink> Get(uint64_t peer_host, const LinkModel& model, uint64_t seed,
                                  LinkRelease release);

 private:
  using Key = std::tuple<uint64_t, int64_t, int64_t, double, LinkRelease>;

  Mutex mu_;
  absl::flat_hash_map<Key, std::weak_ptr<SharedLink>> links_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_LINK_TABLE_H_
