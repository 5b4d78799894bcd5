// Copyright dreplay authors.

#include "verbs/soft/region_table.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay::verbs::soft {

RegionTable::RegionTable() : snapshot_(std::make_shared<const Map>()) {}

uint32_t RegionTable::Add(char* addr, size_t length, uint32_t access) {
  MutexLock lock(&mu_);
  uint32_t rkey = 0;
  do {
    rkey = absl::Uniform<uint32_t>(absl::IntervalClosed, rng_, 1, UINT32_MAX);
  } while (snapshot_->contains(rkey));
  auto next = std::make_shared<Map>(*snapshot_);
  next->emplace(rkey, Entry{addr, length, access});
  snapshot_ = std::move(next);
  version_.fetch_add(1, std::memory_order_release);
  return rkey;
}

void RegionTable::Remove(uint32_t rkey) {
  MutexLock lock(&mu_);
  auto next = std::make_shared<Map>(*snapshot_);
  next->erase(rkey);
  snapshot_ = std::move(next);
  version_.fetch_add(1, std::memory_order_release);
}

const RegionTable::Map& RegionTable::View::Current() {
  if (table_->version_.load(std::memory_order_acquire) != version_) {
    MutexLock lock(&table_->mu_);
    snapshot_ = table_->snapshot_;
    version_ = table_->version_.load(std::memory_order_relaxed);
  }
  return *snapshot_;
}

bool RegionTable::View::Find(uint32_t key, char** addr, uint64_t* length, uint32_t* access) {
  const Map& regions = Current();
  auto it = regions.find(key);
  if (it == regions.end()) return false;
  *addr = it->second.addr;
  *length = it->second.length;
  *access = it->second.access;
  return true;
}

WcStatus RegionTable::View::Check(uint32_t rkey, uint64_t remote_addr, uint64_t length,
                                  uint32_t needed, char** target, std::string* detail) {
  const Map& regions = Current();
  auto it = regions.find(rkey);
  if (it == regions.end()) {
    *detail = absl::StrFormat("rkey 0x%08x is not registered", rkey);
    return WcStatus::kRemoteAccessError;
  }
  const Entry& e = it->second;
  const auto begin = reinterpret_cast<uint64_t>(e.addr);
  if (remote_addr < begin || length > e.length || remote_addr - begin > e.length - length) {
    *detail = absl::StrFormat("[0x%x, +%u) is outside the region of rkey 0x%08x", remote_addr,
                              length, rkey);
    return WcStatus::kRemoteAccessError;
  }
  if ((e.access & needed) == 0) {
    *detail = absl::StrFormat("rkey 0x%08x does not grant %s", rkey,
                              needed == kRemoteRead    ? "remote read"
                              : needed == kRemoteWrite ? "remote write"
                                                       : "remote atomic");
    return WcStatus::kRemoteAccessError;
  }
  *target = e.addr + (remote_addr - begin);
  return WcStatus::kSuccess;
}

WcStatus RegionTable::View::CheckLocal(uint32_t lkey, const void* addr, uint64_t length,
                                       uint32_t needed, std::string* detail) {
  const Map& regions = Current();
  auto it = regions.find(lkey);
  if (it == regions.end()) {
    *detail = absl::StrFormat("lkey 0x%08x is not a memory region of this provider", lkey);
    return WcStatus::kLocalProtectionError;
  }
  const Entry& e = it->second;
  const auto begin = reinterpret_cast<uint64_t>(e.addr);
  const auto p = reinterpret_cast<uint64_t>(addr);
  if (p < begin || length > e.length || p - begin > e.length - length) {
    *detail = absl::StrFormat("local buffer [0x%x, +%u) is outside its region", p, length);
    return WcStatus::kLocalProtectionError;
  }
  if ((e.access & needed) != needed) {
    *detail = "the local region lacks local write access";
    return WcStatus::kLocalProtectionError;
  }
  return WcStatus::kSuccess;
}

namespace {

const char* AccessName(uint32_t needed) {
  return needed == kRemoteRead    ? "remote read"
         : needed == kRemoteWrite ? "remote write"
                                  : "remote atomic";
}

}  // namespace

absl::StatusOr<uint32_t> WindowTable::Bind(uint32_t region_key, char* addr, uint64_t length,
                                           uint32_t access, RegionTable::View* regions) {
  uint32_t key = 0;
  // A collision is rare (2^-32 per key held); a few draws always suffice.
  for (int attempt = 0; attempt < 64; ++attempt) {
    uint32_t drawn = 0;
    const ssize_t n = getrandom(&drawn, sizeof(drawn), 0);
    if (n != static_cast<ssize_t>(sizeof(drawn))) {
      return absl::InternalError(
          absl::StrCat("getrandom for a window key: ", n < 0 ? std::strerror(errno) : "short"));
    }
    if (drawn != 0 && !windows_.contains(drawn) && !regions->Contains(drawn)) {
      key = drawn;
      break;
    }
  }
  if (key == 0) return absl::InternalError("no free window key was drawn");
  windows_.emplace(key, Window{region_key, addr, length, access});
  return key;
}

void WindowTable::RemoveRegion(uint32_t region_key) {
  absl::erase_if(windows_,
                 [region_key](const auto& entry) { return entry.second.region_key == region_key; });
}

bool WindowTable::Find(uint32_t key, char** addr, uint64_t* length, uint32_t* access,
                       uint32_t* region_key) const {
  auto it = windows_.find(key);
  if (it == windows_.end()) return false;
  *addr = it->second.addr;
  *length = it->second.length;
  *access = it->second.access;
  *region_key = it->second.region_key;
  return true;
}

WcStatus WindowTable::Check(uint32_t key, uint64_t remote_addr, uint64_t length, uint32_t needed,
                            RegionTable::View* regions, char** target, std::string* detail) const {
  auto it = windows_.find(key);
  if (it == windows_.end()) {
    *detail = absl::StrFormat("rkey 0x%08x is not a window of this queue pair", key);
    return WcStatus::kRemoteAccessError;
  }
  const Window& w = it->second;
  if (!regions->Contains(w.region_key)) {
    *detail = absl::StrFormat("the region of window 0x%08x is deregistered", key);
    return WcStatus::kRemoteAccessError;
  }
  const auto begin = reinterpret_cast<uint64_t>(w.addr);
  if (remote_addr < begin || length > w.length || remote_addr - begin > w.length - length) {
    *detail = absl::StrFormat("[0x%x, +%u) is outside window 0x%08x", remote_addr, length, key);
    return WcStatus::kRemoteAccessError;
  }
  if ((w.access & needed) == 0) {
    *detail = absl::StrFormat("window 0x%08x does not grant %s", key, AccessName(needed));
    return WcStatus::kRemoteAccessError;
  }
  *target = w.addr + (remote_addr - begin);
  return WcStatus::kSuccess;
}

}  // namespace dreplay::verbs::soft
