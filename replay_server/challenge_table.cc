// Copyright dreplay authors.

#include "replay_server/challenge_table.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace dreplay::server {

absl::Status ChallengeTableOptions::Validate() const {
  if (per_source < 1 || per_source > capacity) {
    return absl::InvalidArgumentError(absl::StrCat("ChallengeTableOptions.per_source=", per_source,
                                                   " must be in [1, capacity=", capacity, "]"));
  }
  if (lifetime <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ChallengeTableOptions.lifetime=", absl::FormatDuration(lifetime), " must be > 0"));
  }
  return absl::OkStatus();
}

ChallengeTable::ChallengeTable(const ChallengeTableOptions& options) : options_(options) {
  const absl::Status valid = options_.Validate();
  CHECK(valid.ok()) << valid;
}

std::string ChallengeTable::Key(const protocol::Nonce& nonce) {
  return std::string(reinterpret_cast<const char*>(nonce.data()), nonce.size());
}

void ChallengeTable::Forget(const std::string& key) {
  auto it = entries_.find(key);
  CHECK(it != entries_.end());
  Entry& e = it->second;
  order_.erase(e.in_order);
  auto source = by_source_.find(e.source);
  source->second.erase(e.in_source);
  if (source->second.empty()) by_source_.erase(source);
  entries_.erase(it);
}

void ChallengeTable::Expire(absl::Time now) {
  while (!order_.empty() && entries_.at(order_.front()).expiry <= now) Forget(order_.front());
}

const std::string& ChallengeTable::Largest() const {
  auto largest = by_source_.begin();
  for (auto it = by_source_.begin(); it != by_source_.end(); ++it) {
    if (it->second.size() > largest->second.size()) largest = it;
  }
  return largest->first;
}

absl::StatusOr<protocol::Nonce> ChallengeTable::Issue(absl::string_view source, absl::Time now) {
  absl::StatusOr<protocol::Nonce> nonce = protocol::RandomNonce();
  if (!nonce.ok()) return nonce.status();
  Expire(now);
  auto own = by_source_.find(source);
  if (own != by_source_.end() && own->second.size() >= options_.per_source) {
    Forget(std::string(own->second.front()));
    ++evicted_per_source_;
  } else if (entries_.size() >= options_.capacity) {
    Forget(std::string(by_source_.at(Largest()).front()));
    ++evicted_by_capacity_;
  }
  const std::string key = Key(*nonce);
  std::list<std::string>& mine = by_source_[source];
  Entry e;
  e.expiry = now + options_.lifetime;
  e.source = std::string(source);
  e.in_order = order_.insert(order_.end(), key);
  e.in_source = mine.insert(mine.end(), key);
  entries_.emplace(key, std::move(e));
  return nonce;
}

bool ChallengeTable::Consume(const protocol::Nonce& nonce, absl::string_view source,
                             absl::Time now) {
  const std::string key = Key(nonce);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  const bool good = now < it->second.expiry && it->second.source == source;
  Forget(key);
  return good;
}

}  // namespace dreplay::server
