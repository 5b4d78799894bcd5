// Copyright dreplay authors.

#include "common/peer_address.h"

namespace dreplay {

std::string SourceOf(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  if (colon == std::string::npos) return peer;
  std::string host = peer.substr(0, colon);
  // "[::1]:4242" names the host "::1".
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

}  // namespace dreplay
