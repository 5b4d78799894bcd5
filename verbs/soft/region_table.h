// Copyright dreplay authors.
//
// region_table.h: the soft provider's table of registered memory, the
// part of "the NIC" that checks every remote access.
//
// Each region gets an rkey (also used as its lkey) drawn from a cryptographically seeded generator
// (absl::BitGen): random, never a counter, never 0, unique in the table, so a
// peer cannot guess the key of a region it was not given. Check() is what
// the responder runs before it touches memory for a peer: the key must
// exist, [addr, addr + length) must lie inside its region, and the region
// must grant the access the request needs.
//
// The table is read on every request and changed only when memory is
// registered or deregistered, so it is read-mostly: a change publishes a new
// immutable snapshot and bumps a version; a reader (View) keeps the snapshot
// it last saw and takes the table's lock only when the version moved. A
// check therefore costs one atomic load and a hash lookup, and never waits
// for another thread. A check that starts after Remove() returned sees the
// key gone.
//
// RegionTable is thread-safe; a View is used by one thread at a time.
//
// WindowTable is one connection's memory windows (verbs.h, BindWindow):
// keys that only that connection's responder knows. A window names its
// region's key and is honoured only while that key is still registered, and
// only within its own range and rights. Window keys come from getrandom()
// (the kernel's CSPRNG): unpredictable, never 0, unique in the window table
// and, when drawn, not a registered region's key (the responder looks a key
// up among its windows first). Not thread-safe: owned by a Responder and
// used under its channel's lock.

#ifndef DREPLAY_VERBS_SOFT_REGION_TABLE_H_
#define DREPLAY_VERBS_SOFT_REGION_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::soft {

class RegionTable {
 private:
  struct Entry {
    char* addr;
    size_t length;
    uint32_t access;
  };
  using Map = absl::flat_hash_map<uint32_t, Entry>;

 public:
  RegionTable();

  // Registers [addr, addr + length) and returns its new rkey.
  uint32_t Add(char* addr, size_t length, uint32_t access);
  // Forgets `rkey`; checks that start after this returns fail.
  void Remove(uint32_t rkey);

  // A reader's cached snapshot of the table. Not thread-safe; must not
  // outlive its table.
  class View {
   public:
    explicit View(RegionTable* table) : table_(table) {}

    // On success stores the local address of `remote_addr` in *target and
    // returns kSuccess; otherwise returns kRemoteAccessError and explains
    // why in *detail. `needed` is one Access flag.
    WcStatus Check(uint32_t rkey, uint64_t remote_addr, uint64_t length, uint32_t needed,
                   char** target, std::string* detail);

    // The local side's check of a work request's buffer: `lkey` must be
    // registered here, [addr, addr + length) inside it, and, when `needed`
    // is not 0, the region must grant it (kLocalWrite). Returns kSuccess or
    // kLocalProtectionError with the reason in *detail.
    WcStatus CheckLocal(uint32_t lkey, const void* addr, uint64_t length, uint32_t needed,
                        std::string* detail);

    // True while `key` is registered.
    bool Contains(uint32_t key) { return Current().contains(key); }

    // The range and remote access bits of the region registered as `key`;
    // false when there is none.
    bool Find(uint32_t key, char** addr, uint64_t* length, uint32_t* access);

   private:
    // The current snapshot, refreshed when the table's version moved.
    const Map& Current();

    RegionTable* const table_;
    std::shared_ptr<const Map> snapshot_;
    uint64_t version_ = 0;  // of snapshot_; the table starts at 1
  };

 private:
  Mutex mu_;
  std::shared_ptr<const Map> snapshot_ ABSL_GUARDED_BY(mu_);
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
  // Bumped (under mu_) after each new snapshot is published.
  std::atomic<uint64_t> version_{1};
};

class WindowTable {
 public:
  // Binds a window over [addr, addr + length) of the region registered as
  // `region_key` with `access` (remote bits) and returns its new key.
  // kInternal when no random key can be drawn. The caller has checked the
  // range and the rights against the region.
  absl::StatusOr<uint32_t> Bind(uint32_t region_key, char* addr, uint64_t length, uint32_t access,
                                RegionTable::View* regions);
  // Forgets every window of the region registered as `region_key`.
  void RemoveRegion(uint32_t region_key);
  bool Contains(uint32_t key) const { return windows_.contains(key); }
  // The range, access and region of window `key`; false when there is none.
  bool Find(uint32_t key, char** addr, uint64_t* length, uint32_t* access,
            uint32_t* region_key) const;
  size_t size() const { return windows_.size(); }

  // As RegionTable::View::Check, for a key of this table: kSuccess with the
  // local address in *target, or kRemoteAccessError with the reason (also
  // when the window's region is no longer registered).
  WcStatus Check(uint32_t key, uint64_t remote_addr, uint64_t length, uint32_t needed,
                 RegionTable::View* regions, char** target, std::string* detail) const;

 private:
  struct Window {
    uint32_t region_key;
    char* addr;
    uint64_t length;
    uint32_t access;
  };
  absl::flat_hash_map<uint32_t, Window> windows_;
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_REGION_TABLE_H_
