// Copyright dreplay authors.

#include "actor_client/service_io.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "rl/params_format.h"

namespace dreplay::actor {

absl::StatusOr<std::unique_ptr<ActorServiceIo>> ActorServiceIo::Create(
    client::ClientSession* session, const ActorServiceIoOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<ExperienceWriter> writer,
                   ExperienceWriter::Create(session, options.writer));
  ASSIGN_OR_RETURN(std::unique_ptr<ParamFetcher> fetcher,
                   ParamFetcher::Create(session, options.fetcher));
  ASSIGN_OR_RETURN(std::unique_ptr<ActorStatsPublisher> publisher,
                   ActorStatsPublisher::Create(session));
  return std::unique_ptr<ActorServiceIo>(
      new ActorServiceIo(options, std::move(writer), std::move(fetcher), std::move(publisher)));
}

ActorServiceIo::ActorServiceIo(const ActorServiceIoOptions& options,
                               std::unique_ptr<ExperienceWriter> writer,
                               std::unique_ptr<ParamFetcher> fetcher,
                               std::unique_ptr<ActorStatsPublisher> publisher)
    : options_(options),
      writer_(std::move(writer)),
      fetcher_(std::move(fetcher)),
      publisher_(std::move(publisher)) {}

ActorServiceIo::~ActorServiceIo() = default;

absl::Status ActorServiceIo::Append(absl::Span<const uint8_t> payload, float priority) {
  // Append flushes first when the writer's batch is full; a failed flush
  // keeps the batch and does not take the new transition, so it is retried.
  // Each transition carries the version of the parameters acted with.
  writer_->set_params_version(fetcher_->version());
  return client::RetryWhileDisconnected(options_.retry,
                                        [&] { return writer_->Append(payload, priority); });
}

absl::Status ActorServiceIo::Flush() {
  return client::RetryWhileDisconnected(options_.retry, [&] { return writer_->Flush(); });
}

absl::StatusOr<bool> ActorServiceIo::Refresh(rl::QNetwork* network) {
  ASSIGN_OR_RETURN(const bool fresh, client::RetryWhileDisconnected(options_.retry, [&] {
                     return fetcher_->FetchIfNewer(&params_);
                   }));
  if (!fresh) return false;
  if (const absl::Status finite = rl::CheckParamsFinite(params_); !finite.ok()) {
    // The network keeps its last good parameters; the fetcher moves on to
    // the next version.
    ++params_refused_;
    const absl::Time now = absl::Now();
    if (now - last_refusal_warning_ >= kParamsWarningInterval) {
      last_refusal_warning_ = now;
      LOG(WARNING) << "the learner's parameters (version " << fetcher_->version()
                   << ") are not loaded, the last good ones are kept (" << params_refused_
                   << " versions refused in all): " << finite.message();
    }
    return false;
  }
  const absl::StatusOr<uint64_t> loaded = network->Load(params_);
  if (!loaded.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the learner's parameters (version ", fetcher_->version(),
                     ") do not fit this actor's network (", options_.network_description,
                     "): ", loaded.status().message()));
  }
  return true;
}

absl::Status ActorServiceIo::Publish(uint64_t transitions) {
  return client::RetryWhileDisconnected(options_.retry,
                                        [&] { return publisher_->Publish(transitions); });
}

}  // namespace dreplay::actor
