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
//   actor --print_layout --env=CartPole-v1 --n_step=3 --gamma=0.99 --hidden=64,64
//
// The server's published configuration is checked first: its transition
// spec (protocol/transition_spec.h), observation size and action count
// must be this actor's, and a transition must fit a slot. --print_layout
// prints what the server needs for that (actor_client/actor_layout.h) as
// one JSON object and exits, without connecting.
//
// When the server goes away the actor reconnects with back-off for up to
// --reconnect_timeout_s; SIGINT or SIGTERM stops it cleanly (what is pending
// is written, the statistics published). A second signal ends it at once.
//
// --metrics_listen=127.0.0.1:9466 serves the actor's figures to Prometheus
// at /metrics (actor_client/prometheus_metrics.h), refreshed each time the
// statistics are published.
//
// Exit status: 0 after a clean stop (signal, --max_env_steps or
// --duration_s) or --print_layout, 1 on failure, 2 for a bad flag.

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actor_client/actor_layout.h"
#include "actor_client/actor_loop.h"
#include "actor_client/actor_run.h"
#include "client/connection_flags.h"
#include "client/retry.h"
#include "client/session.h"
#include "common/binary_main.h"
#include "common/flag_values.h"
#include "common/metrics_http.h"
#include "common/status_macros.h"
#include "common/stop_signals.h"
#include "gflags/gflags.h"
#include "protocol/host_port.h"
#include "rl/network_flags.h"
#include "rl/qnet.h"
#include "verbs/provider_flag_definitions.h"
#include "verbs/verbs.h"

DEFINE_string(server, "", "the replay server, HOST:PORT (required)");
DEFINE_string(link, "none",
              "soft provider: emulated link to the server (none, 10km-25g, DELAY_US:GBPS, ...)");
DEFINE_string(auth_token, "", "this actor's credential (prefer --auth_token_file)");
DEFINE_string(auth_token_file, "",
              "file holding this actor's own credential (one line, mode 0600), written by "
              "actor_credentials from the server's actor token");
DEFINE_bool(insecure, false,
            "connect without a token to a server started with --insecure (its replies go "
            "unproven)");

DEFINE_string(env, "CartPole-v1",
              "environment (CartPole-v1, Acrobot-v1, MountainCar-v0, MinAtar/Breakout, "
              "MinAtar/Asterix, MinAtar/Freeway, MinAtar/Seaquest, MinAtar/SpaceInvaders)");
DEFINE_string(observation, "native",
              "what the environment observes: native, or pixels84 (MinAtar only: 4 stacked "
              "84x84 frames; the Nature DQN network)");
DEFINE_int32(num_envs, 1, "environments stepped by this process, each with its own epsilon");
DEFINE_int32(actor_index, 0, "this actor's index, in [0, --num_actors); also its actor id");
DEFINE_int32(num_actors, 1, "number of actors (the Ape-X epsilon ladder)");
DEFINE_double(epsilon_base, 0.4, "Ape-X ladder: epsilon_k = base^(1 + alpha k / (K - 1))");
DEFINE_double(epsilon_alpha, 7.0, "Ape-X ladder exponent (see --epsilon_base)");
DEFINE_int32(n_step, 3, "n of the n-step transitions (the learner's)");
DEFINE_double(gamma, 0.99, "discount (the learner's)");
DEFINE_string(hidden, "",
              "hidden layer sizes of the Q-network's head (the learner's); empty: the "
              "environment's default (64,64; MinAtar 128; pixels84 512)");
DEFINE_int64(seed, 1,
             "seed of the initial network (the learner's --seed gives the learner's "
             "initial network), the environments and the exploration");
DEFINE_int32(flush_batch, 32, "transitions per write to the server");
DEFINE_string(verification_log, "",
              "append a record per committed transition to this file "
              "(common/verification_log.h; for tools/chaos/chaos.py)");
DEFINE_int64(payload_pad_bytes, 0,
             "bytes of padding after each transition's encoding: stored in the replay memory and "
             "moved across every link like the transition, never fed to the network (the "
             "learner strips them); models rich observations such as camera frames. "
             "--print_layout includes them in payload_bytes and slot_size");
DEFINE_int32(frame_stack, 0,
             "frames stored once: write each new frame once and each transition as references "
             "(frame records), for a server started with the same --frame_stack; needs "
             "--observation=pixels84 and 4. --print_layout then gives a record's slot_size. "
             "0: write encoded transitions");
DEFINE_int64(param_refresh_steps, 500,
             "environment steps (all environments together) between parameter refreshes");
DEFINE_int64(max_env_steps, 0, "stop after this many environment steps (0: no limit)");
DEFINE_double(duration_s, 0, "stop after this many seconds (0: no limit)");
DEFINE_double(max_steps_per_s, 0,
              "cap on environment steps per second of this process (0: none); leaves CPU to "
              "the learner on a shared machine");
DEFINE_double(stats_interval_s, 1, "how often the episode statistics are published");
DEFINE_double(max_priority, 1e6,
              "initial priorities above this are sent as this (NaN: as 0, no estimate)");
DEFINE_string(metrics_listen, "",
              "HOST:PORT to serve Prometheus metrics on, at /metrics, e.g. 127.0.0.1:9466 "
              "(empty: off). HOST is an IP address; port 0: the OS picks one (printed). "
              "Refreshed every --stats_interval_s.");
DEFINE_double(connect_timeout_s, 30, "how long the first connection is retried");
DEFINE_double(reconnect_timeout_s, 60,
              "how long the actor keeps reconnecting when the server goes away");
DEFINE_bool(print_layout, false,
            "print what this actor needs of the server (transition spec, payload, slot and "
            "params bytes; from --env, --n_step, --gamma, --hidden, --payload_pad_bytes) as "
            "JSON and exit");

namespace dreplay::actor {
namespace {

// What --help prints above the flags.
constexpr char kUsage[] =
    "one actor of distributed DQN: steps environments, writes n-step transitions into the "
    "replay server with RDMA, refreshes its network from the learner's parameters.\n"
    "Exit status: 0 clean stop, 1 failure, 2 bad flag.\n"
    "Usage: actor --server=HOST:PORT [--actor_index=I --num_actors=N] [--env=CartPole-v1] "
    "...\n"
    "       actor --print_layout [--env=E --n_step=N --gamma=G --hidden=H "
    "--payload_pad_bytes=P]";

absl::StatusOr<ActorLoopOptions> LoopOptionsFromFlags() {
  ActorLoopOptions o;
  RETURN_IF_ERROR(CheckAtLeast("actor_index", FLAGS_actor_index, 0));
  o.env = FLAGS_env;
  ASSIGN_OR_RETURN(o.observation, rl::ObservationFlag(FLAGS_observation));
  o.num_envs = FLAGS_num_envs;
  o.actor_index = FLAGS_actor_index;
  o.num_actors = FLAGS_num_actors;
  o.epsilon_base = FLAGS_epsilon_base;
  o.epsilon_alpha = FLAGS_epsilon_alpha;
  o.nstep.n = FLAGS_n_step;
  o.nstep.discount = FLAGS_gamma;
  ASSIGN_OR_RETURN(o.hidden_sizes, rl::HiddenFlag(FLAGS_hidden, o.env, o.observation));
  RETURN_IF_ERROR(CheckAtLeast("seed", FLAGS_seed, 0));
  o.seed = static_cast<uint64_t>(FLAGS_seed);
  o.network_seed = static_cast<uint64_t>(FLAGS_seed);
  o.flush_batch = FLAGS_flush_batch;
  RETURN_IF_ERROR(CheckAtLeast("payload_pad_bytes", FLAGS_payload_pad_bytes, 0));
  o.payload_pad_bytes = static_cast<size_t>(FLAGS_payload_pad_bytes);
  o.frame_stack = FLAGS_frame_stack;
  o.max_priority = static_cast<float>(FLAGS_max_priority);
  o.param_refresh_steps = FLAGS_param_refresh_steps;
  o.max_env_steps = FLAGS_max_env_steps;
  ASSIGN_OR_RETURN(o.duration, Seconds("duration_s", FLAGS_duration_s, true));
  o.max_steps_per_s = FLAGS_max_steps_per_s;
  ASSIGN_OR_RETURN(o.stats_interval, Seconds("stats_interval_s", FLAGS_stats_interval_s, false));
  // ActorLoopOptions' messages name the field, which is the flag's name
  // (hidden_sizes is --hidden, nstep.n is --n_step).
  const absl::Status s = o.Validate();
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("bad flag: --", s.message()));
  return o;
}

struct Connection {
  client::ConnectionOptions options;
  client::RetryPolicy retry;
  std::optional<MetricsHttpOptions> metrics;  // --metrics_listen
};

absl::StatusOr<Connection> ConnectionFromFlags() {
  client::ConnectionFlags flags;
  flags.server = FLAGS_server;
  flags.provider = verbs::ProviderFlagsFromCommandLine();
  flags.link = FLAGS_link;
  flags.auth_token = FLAGS_auth_token;
  flags.auth_token_file = FLAGS_auth_token_file;
  flags.insecure = FLAGS_insecure;
  Connection c;
  ASSIGN_OR_RETURN(c.options, client::ConnectionOptionsFromFlags(flags, protocol::Role::kActor,
                                                                 FLAGS_actor_index));
  ASSIGN_OR_RETURN(c.retry.connect_timeout,
                   Seconds("connect_timeout_s", FLAGS_connect_timeout_s, false));
  ASSIGN_OR_RETURN(c.retry.reconnect_timeout,
                   Seconds("reconnect_timeout_s", FLAGS_reconnect_timeout_s, false));
  if (!FLAGS_metrics_listen.empty()) {
    MetricsHttpOptions m;
    absl::Status s = protocol::ParseHostPort(FLAGS_metrics_listen, &m.host, &m.port);
    if (s.ok()) s = m.Validate();
    if (!s.ok()) return FlagError("metrics_listen", FLAGS_metrics_listen, s.message());
    c.metrics = m;
  }
  return c;
}

int Run(const BinaryMain& binary) {
  rl::SetTorchThreads(1);
  const absl::StatusOr<ActorLoopOptions> options = LoopOptionsFromFlags();
  if (!options.ok()) return binary.BadFlag(options.status());
  const absl::StatusOr<ActorLayout> layout = ActorLayout::Compute(
      options->env, options->observation, options->nstep.n, options->nstep.discount,
      options->hidden_sizes, options->payload_pad_bytes, options->frame_stack);
  if (!layout.ok()) return binary.BadFlag(layout.status());
  if (FLAGS_print_layout) {
    std::cout << layout->ToJson() << std::endl;
    return kExitSuccess;
  }
  absl::StatusOr<Connection> connection = ConnectionFromFlags();
  if (!connection.ok()) return binary.BadFlag(connection.status());
  StopSignals signals;
  connection->retry.stop = &signals.flag();

  absl::StatusOr<std::unique_ptr<verbs::Provider>> provider =
      verbs::CreateProvider(connection->options.provider);
  if (!provider.ok()) return binary.Failure(provider.status());
  absl::StatusOr<std::unique_ptr<client::ClientSession>> session =
      client::ConnectWithRetry(provider->get(), connection->options.session, connection->retry);
  if (!session.ok()) return binary.Failure("cannot connect to " + FLAGS_server, session.status());
  ActorRunOptions run_options;
  run_options.retry = connection->retry;
  run_options.metrics = connection->metrics;
  run_options.network_description = absl::StrCat(
      "--observation=", FLAGS_observation, " --hidden=", absl::StrJoin(options->hidden_sizes, ","));
  run_options.server = FLAGS_server;
  run_options.verification_log = FLAGS_verification_log;
  const absl::Status run =
      RunActor(session->get(), *options, *layout, run_options, signals, (*provider)->name());
  if (!run.ok()) return binary.Failure(run);
  return kExitSuccess;
}

}  // namespace
}  // namespace dreplay::actor

int main(int argc, char** argv) {
  dreplay::BinaryMain binary({"actor", dreplay::actor::kUsage, "actor_main"});
  if (std::optional<int> done = binary.Init(argc, argv)) return *done;
  return dreplay::actor::Run(binary);
}
