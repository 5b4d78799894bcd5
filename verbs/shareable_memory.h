// Copyright dreplay authors.
//
// shareable_memory.h: memory that the soft provider can share with a peer
// process on the same host, so that the peer performs its one-sided
// operations on it directly (verbs/soft/provider.h, "Same-host transport").
//
//   ASSIGN_OR_RETURN(ShareableMemory memory,
//                    ShareableMemory::Allocate(bytes, segment_bytes, /*remote_read_only=*/false));
//   auto mr = provider->RegisterMemory(memory.data(), memory.size(), access);
//
// An allocation is one contiguous mapping made of N segments of
// `segment_bytes` each (the last one may be shorter), each its own memfd
// mapped MAP_SHARED at its place in a reserved address range. A peer can be
// handed the fds of whole segments only (a memfd grants all of itself), so
// the segment size is the granularity of sharing: a memory window that does
// not cover whole segments stays on the TCP path.
//
// Every segment is sealed against growing and shrinking (a peer could
// otherwise truncate it under the owner, who would then fault). A
// `remote_read_only` allocation is also sealed with F_SEAL_FUTURE_WRITE once
// the owner has mapped it: nobody can map it writable or write() it any
// more, not even a peer that reopens the fd through /proc, while the
// owner's own mapping stays writable. The soft provider shares a window
// that grants only READ over sealed segments only.
//
// A process-wide registry maps addresses to segments: the soft provider
// asks it (FindSegments) which segments lie under a registered range. Plain
// memory (heap, vector) has none and keeps the TCP path.
//
// Revocation: a peer that mapped a segment cannot be made to unmap it.
// What can be taken back is this process's side: RenewClaimed gives a
// segment's addresses a fresh memfd holding a copy of its bytes, so every
// mapping a peer made of the old one (and every fd it kept) reaches a
// detached copy that nobody here reads any more. So that renewing cuts off
// only the grantee being revoked, a segment is granted writable to one
// holder (a queue pair) at a time (ClaimWritable). Sealed segments are
// never granted writable and never renewed.
//
// Thread safety: every static method and the destructor are thread-safe.
// A ShareableMemory is movable, not copyable; destroying it unmaps the
// memory and closes its fds (peers that mapped segments keep their pages).

#ifndef DREPLAY_VERBS_SHAREABLE_MEMORY_H_
#define DREPLAY_VERBS_SHAREABLE_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dreplay::verbs {

// One segment under a registered range, as FindSegments returns it.
struct SharedSegment {
  char* addr = nullptr;  // where it is mapped in this process
  size_t length = 0;
  int fd = -1;             // owned by the allocation; dup() it to keep it
  bool read_only = false;  // sealed with F_SEAL_FUTURE_WRITE
};

class ShareableMemory {
 public:
  // `bytes` > 0; `segment_bytes` a multiple of the page size, or 0 for one
  // segment of `bytes` (rounded up to pages). kInvalidArgument for a bad
  // size; kResourceExhausted / kInternal when the kernel refuses (memfd,
  // mmap, seals).
  static absl::StatusOr<ShareableMemory> Allocate(size_t bytes, size_t segment_bytes,
                                                  bool remote_read_only);

  ShareableMemory() = default;
  ShareableMemory(ShareableMemory&& other) noexcept;
  ShareableMemory& operator=(ShareableMemory&& other) noexcept;
  ShareableMemory(const ShareableMemory&) = delete;
  ShareableMemory& operator=(const ShareableMemory&) = delete;
  ~ShareableMemory();

  // Zero-filled at allocation; size() is the `bytes` asked for (the
  // mapping is rounded up to whole segments).
  char* data() const { return data_; }
  size_t size() const { return size_; }
  size_t segment_bytes() const { return segment_bytes_; }
  size_t segment_count() const { return segment_count_; }

  // The segments of live allocations lying wholly inside [addr, addr +
  // length), in address order, and whether they cover the range exactly
  // (*exact, if given: no byte of the range outside a listed segment). A
  // short last segment's padding past size() counts as inside, so the whole
  // allocation [data(), data() + size()) is exact. Any thread.
  static std::vector<SharedSegment> FindSegments(const void* addr, size_t length,
                                                 bool* exact = nullptr);

  // The page size segments are multiples of.
  static size_t PageBytes();

  // Claims `segments` (as FindSegments returned them) for the writable
  // grants of `holder` (!= 0). True when every one is unclaimed or already
  // `holder`'s and still has the fd listed (neither renewed nor freed
  // since): then all are `holder`'s. False, claiming nothing, otherwise.
  static bool ClaimWritable(const std::vector<SharedSegment>& segments, uint64_t holder);

  // Renews every segment `holder` claimed (see above) and releases the
  // claims: from then on nothing a peer writes through a mapping or fd it
  // was given reaches this process's memory. The latest claimed is renewed
  // first, so that when a peer WRITEs one key's memory and then another's
  // (a slot, then its commit word) and keys are claimed in the order the
  // peer first used them, the renewed copies never hold the second write
  // without the first. REQUIRES: no thread of this process writes those
  // segments while it runs (a write could land in the old memfd only);
  // reads see the same bytes throughout. Costs a copy of each segment
  // (new pages until the peer drops the old ones). Errors: ResourceExhausted /
  // Internal when the kernel refuses (memfd, mmap); the segments not
  // renewed stay reachable by whoever mapped them.
  static absl::Status RenewClaimed(uint64_t holder);

 private:
  void Release();

  char* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // whole segments
  size_t segment_bytes_ = 0;
  bool read_only_ = false;
  size_t segment_count_ = 0;
  std::vector<int> fds_;  // until the allocation is registered, which then owns them
};

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_SHAREABLE_MEMORY_H_
