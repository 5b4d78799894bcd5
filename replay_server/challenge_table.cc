// Copyright dreplay authors.

#include "replay_server/challenge_table.h"

#include "glog/logging.h"

namespace dreplay::server {

ChallengeTable::ChallengeTable(size_t capacity, absl::Duration lifetime)
    : capacity_(capacity), lifetime_(lifetime) {
  CHECK_GE(capacity_, 1u);
  CHECK_GT(lifetime_, absl::ZeroDuration());
}

std::string ChallengeTable::Key(const protocol::Nonce& nonce) {
  return std::string(reinterpret_cast<const char*>(nonce.data()), nonce.size());
}

void ChallengeTable::Trim(absl::Time now) {
  while (!order_.empty()) {
    auto it = expiry_.find(order_.front());
    if (it == expiry_.end()) {  // consumed already
      order_.pop_front();
    } else if (it->second <= now || expiry_.size() >= capacity_) {
      expiry_.erase(it);
      order_.pop_front();
    } else {
      break;
    }
  }
}

absl::StatusOr<protocol::Nonce> ChallengeTable::Issue(absl::Time now) {
  absl::StatusOr<protocol::Nonce> nonce = protocol::RandomNonce();
  if (!nonce.ok()) return nonce.status();
  Trim(now);
  const std::string key = Key(*nonce);
  expiry_[key] = now + lifetime_;
  order_.push_back(key);
  return nonce;
}

bool ChallengeTable::Consume(const protocol::Nonce& nonce, absl::Time now) {
  auto it = expiry_.find(Key(nonce));
  if (it == expiry_.end()) return false;
  const bool fresh = now < it->second;
  expiry_.erase(it);
  return fresh;
}

}  // namespace dreplay::server
