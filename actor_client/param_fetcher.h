// Copyright dreplay authors.
//
// param_fetcher.h: an actor READs the parameters the learner published in
// the server's params region (learner_client/param_publisher.h).
//
//   ASSIGN_OR_RETURN(auto fetcher, ParamFetcher::Create(session.get(), {}));
//   std::vector<uint8_t> params;
//   ASSIGN_OR_RETURN(bool fresh, fetcher->FetchIfNewer(&params));
//   if (fresh) LoadIntoNetwork(params);  // version fetcher->version()
//
// FetchIfNewer READs the ParamsHeader; when it names a version other than
// the fetcher's (and not 0, "none"), it READs that half (ParamsHalfHeader + data) and accepts it
// only when CheckParamsHalf() verifies it holds that version whole. A READ
// that overlapped the learner overwriting the half (torn: DataLoss, or
// already the version after next: Unavailable) is retried from the header,
// with a short back-off, up to max_attempts times.
//
// The half is READ with the size seen last time (param_bytes the first
// time), and again with the right size when the parameters grew.
//
// Failures: a failed connection is re-established through the session and
// the fetch retried. Thread safety: not thread-safe; one thread uses it (and
// its session).

#ifndef DREPLAY_ACTOR_CLIENT_PARAM_FETCHER_H_
#define DREPLAY_ACTOR_CLIENT_PARAM_FETCHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/session.h"
#include "protocol/layout.h"

namespace dreplay::actor {

struct ParamFetcherOptions {
  // Header + half READ rounds before FetchIfNewer gives up
  // (ResourceExhausted).
  int max_attempts = 20;
  absl::Duration retry_backoff = absl::Microseconds(200);

  absl::Status Validate() const;
};

struct ParamFetcherStats {
  uint64_t fetches = 0;  // new versions copied out
  uint64_t checks = 0;   // header READs
  uint64_t retries = 0;  // half READs that were torn or overtaken
  uint64_t bytes_read = 0;
  uint64_t reconnects = 0;
};

class ParamFetcher {
 public:
  // `session` is not owned and must outlive the fetcher (an actor's or a
  // learner's: both may READ the params region).
  static absl::StatusOr<std::unique_ptr<ParamFetcher>> Create(client::ClientSession* session,
                                                              const ParamFetcherOptions& options);
  ~ParamFetcher();
  ParamFetcher(const ParamFetcher&) = delete;
  ParamFetcher& operator=(const ParamFetcher&) = delete;

  // Blocking. true: a version other than version() was copied into *out
  // (resized to its size) and version() is now that version; false: the
  // published version is version() (or none is). A version is not compared
  // by size: after 2^64-1 the learner's versions wrap to 1, and a server
  // started afresh publishes from 1 again; either is fetched. ResourceExhausted when no whole copy
  // could be READ in max_attempts rounds (the learner publishes faster than this actor can READ);
  // connection errors when the session cannot reconnect.
  absl::StatusOr<bool> FetchIfNewer(std::vector<uint8_t>* out);

  // The version last fetched; 0: none.
  uint64_t version() const { return version_; }
  const ParamFetcherStats& stats() const { return stats_; }

 private:
  ParamFetcher(client::ClientSession* session, const ParamFetcherOptions& options, int sink);
  absl::StatusOr<bool> TryFetch(std::vector<uint8_t>* out);
  absl::Status Read(uint64_t offset, uint64_t length, uint8_t* local);

  client::ClientSession* const session_;
  const ParamFetcherOptions options_;
  const int sink_;
  // Registered: ParamsHeader, then a half (ParamsHalfHeader + param_bytes).
  std::unique_ptr<client::RegisteredBuffer> buffer_;
  uint64_t version_ = 0;
  uint64_t size_hint_ = 0;  // data bytes READ with the half
  uint64_t next_wr_id_ = 1;
  ParamFetcherStats stats_;
};

}  // namespace dreplay::actor

#endif  // DREPLAY_ACTOR_CLIENT_PARAM_FETCHER_H_
