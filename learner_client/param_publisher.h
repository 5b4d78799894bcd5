// Copyright dreplay authors.
//
// param_publisher.h: the learner publishes model parameters in the server's
// params region, where actors READ them (actor_client/param_fetcher.h).
//
//   ASSIGN_OR_RETURN(auto publisher, ParamPublisher::Create(session.get()));
//   ASSIGN_OR_RETURN(uint64_t version, publisher->Publish(serialized_params));
//
// Version v (1, 2, ...) goes to half ParamsHalfOf(v) (protocol/README.md, "Parameters"):
// EncodeParamsHalf into a local buffer, one WRITE of the half (header +
// data), then one WRITE of the ParamsHeader {v, half} on the same queue
// pair, so the header never names a half before it is placed. Publish
// blocks until the header WRITE completes, so the next version (the other
// half) cannot overtake it and the one after (this half again) starts only
// after readers could see this one.
//
// Versions continue from the server's: Create (and every reconnection)
// READs the ParamsHeader, and the next version is NextVersion() of the
// larger of the server's and the last one this publisher wrote, so a
// version is not written twice, even across a server restart (which
// empties the params region). After 2^64-1 comes 2 (0 means "none"; 2 keeps
// the halves alternating); readers take any version other than theirs
// (actor_client/param_fetcher.h), so the wrap does not freeze them.
//
// Failures: a failed connection is re-established through the session and
// the publication retried once on the new one. Thread safety: not
// thread-safe; one thread uses it (and its session).

#ifndef DREPLAY_LEARNER_CLIENT_PARAM_PUBLISHER_H_
#define DREPLAY_LEARNER_CLIENT_PARAM_PUBLISHER_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/session.h"
#include "protocol/layout.h"

namespace dreplay::learner {

// The version published after `version`: version + 1, and 2 after 2^64-1.
constexpr uint64_t NextVersion(uint64_t version) { return version == UINT64_MAX ? 2 : version + 1; }

class ParamPublisher {
 public:
  // `session` (a learner's) is not owned and must outlive the publisher.
  // READs the current ParamsHeader.
  static absl::StatusOr<std::unique_ptr<ParamPublisher>> Create(client::ClientSession* session);
  ~ParamPublisher();
  ParamPublisher(const ParamPublisher&) = delete;
  ParamPublisher& operator=(const ParamPublisher&) = delete;

  // Publishes `data` as the next version and returns it. Blocks until it is
  // visible to readers. InvalidArgument when data exceeds param_bytes.
  absl::StatusOr<uint64_t> Publish(absl::Span<const uint8_t> data);

  // The same without waiting for the link: when no publication is in
  // flight, posts `data` as the next version and returns true; while one is
  // (its header WRITE not yet completed: on a long, busy link the
  // completion waits behind everything the server sends this queue pair),
  // posts nothing and returns false: call again later with the newest data.
  // A posted version counts in version() once its completion is seen, by a
  // later call. Same errors and reconnection as Publish().
  absl::StatusOr<bool> PublishIfIdle(absl::Span<const uint8_t> data);

  // The last version published (or found at the server); 0: none.
  uint64_t version() const { return version_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  ParamPublisher(client::ClientSession* session, int sink);
  // READs the server's ParamsHeader and raises version_ to it.
  absl::Status SyncVersion();
  // InvalidArgument when `data` exceeds the server's param_bytes.
  absl::Status CheckSize(absl::Span<const uint8_t> data) const;
  // Posts the two WRITEs of `version`; returns the header WRITE's wr_id.
  absl::StatusOr<uint64_t> Post(uint64_t version, absl::Span<const uint8_t> data);
  absl::Status TryPublish(uint64_t version, absl::Span<const uint8_t> data);
  // Polls for the pending publication's completion; true when none is
  // pending any more.
  absl::StatusOr<bool> PollPending();

  client::ClientSession* const session_;
  const int sink_;
  // Registered: ParamsHeader, then one half (ParamsHalfHeader + data).
  std::unique_ptr<client::RegisteredBuffer> buffer_;
  uint64_t version_ = 0;
  uint64_t synced_generation_ = 0;
  uint64_t next_wr_id_ = 1;
  uint64_t bytes_written_ = 0;
  // PublishIfIdle's publication in flight (wr_id 0: none).
  uint64_t pending_wr_id_ = 0;
  uint64_t pending_version_ = 0;
  uint64_t pending_bytes_ = 0;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_PARAM_PUBLISHER_H_
