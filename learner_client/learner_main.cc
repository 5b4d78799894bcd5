// Copyright dreplay authors.
//
// learner: the DQN learner of distributed DQN, across a long-haul link from
// the replay server (the buffer node).
//
//   learner --server=10.0.0.2:7471 --link=10km-25g --replay_placement=buffer
//       --env=CartPole-v1 --stop_when_solved --metrics_out=metrics.jsonl
//
// --replay_placement=buffer (the proposal): the learner READs the batches
// the server pre-sampled from its prioritized replay memory, trains, and
// WRITEs their new priorities back. --replay_placement=learner (the existing
// approach): the learner READs every transition the server ingests and keeps
// its own prioritized replay memory (same code, same alpha and beta: pass
// the server's --alpha, --priority_epsilon, --beta, --beta_final,
// --beta_steps and, as --min_replay_size, its --min_size_to_sample). Either
// way it publishes its parameters for the actors every --publish_every
// train steps.
//
// Metrics (learner_client/metrics.h has the definitions): a progress line on
// stderr every --progress_interval_s ("progress: ..."), a summary line at
// the end ("summary: ..."), and with --metrics_out the same records as JSON
// lines. The batch size, replay capacity and transition encoding are the
// server's (published in its control block); n and gamma are taken from the
// server's transition spec when it has one.
//
// SIGINT or SIGTERM ends the run early (with its summary); a second signal
// ends it at once. Exit status: 0 after a run (solved or not), 1 on
// failure, 2 for a bad flag.

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
#include "protocol/host_port.h"
#include "protocol/transition_spec.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "learner_client/batch_reader.h"
#include "learner_client/forward_reader.h"
#include "learner_client/learner_loop.h"
#include "learner_client/metrics.h"
#include "learner_client/param_publisher.h"
#include "learner_client/priority_writer.h"
#include "client/stats_reader.h"
#include "client/session.h"
#include "protocol/layout.h"
#include "rl/make_environment.h"
#include "verbs/verbs.h"

DEFINE_string(server, "", "the replay server, HOST:PORT (required)");
DEFINE_string(provider, "auto", "RDMA provider: auto (ibverbs when a device exists), ibverbs, soft");
DEFINE_string(ib_device, "", "ibverbs: device (empty: the first with an active port)");
DEFINE_int32(ib_port, 1, "ibverbs: port number");
DEFINE_int32(gid_index, -1, "ibverbs: GID index (-1: automatic, RoCE v2 preferred)");
DEFINE_string(link, "none",
              "soft provider: the emulated long-haul link to the server (none, 10km-25g, "
              "100km-10g, 1000km-1g, or DELAY_US:GBPS)");
DEFINE_string(auth_token, "", "the server's token, if it has one (prefer --auth_token_file)");
DEFINE_string(auth_token_file, "", "file holding the token (one line)");

DEFINE_string(replay_placement, "buffer",
              "buffer: replay memory at the buffer node (READ pre-sampled batches); learner: "
              "replay memory here (READ every transition)");
DEFINE_string(env, "CartPole-v1", "environment (CartPole-v1, Acrobot-v1, MountainCar-v0)");
DEFINE_double(lr, 1e-3, "Adam learning rate");
DEFINE_double(adam_epsilon, 1e-8, "Adam epsilon");
DEFINE_double(gamma, 0.99, "discount; must be the actors' (taken from the server's spec)");
DEFINE_int32(n_step, 3, "n of the n-step transitions; must be the actors' (taken from the "
                        "server's spec)");
DEFINE_int64(target_update, 500, "train steps between target network updates");
DEFINE_string(hidden, "64,64", "hidden layer sizes of the Q-network (the actors')");
DEFINE_double(huber_delta, 1.0, "Huber loss threshold");
DEFINE_double(max_grad_norm, 10.0, "gradient norm clipping (0: off)");
DEFINE_bool(double_dqn, true, "double DQN targets");
DEFINE_int64(seed, 1, "seed of the initial network (the actors' --seed gives them the same)");

DEFINE_double(alpha, 0.6, "learner placement: prioritization exponent (the server's)");
DEFINE_double(priority_epsilon, 1e-6, "learner placement: added to priorities (the server's)");
DEFINE_double(beta, 0.4, "learner placement: initial importance-sampling exponent");
DEFINE_double(beta_final, 1.0, "learner placement: final importance-sampling exponent");
DEFINE_int64(beta_steps, 100000, "learner placement: batches over which beta is annealed");
DEFINE_int64(min_replay_size, 1000,
             "learner placement: transitions stored before training starts (the server's "
             "--min_size_to_sample)");
DEFINE_int32(batch_depth, 0, "buffer placement: batch READs in flight (0: the server's staging "
                             "depth)");

DEFINE_int64(train_steps, 0, "stop after this many train steps (0: no limit)");
DEFINE_double(duration_s, 0, "stop after this many seconds (0: no limit)");
DEFINE_bool(stop_when_solved, false, "stop at the first evaluation that reaches --solve_return");
DEFINE_double(solve_return, 475, "greedy mean return that counts as solved");
DEFINE_int32(eval_episodes, 100, "episodes per greedy evaluation");
DEFINE_double(eval_interval_s, 5, "seconds between greedy evaluations");
DEFINE_int64(publish_every, 100, "train steps between parameter publications (0: never)");
DEFINE_string(metrics_out, "", "write progress and summary records here as JSON lines");
DEFINE_double(progress_interval_s, 5, "seconds between progress records");
DEFINE_double(connect_timeout_s, 30, "how long the first connection is retried");
DEFINE_double(reconnect_timeout_s, 60,
              "how long the learner keeps reconnecting when the server goes away");

// gflags' own; --help is narrowed to this file's flags.
DECLARE_bool(help);
DECLARE_string(helpmatch);

// gflags ends the process through this hook (exit(1)) on a flag it cannot
// parse, and after --help. Exported by libgflags, not declared in its headers.
namespace google {
extern void (*gflags_exitfunc)(int);
}  // namespace google

namespace dreplay::learner {
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
  action.sa_flags = SA_RESETHAND;  // a second signal ends the process
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}



bool FlagIsDefault(const char* name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(name, &info) && info.is_default;
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
  LearnerLoopOptions loop;
  absl::Duration connect_timeout;
  absl::Duration reconnect_timeout;
};

// Everything but what the server publishes (batch size, capacity).
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
  c.session.role = protocol::Role::kLearner;
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

  LearnerLoopOptions& o = c.loop;
  {
    absl::StatusOr<ReplayPlacement> placement = ParseReplayPlacement(FLAGS_replay_placement);
    if (!placement.ok()) {
      return FlagError("replay_placement", FLAGS_replay_placement, "must be buffer or learner");
    }
    o.placement = *placement;
  }
  o.env = FLAGS_env;
  o.dqn.learning_rate = FLAGS_lr;
  o.dqn.adam_epsilon = FLAGS_adam_epsilon;
  o.dqn.huber_delta = FLAGS_huber_delta;
  o.dqn.double_dqn = FLAGS_double_dqn;
  o.dqn.target_update_period = FLAGS_target_update;
  o.dqn.max_gradient_norm = FLAGS_max_grad_norm;
  ASSIGN_OR_RETURN(o.dqn.network.hidden_sizes, ParseHidden(FLAGS_hidden));
  if (FLAGS_seed < 0) return FlagError("seed", std::to_string(FLAGS_seed), "must be >= 0");
  o.dqn.seed = static_cast<uint64_t>(FLAGS_seed);
  o.seed = static_cast<uint64_t>(FLAGS_seed);
  o.memory.alpha = FLAGS_alpha;
  o.memory.priority_epsilon = FLAGS_priority_epsilon;
  o.memory.seed = static_cast<uint64_t>(FLAGS_seed);
  o.beta.initial = FLAGS_beta;
  o.beta.final = FLAGS_beta_final;
  if (FLAGS_beta_steps < 0) {
    return FlagError("beta_steps", std::to_string(FLAGS_beta_steps), "must be >= 0");
  }
  o.beta.steps = static_cast<uint64_t>(FLAGS_beta_steps);
  if (FLAGS_min_replay_size < 1) {
    return FlagError("min_replay_size", std::to_string(FLAGS_min_replay_size), "must be >= 1");
  }
  o.min_replay_size = static_cast<uint64_t>(FLAGS_min_replay_size);
  o.publish_every = FLAGS_publish_every;
  o.max_train_steps = FLAGS_train_steps;
  ASSIGN_OR_RETURN(o.duration, Seconds("duration_s", FLAGS_duration_s, true));
  o.stop_when_solved = FLAGS_stop_when_solved;
  o.solve_return = FLAGS_solve_return;
  o.eval_episodes = FLAGS_eval_episodes;
  ASSIGN_OR_RETURN(o.eval_interval, Seconds("eval_interval_s", FLAGS_eval_interval_s, false));
  ASSIGN_OR_RETURN(o.progress_interval,
                   Seconds("progress_interval_s", FLAGS_progress_interval_s, false));
  if (FLAGS_batch_depth < 0) {
    return FlagError("batch_depth", std::to_string(FLAGS_batch_depth), "must be >= 0");
  }
  if (FLAGS_n_step < 1) return FlagError("n_step", std::to_string(FLAGS_n_step), "must be >= 1");
  return c;
}

// Takes the batch size and capacity from the server's configuration and
// checks its transition spec against the environment and the flags.
absl::Status ApplyServerConfig(const protocol::LayoutConfig& config, LearnerLoopOptions* o) {
  ASSIGN_OR_RETURN(std::unique_ptr<rl::Environment> env, rl::MakeEnvironment(o->env));
  const protocol::TransitionSpec ours =
      protocol::TransitionSpec{env->spec().name, env->spec().observation_size, env->spec().action_count, FLAGS_n_step, FLAGS_gamma};
  const std::string text = config.spec();
  if (text.empty()) {
    LOG(WARNING) << "the server publishes no transition spec; assuming " << ours.ToString();
  } else {
    ASSIGN_OR_RETURN(const protocol::TransitionSpec published, protocol::TransitionSpec::Parse(text));
    protocol::TransitionSpec expected = ours;
    // n and gamma follow the server's spec unless given on the command line.
    if (FlagIsDefault("n_step")) expected.n_step = published.n_step;
    if (FlagIsDefault("gamma")) expected.gamma = published.gamma;
    RETURN_IF_ERROR(expected.CheckMatches(published));
    LOG(INFO) << "transitions: " << published.ToString();
  }
  if (config.observation_size != 0 &&
      config.observation_size != static_cast<uint32_t>(env->spec().observation_size)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the server expects observations of ", config.observation_size, " floats; ", o->env,
        " has ", env->spec().observation_size));
  }
  const size_t encoded = rl::EncodedTransitionSize(env->spec().observation_size);
  if (encoded > config.max_payload()) {
    return absl::FailedPreconditionError(absl::StrCat("a ", o->env, " transition takes ", encoded,
                                                      " bytes; the server's slots hold ",
                                                      config.max_payload()));
  }
  o->memory.capacity = config.capacity;
  o->batch_size = config.batch_size;
  return absl::OkStatus();
}

// Runs `op` again while it fails with a connection failure, backing off,
// until it succeeds, fails otherwise, `timeout` has passed or a stop was
// requested. The clients reconnect through the session on each attempt.
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

absl::Status Retry(absl::Duration timeout, const std::function<absl::Status()>& op) {
  return RetryWhileDisconnected(timeout, [&]() -> absl::StatusOr<bool> {
           RETURN_IF_ERROR(op());
           return true;
         })
      .status();
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
class ReaderBatches : public BatchSource {
 public:
  ReaderBatches(BatchReader* reader, PriorityWriter* writer, absl::Duration reconnect_timeout)
      : reader_(reader), writer_(writer), reconnect_timeout_(reconnect_timeout) {}
  absl::StatusOr<bool> Next(absl::Duration timeout, rl::TransitionBatch* batch,
                            std::vector<float>* weights) override {
    // DeadlineExceeded is "not staged in time", not a lost connection.
    absl::StatusOr<StagedBatch> staged = reader_->Next(timeout);
    if (absl::IsDeadlineExceeded(staged.status())) return false;
    if (!staged.ok()) {
      staged = RetryWhileDisconnected(reconnect_timeout_, [&]() -> absl::StatusOr<StagedBatch> {
        absl::StatusOr<StagedBatch> next = reader_->Next(timeout);
        if (absl::IsDeadlineExceeded(next.status())) {
          return absl::NotFoundError("not staged yet");
        }
        return next;
      });
      if (absl::IsNotFound(staged.status())) return false;
      if (!staged.ok()) return staged.status();
    }
    batch->Clear();
    weights->clear();
    for (uint32_t i = 0; i < staged->size(); ++i) {
      const absl::Status s = batch->AddEncoded(staged->payload(i));
      if (!s.ok()) {
        return absl::DataLossError(absl::StrCat("batch ", staged->batch_number(), " entry ", i,
                                                " does not decode: ", s.message()));
      }
      weights->push_back(staged->weight(i));
    }
    last_ = *staged;
    return true;
  }
  absl::Status WritePriorities(absl::Span<const float> priorities) override {
    return Retry(reconnect_timeout_, [&] { return writer_->Write(last_, priorities); });
  }

 private:
  BatchReader* const reader_;
  PriorityWriter* const writer_;
  const absl::Duration reconnect_timeout_;
  StagedBatch last_;
};

class ForwardStream : public TransitionStream {
 public:
  ForwardStream(ForwardReader* reader, absl::Duration reconnect_timeout)
      : reader_(reader), reconnect_timeout_(reconnect_timeout) {}
  absl::Status Next(absl::Duration timeout, std::vector<ForwardedItem>* out) override {
    RETURN_IF_ERROR(Retry(reconnect_timeout_, [&] { return reader_->Next(timeout, &fresh_); }));
    out->clear();
    for (const ForwardedTransition& t : fresh_) {
      out->push_back({t.sequence, t.initial_priority(), t.payload});
    }
    return absl::OkStatus();
  }

 private:
  ForwardReader* const reader_;
  const absl::Duration reconnect_timeout_;
  std::vector<ForwardedTransition> fresh_;
};

class PublisherParams : public ParamsSink {
 public:
  PublisherParams(ParamPublisher* publisher, absl::Duration reconnect_timeout)
      : publisher_(publisher), reconnect_timeout_(reconnect_timeout) {}
  absl::Status Publish(absl::Span<const uint8_t> params) override {
    return RetryWhileDisconnected(reconnect_timeout_, [&] { return publisher_->Publish(params); })
        .status();
  }

 private:
  ParamPublisher* const publisher_;
  const absl::Duration reconnect_timeout_;
};

class ReaderActors : public ActorStatsSource {
 public:
  ReaderActors(client::StatsReader* reader, absl::Duration reconnect_timeout)
      : reader_(reader), reconnect_timeout_(reconnect_timeout) {}
  absl::StatusOr<ActorTotals> Read() override {
    ASSIGN_OR_RETURN(const std::vector<protocol::ActorLine> lines,
                     RetryWhileDisconnected(reconnect_timeout_,
                                            [&] { return reader_->ReadActors(); }));
    ActorTotals totals;
    for (const protocol::ActorLine& line : lines) {
      totals.env_steps += line.env_steps;
      totals.episodes += line.episodes;
      totals.returns_count += line.returns_count;
      totals.returns_sum += line.returns_sum;
      ++totals.actors;
    }
    return totals;
  }

 private:
  client::StatsReader* const reader_;
  const absl::Duration reconnect_timeout_;
};

absl::Status RunLearner(Config& config, verbs::Provider* provider) {
  ASSIGN_OR_RETURN(std::unique_ptr<client::ClientSession> session,
                   ConnectSession(provider, config.session, config.connect_timeout));
  RETURN_IF_ERROR(ApplyServerConfig(session->config(), &config.loop));
  std::unique_ptr<MetricsFile> metrics_file;
  if (!FLAGS_metrics_out.empty()) {
    ASSIGN_OR_RETURN(metrics_file, MetricsFile::Open(FLAGS_metrics_out));
  }
  const absl::Duration retry = config.reconnect_timeout;

  std::unique_ptr<BatchReader> batch_reader;
  std::unique_ptr<PriorityWriter> priority_writer;
  std::unique_ptr<ForwardReader> forward_reader;
  std::unique_ptr<ReaderBatches> batches;
  std::unique_ptr<ForwardStream> stream;
  if (config.loop.placement == ReplayPlacement::kBuffer) {
    BatchReaderOptions reader_options;
    reader_options.depth = static_cast<uint32_t>(FLAGS_batch_depth);
    ASSIGN_OR_RETURN(batch_reader, BatchReader::Create(session.get(), reader_options));
    ASSIGN_OR_RETURN(priority_writer, PriorityWriter::Create(session.get()));
    batches = std::make_unique<ReaderBatches>(batch_reader.get(), priority_writer.get(), retry);
  } else {
    ASSIGN_OR_RETURN(forward_reader, ForwardReader::Create(session.get(), ForwardReaderOptions()));
    stream = std::make_unique<ForwardStream>(forward_reader.get(), retry);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ParamPublisher> publisher, ParamPublisher::Create(session.get()));
  ASSIGN_OR_RETURN(std::unique_ptr<client::StatsReader> stats_reader, client::StatsReader::Create(session.get()));
  PublisherParams params(publisher.get(), retry);
  ReaderActors actors(stats_reader.get(), retry);

  absl::Status metrics_status;
  LearnerIo io;
  io.batches = batches.get();
  io.stream = stream.get();
  io.params = &params;
  io.actors = &actors;
  io.link_bytes = [&]() -> uint64_t {
    uint64_t bytes = publisher->bytes_written();
    if (batch_reader != nullptr) bytes += batch_reader->stats().bytes_read;
    if (priority_writer != nullptr) bytes += priority_writer->stats().bytes_written;
    if (forward_reader != nullptr) bytes += forward_reader->stats().bytes_read;
    return bytes;
  };
  io.on_progress = [&](const ProgressRecord& record) {
    std::cerr << "progress: " << record.ToText() << std::endl;
    if (metrics_file != nullptr && metrics_status.ok()) {
      metrics_status = metrics_file->Write(record.ToJson());
    }
  };
  ASSIGN_OR_RETURN(std::unique_ptr<LearnerLoop> loop, LearnerLoop::Create(config.loop, io));
  LOG(INFO) << "learner: " << ReplayPlacementName(config.loop.placement) << " placement, "
            << config.loop.env << ", server " << FLAGS_server << " over link " << FLAGS_link
            << " (" << provider->name() << "), batch " << session->config().batch_size
            << ", capacity " << session->config().capacity;
  const absl::Status run = loop->Run(g_stop);
  if (!run.ok()) {
    if (!g_stop.load() || !client::IsConnectionFailure(run)) return run;
    // Asked to stop while the server was away: the run ends here.
    LOG(WARNING) << "stopped while disconnected: " << run;
  }
  const SummaryRecord summary = loop->Summary();
  std::cerr << "summary: " << summary.ToText() << std::endl;
  if (metrics_file != nullptr && metrics_status.ok()) {
    metrics_status = metrics_file->Write(summary.ToJson());
  }
  return metrics_status;
}

int Run() {
  absl::StatusOr<Config> config = ConfigFromFlags();
  if (!config.ok()) {
    std::cerr << "learner: " << config.status().message() << "\n";
    return kExitBadFlag;
  }
  InstallSignalHandlers();
  absl::StatusOr<std::unique_ptr<verbs::Provider>> provider =
      verbs::CreateProvider(config->provider);
  if (!provider.ok()) {
    std::cerr << "learner: " << provider.status() << "\n";
    return kExitFailure;
  }
  const absl::Status status = RunLearner(*config, provider->get());
  if (!status.ok()) {
    std::cerr << "learner: " << status << "\n";
    return kExitFailure;
  }
  return 0;
}

}  // namespace
}  // namespace dreplay::learner

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "the DQN learner: trains on experiences from the replay server across a long link, "
      "publishes parameters for the actors, reports metrics.\n"
      "Exit status: 0 after a run, 1 failure, 2 bad flag.\n"
      "Usage: learner --server=HOST:PORT [--replay_placement=buffer|learner] [--link=10km-25g] "
      "[--stop_when_solved] [--metrics_out=FILE] ...");
  namespace l = dreplay::learner;
  google::gflags_exitfunc = &l::ExitBadFlag;
  gflags::ParseCommandLineNonHelpFlags(&argc, &argv, /*remove_flags=*/true);
  google::gflags_exitfunc = &l::ExitAfterHelp;
  if (FLAGS_help) {
    FLAGS_help = false;
    FLAGS_helpmatch = "learner_main";
  }
  gflags::HandleCommandLineHelpFlags();
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (argc > 1) {
    std::cerr << "learner: unexpected argument \"" << argv[1] << "\"\n";
    return l::kExitBadFlag;
  }
  return l::Run();
}
