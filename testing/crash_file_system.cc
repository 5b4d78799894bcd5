// Copyright dreplay authors.

#include "testing/crash_file_system.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"

namespace dreplay::testing {
namespace {

std::string Normal(const std::string& path) {
  std::string p = std::filesystem::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

absl::Status Dead(const char* what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": simulated crash"));
}

}  // namespace

class CrashFileSystem::File : public server::WritableFile {
 public:
  File(CrashFileSystem* fs, std::string path, std::shared_ptr<Inode> inode)
      : fs_(fs), path_(std::move(path)), inode_(std::move(inode)) {}
  ~File() override {
    if (inode_ != nullptr) fs_->CloseFile(inode_.get());
  }
  absl::Status Append(absl::string_view data) override {
    const absl::Status s = fs_->WriteTo(path_, inode_.get(), end_, data);
    end_ += data.size();  // what fitted is written; the end is not used after an error
    return s;
  }
  absl::Status WriteAt(uint64_t offset, absl::string_view data) override {
    end_ = std::max<uint64_t>(end_, offset + data.size());
    return fs_->WriteTo(path_, inode_.get(), offset, data);
  }
  absl::Status Sync() override { return fs_->SyncFile(path_, inode_.get()); }
  absl::Status Close() override {
    fs_->CloseFile(inode_.get());
    inode_.reset();
    return absl::OkStatus();
  }

 private:
  CrashFileSystem* const fs_;
  const std::string path_;
  std::shared_ptr<Inode> inode_;
  uint64_t end_ = 0;
};

class CrashFileSystem::Reader : public server::ReadableFile {
 public:
  explicit Reader(std::string data) : data_(std::move(data)) {}
  absl::StatusOr<uint64_t> Size() override { return data_.size(); }
  absl::StatusOr<size_t> Read(void* data, size_t n) override {
    const size_t k = std::min(n, data_.size() - at_);
    std::memcpy(data, data_.data() + at_, k);
    at_ += k;
    return k;
  }

 private:
  const std::string data_;  // a copy taken at open
  size_t at_ = 0;
};

CrashFileSystem::CrashFileSystem(std::string root) : root_(Normal(root)) {
  absl::MutexLock lock(&mu_);
  dirs_[root_];
}

CrashFileSystem::~CrashFileSystem() = default;

void CrashFileSystem::CrashAfter(uint64_t changes) {
  absl::MutexLock lock(&mu_);
  crash_after_ = changes == kUnlimited ? kUnlimited : changes_ + changes;
}

bool CrashFileSystem::dead() const {
  absl::MutexLock lock(&mu_);
  return dead_;
}

uint64_t CrashFileSystem::changes() const {
  absl::MutexLock lock(&mu_);
  return changes_;
}

void CrashFileSystem::SetSpaceLimit(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  space_limit_ = bytes;
}

uint64_t CrashFileSystem::used_bytes() const {
  absl::MutexLock lock(&mu_);
  return UsedLocked();
}

uint64_t CrashFileSystem::UsedLocked() const {
  std::set<const Inode*> seen;
  uint64_t used = 0;
  auto count = [&](const Inode* inode) {
    if (inode != nullptr && seen.insert(inode).second) used += inode->data.size();
  };
  for (const auto& [path, dir] : dirs_) {
    for (const auto& [name, entry] : dir.live) count(entry.get());
  }
  for (const auto& inode : open_) count(inode.get());
  return used;
}

std::vector<std::string> CrashFileSystem::List(const std::string& dir) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  const auto it = dirs_.find(Normal(dir));
  if (it == dirs_.end()) return names;
  for (const auto& [name, entry] : it->second.live) names.push_back(name);
  return names;
}

absl::StatusOr<std::pair<std::string, std::string>> CrashFileSystem::Split(
    const std::string& path) const {
  const std::filesystem::path p(Normal(path));
  const std::string dir = p.parent_path().string();
  if (dir.compare(0, root_.size(), root_) != 0 || p.filename().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not under ", root_));
  }
  return std::make_pair(dir, p.filename().string());
}

CrashFileSystem::Directory* CrashFileSystem::FindDirectory(const std::string& dir) {
  const auto it = dirs_.find(Normal(dir));
  return it == dirs_.end() ? nullptr : &it->second;
}

absl::StatusOr<CrashFileSystem::Entry> CrashFileSystem::Lookup(const std::string& path) {
  absl::StatusOr<std::pair<std::string, std::string>> split = Split(path);
  if (!split.ok()) return split.status();
  Directory* d = FindDirectory(split->first);
  if (d == nullptr) return absl::NotFoundError(absl::StrCat("no file ", path));
  const auto it = d->live.find(split->second);
  if (it == d->live.end()) return absl::NotFoundError(absl::StrCat("no file ", path));
  return it->second;
}

absl::Status CrashFileSystem::CountChange(const char* what, const std::string& path) {
  if (dead_ || changes_ >= crash_after_) {
    dead_ = true;
    return Dead(what, path);
  }
  ++changes_;
  return absl::OkStatus();
}

void CrashFileSystem::Apply(Directory* d, const CrashFileSystem::Change& change) {
  for (const auto& [name, entry] : change) {
    if (entry.has_value()) {
      d->live[name] = *entry;
    } else {
      d->live.erase(name);
    }
  }
  d->pending.push_back(change);
}

absl::StatusOr<std::unique_ptr<server::WritableFile>> CrashFileSystem::NewWritableFile(
    const std::string& path) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::pair<std::string, std::string>> split = Split(path);
  if (!split.ok()) return split.status();
  Directory* d = FindDirectory(split->first);
  if (d == nullptr) return absl::InternalError(absl::StrCat("open ", path, ": no directory"));
  if (absl::Status s = CountChange("open", path); !s.ok()) return s;
  std::shared_ptr<Inode> inode;
  const auto it = d->live.find(split->second);
  if (it != d->live.end() && it->second != nullptr) {
    inode = it->second;  // O_TRUNC keeps the inode
    inode->data.clear();
    inode->pending.push_back({0, "", true});
  } else {
    inode = std::make_shared<Inode>();
    Apply(d, {{split->second, inode}});
  }
  ++inode->open_writers;
  open_.push_back(inode);
  return std::unique_ptr<server::WritableFile>(new File(this, Normal(path), inode));
}

absl::Status CrashFileSystem::WriteTo(const std::string& path, Inode* inode, uint64_t offset,
                                      absl::string_view bytes) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CountChange("write", path); !s.ok()) return s;
  const uint64_t end = offset + bytes.size();
  const uint64_t growth = end > inode->data.size() ? end - inode->data.size() : 0;
  const uint64_t used = UsedLocked();
  bool full = false;
  if (space_limit_ != kUnlimited && growth > 0 && used + growth > space_limit_) {
    const uint64_t room = space_limit_ > used ? space_limit_ - used : 0;
    const uint64_t fits =
        inode->data.size() + room > offset ? inode->data.size() + room - offset : 0;
    bytes = bytes.substr(0, std::min<uint64_t>(fits, bytes.size()));
    full = true;
  }
  if (offset + bytes.size() > inode->data.size()) inode->data.resize(offset + bytes.size());
  inode->data.replace(offset, bytes.size(), bytes.data(), bytes.size());
  if (!bytes.empty()) inode->pending.push_back({offset, std::string(bytes), false});
  if (full) return absl::InternalError(absl::StrCat("write ", path, ": No space left on device"));
  return absl::OkStatus();
}

absl::Status CrashFileSystem::SyncFile(const std::string& path, Inode* inode) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CountChange("fsync", path); !s.ok()) return s;
  inode->synced = inode->data;
  inode->pending.clear();
  return absl::OkStatus();
}

void CrashFileSystem::CloseFile(Inode* inode) {
  absl::MutexLock lock(&mu_);
  const auto it = std::find_if(open_.begin(), open_.end(),
                               [&](const std::shared_ptr<Inode>& p) { return p.get() == inode; });
  if (it != open_.end()) open_.erase(it);
}

absl::StatusOr<std::unique_ptr<server::ReadableFile>> CrashFileSystem::NewReadableFile(
    const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (dead_) return Dead("open", path);
  absl::StatusOr<Entry> entry = Lookup(path);
  if (!entry.ok()) return entry.status();
  if (*entry == nullptr) return absl::InternalError(absl::StrCat("read ", path, ": a directory"));
  return std::unique_ptr<server::ReadableFile>(new Reader((*entry)->data));
}

bool CrashFileSystem::Exists(const std::string& path) {
  absl::MutexLock lock(&mu_);
  return Normal(path) == root_ || Lookup(path).ok();
}

bool CrashFileSystem::IsDirectory(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  return FindDirectory(dir) != nullptr;
}

absl::Status CrashFileSystem::Rename(const std::string& from, const std::string& to) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry> entry = Lookup(from);
  if (!entry.ok()) return entry.status();
  absl::StatusOr<std::pair<std::string, std::string>> a = Split(from);
  absl::StatusOr<std::pair<std::string, std::string>> b = Split(to);
  if (!b.ok()) return b.status();
  if (*entry == nullptr || a->first != b->first) {
    return absl::UnimplementedError("renames of directories or across directories");
  }
  if (absl::Status s = CountChange("rename", from); !s.ok()) return s;
  Apply(FindDirectory(a->first), {{a->second, std::nullopt}, {b->second, *entry}});
  return absl::OkStatus();
}

absl::Status CrashFileSystem::Link(const std::string& from, const std::string& to) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry> entry = Lookup(from);
  if (!entry.ok()) return entry.status();
  if (Lookup(to).ok()) return absl::InternalError(absl::StrCat("link as ", to, ": File exists"));
  absl::StatusOr<std::pair<std::string, std::string>> b = Split(to);
  if (!b.ok()) return b.status();
  Directory* d = FindDirectory(b->first);
  if (d == nullptr) return absl::InternalError(absl::StrCat("link as ", to, ": no directory"));
  if (absl::Status s = CountChange("link", to); !s.ok()) return s;
  Apply(d, {{b->second, *entry}});
  return absl::OkStatus();
}

absl::Status CrashFileSystem::Remove(const std::string& path) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry> entry = Lookup(path);
  if (!entry.ok()) return entry.status();
  if (absl::Status s = CountChange("unlink", path); !s.ok()) return s;
  absl::StatusOr<std::pair<std::string, std::string>> a = Split(path);
  Apply(FindDirectory(a->first), {{a->second, std::nullopt}});
  return absl::OkStatus();
}

absl::Status CrashFileSystem::CreateDirectory(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  if (FindDirectory(dir) != nullptr) return absl::OkStatus();
  absl::StatusOr<std::pair<std::string, std::string>> split = Split(dir);
  if (!split.ok()) return split.status();
  Directory* parent = FindDirectory(split->first);
  if (parent == nullptr || parent->live.count(split->second) > 0) {
    return absl::InternalError(absl::StrCat("mkdir ", dir, ": no parent, or a file"));
  }
  if (absl::Status s = CountChange("mkdir", dir); !s.ok()) return s;
  Apply(parent, {{split->second, nullptr}});
  dirs_[Normal(dir)];
  return absl::OkStatus();
}

absl::Status CrashFileSystem::SyncDirectory(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  Directory* d = FindDirectory(dir);
  if (d == nullptr) return absl::InternalError(absl::StrCat("open directory ", dir, ": none"));
  if (absl::Status s = CountChange("fsync directory", dir); !s.ok()) return s;
  d->durable = d->live;
  d->pending.clear();
  return absl::OkStatus();
}

void CrashFileSystem::Crash(uint64_t seed) {
  absl::MutexLock lock(&mu_);
  std::mt19937_64 rng(seed);
  std::set<Inode*> files;
  for (auto& [path, d] : dirs_) {
    std::map<std::string, Entry> names = d.durable;
    const size_t kept =
        seed == 0 ? 0 : std::uniform_int_distribution<size_t>(0, d.pending.size())(rng);
    for (size_t k = 0; k < kept; ++k) {
      for (const auto& [name, entry] : d.pending[k]) {
        if (entry.has_value()) {
          names[name] = *entry;
        } else {
          names.erase(name);
        }
      }
    }
    d.live = d.durable = names;
    d.pending.clear();
    for (const auto& [name, entry] : names) {
      if (entry != nullptr) files.insert(entry.get());
    }
  }
  // Directories whose name was lost go with what they held (parents first:
  // the map's order puts "a" before "a/b").
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    const std::filesystem::path p(it->first);
    const auto parent = dirs_.find(p.parent_path().string());
    const bool lost = it->first != root_ &&
                      (parent == dirs_.end() || parent->second.live.count(p.filename()) == 0);
    it = lost ? dirs_.erase(it) : std::next(it);
  }
  for (Inode* inode : files) {
    std::string data = inode->synced;
    for (const Write& w : inode->pending) {
      if (seed == 0 || std::bernoulli_distribution(0.5)(rng) == false) continue;
      if (w.truncate) {
        data.clear();
        continue;
      }
      if (w.offset + w.bytes.size() > data.size()) data.resize(w.offset + w.bytes.size());
      data.replace(w.offset, w.bytes.size(), w.bytes);
    }
    inode->data = inode->synced = data;
    inode->pending.clear();
  }
  open_.clear();
  dead_ = false;
  crash_after_ = kUnlimited;
}

}  // namespace dreplay::testing
