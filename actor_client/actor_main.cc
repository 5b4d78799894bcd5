// Copyright dreplay authors.
//
// actor: one actor process of distributed DQN. It steps --num_envs
// environments with an epsilon-greedy policy on its own copy of the
// Q-network, writes n-step transitions (initial priority: their |TD error|
// under that copy) into the replay server with one-sided RDMA, refreshes the
// network from the parameters the learner publishes, and publishes its
// episode statistics in its line of the server's actors region.
//
//   actor --server=127.0.0.1:7471 --actor_index=0 --num_actors=4
//       --env=CartPole-v1 --n_step=3 --gamma=0.99 --max_steps_per_s=250
//
// The server's published configuration is checked first: its transition
// spec (protocol/transition_spec.h), observation size and action count
// must be this actor's, and a transition must fit a slot.
//
// When the server goes away the actor reconnects with back-off for up to
// --reconnect_timeout_s; SIGINT or SIGTERM stops it cleanly (what is pending
// is written, the statistics published). A second signal ends it at once.
//
// Exit status: 0 after a clean stop (signal, --max_env_steps or
// --duration_s), 1 on failure, 2 for a bad flag.

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/flag_values.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "actor_client/actor_loop.h"
#include "actor_client/actor_stats_publisher.h"
#include "actor_client/experience_writer.h"
#include "actor_client/param_fetcher.h"
#include "protocol/host_port.h"
#include "protocol/transition_spec.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "client/session.h"
#include "protocol/layout.h"
#include "rl/make_environment.h"
#include "rl/qnet.h"
#include "rl/transition.h"
#include "verbs/verbs.h"

DEFINE_string(server, "", "the replay server, HOST:PORT (required)");
DEFINE_string(provider, "auto", "RDMA provider: auto (ibverbs when a device exists), ibverbs, soft");
DEFINE_string(ib_device, "", "ibverbs: device (empty: the first with an active port)");
DEFINE_int32(ib_port, 1, "ibverbs: port number");
DEFINE_int32(gid_index, -1, "ibverbs: GID index (-1: automatic, RoCE v2 preferred)");
DEFINE_string(link, "none",
              "soft provider: emulated link to the server (none, 10km-25g, DELAY_US:GBPS, ...)");
DEFINE_string(auth_token, "", "the server's token, if it has one (prefer --auth_token_file)");
DEFINE_string(auth_token_file, "", "file holding the token (one line)");

DEFINE_string(env, "CartPole-v1", "environment (CartPole-v1, Acrobot-v1, MountainCar-v0)");
DEFINE_int32(num_envs, 1, "environments stepped by this process, each with its own epsilon");
DEFINE_int32(actor_index, 0, "this actor's index, in [0, --num_actors); also its actor id");
DEFINE_int32(num_actors, 1, "number of actors (the Ape-X epsilon ladder)");
DEFINE_double(epsilon_base, 0.4, "Ape-X ladder: epsilon_k = base^(1 + alpha k / (K - 1))");
DEFINE_double(epsilon_alpha, 7.0, "Ape-X ladder exponent (see --epsilon_base)");
DEFINE_int32(n_step, 3, "n of the n-step transitions (the learner's)");
DEFINE_double(gamma, 0.99, "discount (the learner's)");
DEFINE_string(hidden, "64,64", "hidden layer sizes of the Q-network (the learner's)");
DEFINE_int64(seed, 1, "seed of the initial network (the learner's --seed gives the learner's "
                      "initial network), the environments and the exploration");
DEFINE_int32(flush_batch, 32, "transitions per write to the server");
DEFINE_int64(param_refresh_steps, 500,
             "environment steps (all environments together) between parameter refreshes");
DEFINE_int64(max_env_steps, 0, "stop after this many environment steps (0: no limit)");
DEFINE_double(duration_s, 0, "stop after this many seconds (0: no limit)");
DEFINE_double(max_steps_per_s, 0,
              "cap on environment steps per second of this process (0: none); leaves CPU to "
              "the learner on a shared machine");
DEFINE_double(stats_interval_s, 1, "how often the episode statistics are published");
DEFINE_double(connect_timeout_s, 30, "how long the first connection is retried");
DEFINE_double(reconnect_timeout_s, 60,
              "how long the actor keeps reconnecting when the server goes away");

// gflags' own; --help is narrowed to this file's flags.
DECLARE_bool(help);
DECLARE_string(helpmatch);

// gflags ends the process through this hook (exit(1)) on a flag it cannot
// parse, and after --help. Exported by libgflags, not declared in its headers.
namespace google {
extern void (*gflags_exitfunc)(int);
}  // namespace google

namespace dreplay::actor {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitBadFlag = 2;
constexpr absl::Duration kRetryInitial = absl::Milliseconds(100);
constexpr absl::Duration kRetryMax = absl::Seconds(2);
constexpr absl::Duration kSessionConnectDeadline = absl::Seconds(2);

[[noreturn]] void ExitBadFlag(int) { std::exit(kExitBadFlag); }
[[noreturn]] void ExitAfterHelp(int) { std::exit(0); }

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void OnSignal(int) { g_stop.store(true); }

void InstallSignalHandlers() {
  struct sigaction action = {};
  action.sa_handler = &OnSignal;
  sigemptyset(&action.sa_mask);
  // A second signal takes the default action: a stuck actor can be ended.
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}



absl::StatusOr<std::vector<int>> ParseHidden(const std::string& text) {
  std::vector<int> sizes;
  if (text.empty()) return sizes;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int size = 0;
    if (!absl::SimpleAtoi(part, &size) || size < 1) {
      return FlagError("hidden", text, "must be a comma-separated list of sizes >= 1");
    }
    sizes.push_back(size);
  }
  return sizes;
}

absl::StatusOr<std::string> ReadToken() {
  return ReadAuthToken(FLAGS_auth_token, FLAGS_auth_token_file);
}

struct Config {
  verbs::ProviderOptions provider;
  client::ClientSessionOptions session;
  ActorLoopOptions loop;
  absl::Duration connect_timeout;
  absl::Duration reconnect_timeout;
};

absl::StatusOr<Config> ConfigFromFlags() {
  Config c;
  {
    absl::StatusOr<verbs::ProviderKind> kind = verbs::ParseProviderKind(FLAGS_provider);
    if (!kind.ok()) return FlagError("provider", FLAGS_provider, kind.status().message());
    c.provider.kind = *kind;
    c.provider.ib_device = FLAGS_ib_device;
    c.provider.ib_port = FLAGS_ib_port;
    c.provider.gid_index = FLAGS_gid_index;
    const absl::Status s = c.provider.Validate();
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("bad ibverbs flag: ", s.message()));
  }
  if (FLAGS_server.empty()) return FlagError("server", "", "is required (HOST:PORT)");
  {
    const absl::Status s =
        protocol::ParseHostPort(FLAGS_server, &c.session.host, &c.session.port);
    if (!s.ok()) return FlagError("server", FLAGS_server, s.message());
  }
  {
    absl::StatusOr<verbs::LinkModel> link = verbs::ParseLinkModel(FLAGS_link);
    if (!link.ok()) return FlagError("link", FLAGS_link, link.status().message());
    c.session.qp.link = *link;
  }
  c.session.role = protocol::Role::kActor;
  if (FLAGS_actor_index < 0) {
    return FlagError("actor_index", std::to_string(FLAGS_actor_index), "must be >= 0");
  }
  c.session.actor_id = static_cast<uint32_t>(FLAGS_actor_index);
  ASSIGN_OR_RETURN(c.session.auth_token, ReadToken());
  ASSIGN_OR_RETURN(c.connect_timeout, Seconds("connect_timeout_s", FLAGS_connect_timeout_s, false));
  // Each (re)connection attempt of the session is kept short so that a stop
  // request is noticed; the loops here retry up to the timeouts.
  c.session.connect_deadline = kSessionConnectDeadline;
  ASSIGN_OR_RETURN(c.reconnect_timeout,
                   Seconds("reconnect_timeout_s", FLAGS_reconnect_timeout_s, false));
  {
    const absl::Status s = c.session.Validate();
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("bad flag: ", s.message()));
  }

  ActorLoopOptions& o = c.loop;
  o.env = FLAGS_env;
  o.num_envs = FLAGS_num_envs;
  o.actor_index = FLAGS_actor_index;
  o.num_actors = FLAGS_num_actors;
  o.epsilon_base = FLAGS_epsilon_base;
  o.epsilon_alpha = FLAGS_epsilon_alpha;
  o.nstep.n = FLAGS_n_step;
  o.nstep.discount = FLAGS_gamma;
  ASSIGN_OR_RETURN(o.hidden_sizes, ParseHidden(FLAGS_hidden));
  if (FLAGS_seed < 0) return FlagError("seed", std::to_string(FLAGS_seed), "must be >= 0");
  o.seed = static_cast<uint64_t>(FLAGS_seed);
  o.network_seed = static_cast<uint64_t>(FLAGS_seed);
  o.flush_batch = FLAGS_flush_batch;
  o.param_refresh_steps = FLAGS_param_refresh_steps;
  o.max_env_steps = FLAGS_max_env_steps;
  ASSIGN_OR_RETURN(o.duration, Seconds("duration_s", FLAGS_duration_s, true));
  o.max_steps_per_s = FLAGS_max_steps_per_s;
  ASSIGN_OR_RETURN(o.stats_interval, Seconds("stats_interval_s", FLAGS_stats_interval_s, false));
  {
    // ActorLoopOptions' messages name the field, which is the flag's name
    // (hidden_sizes is --hidden, nstep.n is --n_step).
    const absl::Status s = o.Validate();
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("bad flag: --", s.message()));
  }
  return c;
}

// OK when the server's published configuration fits this actor.
absl::Status CheckServerConfig(const protocol::LayoutConfig& config, const ActorLoopOptions& o,
                               const rl::EnvironmentSpec& env) {
  const protocol::TransitionSpec ours = {env.name, env.observation_size, env.action_count, o.nstep.n, o.nstep.discount};
  const std::string published_text = config.spec();
  if (published_text.empty()) {
    LOG(WARNING) << "the server publishes no transition spec; not checking that it expects "
                 << ours.ToString();
  } else {
    ASSIGN_OR_RETURN(const protocol::TransitionSpec published, protocol::TransitionSpec::Parse(published_text));
    RETURN_IF_ERROR(ours.CheckMatches(published));
  }
  if (config.observation_size != 0 &&
      config.observation_size != static_cast<uint32_t>(env.observation_size)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the server expects observations of ", config.observation_size, " floats; ", env.name,
        " has ", env.observation_size));
  }
  if (config.num_actions != 0 && config.num_actions != static_cast<uint32_t>(env.action_count)) {
    return absl::FailedPreconditionError(absl::StrCat("the server expects ", config.num_actions,
                                                      " actions; ", env.name, " has ",
                                                      env.action_count));
  }
  const size_t encoded = rl::EncodedTransitionSize(env.observation_size);
  if (encoded > config.max_payload()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a ", env.name, " transition takes ", encoded, " bytes; the server's slots hold ",
        config.max_payload(), " (start it with --slot_size >= ",
        protocol::RoundUp(encoded + sizeof(protocol::SlotHeader), protocol::kSlotAlignment), ")"));
  }
  if (config.max_actors != 0 &&
      static_cast<uint32_t>(o.actor_index) >= config.max_actors) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--actor_index=", o.actor_index, " but the server accepts actor ids below ",
        config.max_actors));
  }
  return absl::OkStatus();
}

// Runs `op` again while it fails with a connection failure, backing off,
// until it succeeds, fails otherwise, `timeout` has passed or a stop was
// requested. Each attempt goes through the session, which reconnects.
template <typename Op>
auto RetryWhileDisconnected(absl::Duration timeout, Op op) -> decltype(op()) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = kRetryInitial;
  while (true) {
    auto result = op();
    if (result.ok() || !client::IsConnectionFailure(result.status()) ||
        absl::Now() + backoff > deadline || g_stop.load()) {
      return result;
    }
    LOG(WARNING) << "server unreachable (" << result.status() << "); retrying in "
                 << absl::FormatDuration(backoff);
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, kRetryMax);
  }
}

// Connects, retrying (with back-off) for up to `timeout` while the server
// is unreachable (Unavailable, DeadlineExceeded), unless a stop is
// requested. A refusal (PermissionDenied) or a mismatch is final.
absl::StatusOr<std::unique_ptr<client::ClientSession>> ConnectSession(
    verbs::Provider* provider, const client::ClientSessionOptions& options,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = kRetryInitial;
  while (true) {
    absl::StatusOr<std::unique_ptr<client::ClientSession>> session =
        client::ClientSession::Connect(provider, options);
    const bool transient = absl::IsUnavailable(session.status()) ||
                           absl::IsDeadlineExceeded(session.status());
    if (session.ok() || !transient || absl::Now() + backoff > deadline || g_stop.load()) {
      return session;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, kRetryMax);
  }
}

// The loop's connections to the replay service.
class WriterSink : public ExperienceSink {
 public:
  WriterSink(ExperienceWriter* writer, absl::Duration reconnect_timeout)
      : writer_(writer), reconnect_timeout_(reconnect_timeout) {}
  absl::Status Append(absl::Span<const uint8_t> payload, float priority) override {
    // Append flushes first when the writer's batch is full; a failed flush
    // keeps the batch and does not take the new transition, so it is retried.
    const absl::StatusOr<bool> appended = RetryWhileDisconnected(
        reconnect_timeout_, [&]() -> absl::StatusOr<bool> {
          RETURN_IF_ERROR(writer_->Append(payload, priority));
          return true;
        });
    return appended.status();
  }
  absl::Status Flush() override {
    const absl::StatusOr<bool> flushed = RetryWhileDisconnected(
        reconnect_timeout_, [&]() -> absl::StatusOr<bool> {
          RETURN_IF_ERROR(writer_->Flush());
          return true;
        });
    return flushed.status();
  }
  uint64_t committed() const override { return writer_->stats().committed; }

 private:
  ExperienceWriter* const writer_;
  const absl::Duration reconnect_timeout_;
};

class FetcherParams : public ParamsSource {
 public:
  FetcherParams(ParamFetcher* fetcher, absl::Duration reconnect_timeout, std::string hidden)
      : fetcher_(fetcher), reconnect_timeout_(reconnect_timeout), hidden_(std::move(hidden)) {}
  absl::StatusOr<bool> Refresh(rl::QNetwork* network) override {
    ASSIGN_OR_RETURN(const bool fresh, RetryWhileDisconnected(reconnect_timeout_, [&] {
                       return fetcher_->FetchIfNewer(&buffer_);
                     }));
    if (!fresh) return false;
    const absl::StatusOr<uint64_t> loaded = network->Load(buffer_);
    if (!loaded.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the learner's parameters (version ", fetcher_->version(),
          ") do not fit this actor's network (--hidden=", hidden_, "): ",
          loaded.status().message()));
    }
    return true;
  }
  uint64_t version() const override { return fetcher_->version(); }

 private:
  ParamFetcher* const fetcher_;
  const absl::Duration reconnect_timeout_;
  const std::string hidden_;
  std::vector<uint8_t> buffer_;
};

class PublisherStats : public EpisodeStatsSink {
 public:
  PublisherStats(ActorStatsPublisher* publisher, absl::Duration reconnect_timeout)
      : publisher_(publisher), reconnect_timeout_(reconnect_timeout) {}
  void RecordSteps(uint64_t steps) override { publisher_->RecordStep(steps); }
  void RecordEpisode(double episode_return) override {
    publisher_->RecordEpisode(episode_return);
  }
  absl::Status Publish(uint64_t transitions) override {
    const absl::StatusOr<bool> published = RetryWhileDisconnected(
        reconnect_timeout_, [&]() -> absl::StatusOr<bool> {
          RETURN_IF_ERROR(publisher_->Publish(transitions));
          return true;
        });
    return published.status();
  }

 private:
  ActorStatsPublisher* const publisher_;
  const absl::Duration reconnect_timeout_;
};

int Run() {
  absl::StatusOr<Config> config = ConfigFromFlags();
  if (!config.ok()) {
    std::cerr << "actor: " << config.status().message() << "\n";
    return kExitBadFlag;
  }
  InstallSignalHandlers();
  rl::SetTorchThreads(1);

  absl::StatusOr<std::unique_ptr<verbs::Provider>> provider =
      verbs::CreateProvider(config->provider);
  if (!provider.ok()) {
    std::cerr << "actor: " << provider.status() << "\n";
    return kExitFailure;
  }
  absl::StatusOr<std::unique_ptr<client::ClientSession>> session =
      ConnectSession(provider->get(), config->session, config->connect_timeout);
  if (!session.ok()) {
    std::cerr << "actor: cannot connect to " << FLAGS_server << ": " << session.status() << "\n";
    return kExitFailure;
  }
  const absl::Status run = [&]() -> absl::Status {
    ExperienceWriterOptions writer_options;
    // The loop flushes once flush_batch transitions are pending; one step
    // of every environment may add up to n each beyond that.
    writer_options.max_batch = static_cast<uint32_t>(
        config->loop.flush_batch + config->loop.num_envs * config->loop.nstep.n);
    ASSIGN_OR_RETURN(std::unique_ptr<ExperienceWriter> writer,
                     ExperienceWriter::Create(session->get(), writer_options));
    ASSIGN_OR_RETURN(std::unique_ptr<ParamFetcher> fetcher,
                     ParamFetcher::Create(session->get(), ParamFetcherOptions()));
    ASSIGN_OR_RETURN(std::unique_ptr<ActorStatsPublisher> publisher,
                     ActorStatsPublisher::Create(session->get()));
    WriterSink sink(writer.get(), config->reconnect_timeout);
    FetcherParams params(fetcher.get(), config->reconnect_timeout, FLAGS_hidden);
    PublisherStats stats(publisher.get(), config->reconnect_timeout);
    ASSIGN_OR_RETURN(std::unique_ptr<ActorLoop> loop,
                     ActorLoop::Create(config->loop, {&sink, &params, &stats}));
    RETURN_IF_ERROR(
        CheckServerConfig((*session)->config(), config->loop, loop->env_spec()));
    LOG(INFO) << "actor " << config->loop.actor_index << " of " << config->loop.num_actors
              << ": " << config->loop.num_envs << " x " << config->loop.env << ", epsilon "
              << loop->epsilons().front() << (config->loop.num_envs > 1 ? " .. " : "")
              << (config->loop.num_envs > 1 ? std::to_string(loop->epsilons().back()) : "")
              << ", server " << FLAGS_server << " (" << (*provider)->name() << ")";
    absl::Status status = loop->Run(g_stop);
    if (!status.ok() && g_stop.load() && client::IsConnectionFailure(status)) {
      // Asked to stop while the server was away: what was pending is lost,
      // which a stop accepts.
      LOG(WARNING) << "stopped while disconnected: " << status;
      status = absl::OkStatus();
    }
    const ActorLoopStats& s = loop->stats();
    LOG(INFO) << "actor " << config->loop.actor_index << ": " << s.env_steps << " env steps, "
              << s.episodes << " episodes, " << writer->stats().committed
              << " transitions committed (" << writer->stats().abandoned << " abandoned), "
              << s.param_refreshes << " parameter refreshes (version " << fetcher->version()
              << ")";
    return status;
  }();
  if (!run.ok()) {
    std::cerr << "actor " << FLAGS_actor_index << ": " << run << "\n";
    return kExitFailure;
  }
  return 0;
}

}  // namespace
}  // namespace dreplay::actor

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "one actor of distributed DQN: steps environments, writes n-step transitions into the "
      "replay server with RDMA, refreshes its network from the learner's parameters.\n"
      "Exit status: 0 clean stop, 1 failure, 2 bad flag.\n"
      "Usage: actor --server=HOST:PORT [--actor_index=I --num_actors=N] [--env=CartPole-v1] "
      "...");
  namespace a = dreplay::actor;
  google::gflags_exitfunc = &a::ExitBadFlag;
  gflags::ParseCommandLineNonHelpFlags(&argc, &argv, /*remove_flags=*/true);
  google::gflags_exitfunc = &a::ExitAfterHelp;
  if (FLAGS_help) {
    FLAGS_help = false;
    FLAGS_helpmatch = "actor_main";
  }
  gflags::HandleCommandLineHelpFlags();
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (argc > 1) {
    std::cerr << "actor: unexpected argument \"" << argv[1] << "\"\n";
    return a::kExitBadFlag;
  }
  return a::Run();
}
