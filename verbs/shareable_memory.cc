// Copyright dreplay authors.

#include "verbs/shareable_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"

namespace dreplay::verbs {
namespace {

// One segment's writable grant (ClaimWritable).
struct Claim {
  uint64_t holder = 0;  // 0: unclaimed
  uint64_t order = 0;   // when it was claimed (Registry::claims)
};

struct Allocation {
  size_t segment_bytes;
  size_t size;  // bytes asked for: the end of the last segment past it is padding
  bool read_only;
  std::vector<int> fds;       // owned
  std::vector<Claim> claims;  // one per segment
};

struct Registry {
  Mutex mu;
  std::map<uintptr_t, Allocation> allocations ABSL_GUARDED_BY(mu);
  uint64_t claims ABSL_GUARDED_BY(mu) = 0;  // claims made so far
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;
  return *registry;
}

absl::Status Errno(const char* what) {
  const int e = errno;
  const std::string text = absl::StrCat(what, ": ", std::strerror(e));
  return e == ENOMEM || e == EMFILE || e == ENFILE ? absl::ResourceExhaustedError(text)
                                                   : absl::InternalError(text);
}

}  // namespace

size_t ShareableMemory::PageBytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

absl::StatusOr<ShareableMemory> ShareableMemory::Allocate(size_t bytes, size_t segment_bytes,
                                                          bool remote_read_only) {
  const size_t page = PageBytes();
  if (bytes == 0) return absl::InvalidArgumentError("ShareableMemory: bytes must be > 0");
  const size_t rounded = (bytes + page - 1) / page * page;
  if (segment_bytes == 0) segment_bytes = rounded;
  if (segment_bytes % page != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShareableMemory: segment_bytes = ", segment_bytes,
                     " is not a multiple of the ", page, "-byte page"));
  }
  const size_t count = (rounded + segment_bytes - 1) / segment_bytes;
  const size_t mapped = count * segment_bytes;
  ShareableMemory m;
  void* base = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return Errno("ShareableMemory: reserving address space");
  m.data_ = static_cast<char*>(base);
  m.size_ = bytes;
  m.mapped_ = mapped;
  m.segment_bytes_ = segment_bytes;
  m.read_only_ = remote_read_only;
  for (size_t i = 0; i < count; ++i) {
    const int fd = memfd_create("dreplay-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return Errno("ShareableMemory: memfd_create");
    m.fds_.push_back(fd);
    if (ftruncate(fd, static_cast<off_t>(segment_bytes)) != 0) {
      return Errno("ShareableMemory: sizing a segment");
    }
    void* at = mmap(m.data_ + i * segment_bytes, segment_bytes, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED, fd, 0);
    if (at == MAP_FAILED) return Errno("ShareableMemory: mapping a segment");
    int seals = F_SEAL_SHRINK | F_SEAL_GROW;
    if (remote_read_only) seals |= F_SEAL_FUTURE_WRITE;
    if (fcntl(fd, F_ADD_SEALS, seals | F_SEAL_SEAL) != 0) {
      return Errno("ShareableMemory: sealing a segment");
    }
  }
  m.segment_count_ = count;
  Registry& registry = GetRegistry();
  MutexLock lock(&registry.mu);
  registry.allocations[reinterpret_cast<uintptr_t>(m.data_)] = Allocation{
      segment_bytes, bytes, remote_read_only, std::move(m.fds_), std::vector<Claim>(count)};
  m.fds_.clear();
  return m;
}

ShareableMemory::ShareableMemory(ShareableMemory&& other) noexcept { *this = std::move(other); }

ShareableMemory& ShareableMemory::operator=(ShareableMemory&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
    segment_bytes_ = std::exchange(other.segment_bytes_, 0);
    read_only_ = other.read_only_;
    segment_count_ = std::exchange(other.segment_count_, 0);
    fds_ = std::move(other.fds_);
    other.fds_.clear();
  }
  return *this;
}

ShareableMemory::~ShareableMemory() { Release(); }

void ShareableMemory::Release() {
  if (data_ != nullptr) {
    Registry& registry = GetRegistry();
    {
      MutexLock lock(&registry.mu);
      auto it = registry.allocations.find(reinterpret_cast<uintptr_t>(data_));
      if (it != registry.allocations.end()) {
        for (int fd : it->second.fds) close(fd);
        registry.allocations.erase(it);
      }
    }
    munmap(data_, mapped_);
  }
  for (int fd : fds_) close(fd);
  fds_.clear();
  data_ = nullptr;
  size_ = mapped_ = segment_count_ = 0;
}

std::vector<SharedSegment> ShareableMemory::FindSegments(const void* addr, size_t length,
                                                         bool* exact) {
  std::vector<SharedSegment> out;
  const auto begin = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t end = begin + length;
  uintptr_t covered_to = begin;
  bool contiguous = true;
  Registry& registry = GetRegistry();
  MutexLock lock(&registry.mu);
  // The last allocation starting at or before `begin`, then those after it.
  auto it = registry.allocations.upper_bound(begin);
  if (it != registry.allocations.begin()) --it;
  for (; it != registry.allocations.end() && it->first < end; ++it) {
    const Allocation& a = it->second;
    for (size_t i = 0; i < a.fds.size(); ++i) {
      const uintptr_t s = it->first + i * a.segment_bytes;
      // The padding past the allocation's size counts as covered.
      const uintptr_t e = std::min<uintptr_t>(s + a.segment_bytes, it->first + a.size);
      if (s < begin || e > end) continue;
      if (s != covered_to) contiguous = false;
      covered_to = e;
      out.push_back(
          SharedSegment{reinterpret_cast<char*>(s), a.segment_bytes, a.fds[i], a.read_only});
    }
  }
  if (exact != nullptr) *exact = contiguous && !out.empty() && covered_to == end;
  return out;
}

namespace {

// Where `segment` is listed (its allocation and index), when it still is
// with the same fd; null otherwise.
Allocation* FindListed(Registry& registry, const SharedSegment& segment, size_t* index)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry.mu) {
  const auto addr = reinterpret_cast<uintptr_t>(segment.addr);
  auto it = registry.allocations.upper_bound(addr);
  if (it == registry.allocations.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  const uintptr_t offset = addr - it->first;
  if (offset % a.segment_bytes != 0 || offset / a.segment_bytes >= a.fds.size()) return nullptr;
  *index = offset / a.segment_bytes;
  return a.fds[*index] == segment.fd ? &a : nullptr;
}

// Gives the segment mapped at `addr` (`bytes`, fd `*fd`) a fresh memfd
// with a copy of its bytes, mapped in its place; closes the old fd.
absl::Status RenewSegment(char* addr, size_t bytes, int* fd) {
  const int fresh = memfd_create("dreplay-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fresh < 0) return Errno("ShareableMemory: memfd_create");
  auto fail = [fresh](const char* what) {
    const absl::Status status = Errno(what);
    close(fresh);
    return status;
  };
  if (ftruncate(fresh, static_cast<off_t>(bytes)) != 0) {
    return fail("ShareableMemory: sizing a renewed segment");
  }
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = pwrite(fresh, addr + done, bytes - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("ShareableMemory: copying a renewed segment");
    done += static_cast<size_t>(n);
  }
  if (fcntl(fresh, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return fail("ShareableMemory: sealing a renewed segment");
  }
  // One call replaces the old mapping: a reader here never finds the
  // addresses unmapped, and sees the same bytes before and after.
  if (mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fresh, 0) == MAP_FAILED) {
    return fail("ShareableMemory: mapping a renewed segment");
  }
  close(*fd);
  *fd = fresh;
  return absl::OkStatus();
}

}  // namespace

bool ShareableMemory::ClaimWritable(const std::vector<SharedSegment>& segments, uint64_t holder) {
  if (holder == 0) return false;
  Registry& registry = GetRegistry();
  MutexLock lock(&registry.mu);
  std::vector<Claim*> claims;
  for (const SharedSegment& s : segments) {
    size_t i = 0;
    Allocation* a = FindListed(registry, s, &i);
    if (a == nullptr || a->read_only) return false;
    if (a->claims[i].holder != 0 && a->claims[i].holder != holder) return false;
    claims.push_back(&a->claims[i]);
  }
  for (Claim* c : claims) {
    if (c->holder == holder) continue;
    c->holder = holder;
    c->order = ++registry.claims;
  }
  return true;
}

absl::Status ShareableMemory::RenewClaimed(uint64_t holder) {
  if (holder == 0) return absl::OkStatus();
  Registry& registry = GetRegistry();
  MutexLock lock(&registry.mu);
  struct Renewal {
    uint64_t order;
    uintptr_t base;
    size_t index;
  };
  std::vector<Renewal> renewals;
  for (auto& [base, a] : registry.allocations) {
    for (size_t i = 0; i < a.claims.size(); ++i) {
      if (a.claims[i].holder == holder) renewals.push_back({a.claims[i].order, base, i});
    }
  }
  std::sort(renewals.begin(), renewals.end(),
            [](const Renewal& x, const Renewal& y) { return x.order > y.order; });
  absl::Status status;
  for (const Renewal& r : renewals) {
    Allocation& a = registry.allocations.at(r.base);
    a.claims[r.index] = Claim{};
    char* addr = reinterpret_cast<char*>(r.base + r.index * a.segment_bytes);
    status.Update(RenewSegment(addr, a.segment_bytes, &a.fds[r.index]));
  }
  return status;
}

}  // namespace dreplay::verbs
