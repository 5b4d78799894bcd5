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

struct Allocation {
  size_t segment_bytes;
  size_t size;  // bytes asked for: the end of the last segment past it is padding
  bool read_only;
  std::vector<int> fds;
};

struct Registry {
  Mutex mu;
  std::map<uintptr_t, Allocation> allocations ABSL_GUARDED_BY(mu);
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
  Registry& registry = GetRegistry();
  MutexLock lock(&registry.mu);
  registry.allocations[reinterpret_cast<uintptr_t>(m.data_)] =
      Allocation{segment_bytes, bytes, remote_read_only, m.fds_};
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
      registry.allocations.erase(reinterpret_cast<uintptr_t>(data_));
    }
    munmap(data_, mapped_);
  }
  for (int fd : fds_) close(fd);
  fds_.clear();
  data_ = nullptr;
  size_ = mapped_ = 0;
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

}  // namespace dreplay::verbs
