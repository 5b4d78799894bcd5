// Copyright dreplay authors.
//
// service_io.h: the actor loop's connections to the replay service
// (actor_loop.h's ActorIo) over one session: an ExperienceWriter behind
// ExperienceSink, a ParamFetcher behind ParamsSource and an
// ActorStatsPublisher behind EpisodeStatsSink, each operation retried while
// the server is unreachable (client/retry.h).
//
//   ASSIGN_OR_RETURN(auto session, client::ConnectWithRetry(provider, options, retry));
//   ActorServiceIoOptions io_options;
//   io_options.retry = retry;
//   ASSIGN_OR_RETURN(auto service, ActorServiceIo::Create(session.get(), io_options));
//   ASSIGN_OR_RETURN(auto loop, ActorLoop::Create(loop_options, service->io()));
//
// Append and Flush: a failed flush keeps the writer's batch and does not
// take the new transition, so the retry sends both. Refresh loads the
// parameters into the network; parameters that do not fit it (another
// architecture) are FailedPrecondition, naming network_description.
// Errors otherwise are the clients' once the retries are over.
//
// Thread safety: not thread-safe; the loop's thread uses it (and its
// session).

#ifndef DREPLAY_ACTOR_CLIENT_SERVICE_IO_H_
#define DREPLAY_ACTOR_CLIENT_SERVICE_IO_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "actor_client/actor_loop.h"
#include "actor_client/actor_stats_publisher.h"
#include "actor_client/experience_writer.h"
#include "actor_client/param_fetcher.h"
#include "client/retry.h"
#include "client/session.h"
#include "rl/qnet.h"

namespace dreplay::actor {

struct ActorServiceIoOptions {
  ExperienceWriterOptions writer;
  ParamFetcherOptions fetcher;
  // How long operations are retried while the server is away, and the
  // stop request that ends the retries.
  client::RetryPolicy retry;
  // How errors name this actor's network, e.g. "--hidden=64,64".
  std::string network_description;
};

// The most often Refresh() warns about parameters it refused.
inline constexpr absl::Duration kParamsWarningInterval = absl::Seconds(10);

class ActorServiceIo : public ExperienceSink, public ParamsSource, public EpisodeStatsSink {
 public:
  // `session` (an actor's) is not owned and must outlive this object.
  // Errors: the writer's, fetcher's and publisher's Create().
  static absl::StatusOr<std::unique_ptr<ActorServiceIo>> Create(
      client::ClientSession* session, const ActorServiceIoOptions& options);
  ~ActorServiceIo() override;
  ActorServiceIo(const ActorServiceIo&) = delete;
  ActorServiceIo& operator=(const ActorServiceIo&) = delete;

  // For ActorLoop::Create(); points into this object.
  ActorIo io() { return {this, this, this}; }

  // ExperienceSink.
  absl::Status Append(absl::Span<const uint8_t> payload, float priority) override;
  absl::Status Flush() override;
  uint64_t committed() const override { return writer_->stats().committed; }
  // ParamsSource. Parameters with a value that is not finite are not
  // loaded (false: the network keeps its last good ones; logged at most
  // every kParamsWarningInterval, counted in params_refused()).
  absl::StatusOr<bool> Refresh(rl::QNetwork* network) override;
  uint64_t params_refused() const { return params_refused_; }
  uint64_t version() const override { return fetcher_->version(); }
  // EpisodeStatsSink.
  void RecordSteps(uint64_t steps) override { publisher_->RecordStep(steps); }
  void RecordEpisode(double episode_return) override { publisher_->RecordEpisode(episode_return); }
  absl::Status Publish(uint64_t transitions) override;

  const ExperienceWriter& writer() const { return *writer_; }
  const ParamFetcher& fetcher() const { return *fetcher_; }

 private:
  ActorServiceIo(const ActorServiceIoOptions& options, std::unique_ptr<ExperienceWriter> writer,
                 std::unique_ptr<ParamFetcher> fetcher,
                 std::unique_ptr<ActorStatsPublisher> publisher);

  const ActorServiceIoOptions options_;
  const std::unique_ptr<ExperienceWriter> writer_;
  const std::unique_ptr<ParamFetcher> fetcher_;
  const std::unique_ptr<ActorStatsPublisher> publisher_;
  std::vector<uint8_t> params_;  // the last parameters fetched
  uint64_t params_refused_ = 0;
  absl::Time last_refusal_warning_ = absl::InfinitePast();
};

}  // namespace dreplay::actor

#endif  // DREPLAY_ACTOR_CLIENT_SERVICE_IO_H_
