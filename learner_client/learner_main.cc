// Copyright dreplay authors.
//
// learner: the DQN learner of distributed DQN, across a long-haul link from
// the replay server (the buffer node).
//
//   learner --server=10.0.0.2:7471 --link=10km-25g --replay_placement=buffer
//       --env=CartPole-v1 --stop_when_solved --metrics_out=metrics.jsonl
//
// The placements, the rate limiter, the probe set and the metrics are
// described in learner_loop.h and metrics.h. In the learner placement pass
// the server's --alpha, --priority_epsilon, --beta* and, as
// --min_replay_size, its --min_size_to_sample. The batch size, capacity and
// transition encoding are the server's (its control block and spec).
// Several buffer nodes (edge sites, buffer placement):
//
//   learner --servers=10.0.0.2:7471,10.0.1.2:7471 --shard_policy=exact
//
// samples over all of them (multi_node_source.h, docs/edge-sites.md).
// --servers_file=PATH lists them in a file the learner watches, so that a
// site can join while it trains (servers_file.h).
// SIGINT or SIGTERM ends the run with its summary; a second one at once.
// --metrics_listen=127.0.0.1:9465 serves the latest progress record to
// Prometheus at /metrics (learner_client/prometheus_metrics.h).

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/connection_flags.h"
#include "client/retry.h"
#include "common/binary_main.h"
#include "common/flag_values.h"
#include "common/metrics_http.h"
#include "common/status_macros.h"
#include "common/stop_signals.h"
#include "gflags/gflags.h"
#include "learner_client/learner_loop.h"
#include "learner_client/learner_run.h"
#include "learner_client/multi_node_source.h"
#include "learner_client/servers_file.h"
#include "protocol/host_port.h"
#include "rl/dqn.h"
#include "rl/network_flags.h"
#include "verbs/provider_flag_definitions.h"
#include "verbs/verbs.h"

DEFINE_string(server, "", "the replay server, HOST:PORT (required, or --servers)");
DEFINE_string(servers, "",
              "several buffer nodes (edge sites), HOST:PORT,HOST:PORT,...: one learner trains "
              "on the batches of all of them (buffer placement), made by --shard_policy");
DEFINE_string(servers_file, "",
              "several buffer nodes listed in a file, one \"HOST:PORT [LINK]\" per line, which "
              "the learner reads again every --servers_file_interval_s: a node added to it joins "
              "while the learner trains (excludes --server, --servers and --links)");
DEFINE_double(servers_file_interval_s, 1, "with --servers_file: how often it is read again");
DEFINE_string(links, "",
              "with --servers, soft provider: each node's link, comma-separated in the order of "
              "--servers (empty: --link for every node)");
DEFINE_string(shard_policy, "exact",
              "with --servers: exact (each draw from node k with probability S_k / sum S, S_k "
              "its sum of p^alpha: exact prioritization over all nodes), first_ready (the batch "
              "of whichever node staged one first), round_robin (the nodes' batches in turn)");
DEFINE_double(node_timeout_s, 1,
              "with --servers: a node that stages nothing for this long while it is needed is "
              "passed over until it stages again");
DEFINE_double(node_start_timeout_s, 30,
              "with --servers: the same before a node's first batch (while it fills up to its "
              "--min_size_to_sample), so that every site takes part from the first batch");
DEFINE_string(link, "none",
              "soft provider: the emulated long-haul link to the server (none, 10km-25g, "
              "100km-10g, 1000km-1g, or DELAY_US:GBPS)");
DEFINE_string(auth_token, "", "the server's token, if it has one (prefer --auth_token_file)");
DEFINE_string(auth_token_file, "", "file holding the token (one line)");
DEFINE_bool(insecure, false,
            "connect without a token to a server started with --insecure (its replies go "
            "unproven)");

DEFINE_string(replay_placement, "buffer",
              "buffer: replay memory at the buffer node (READ pre-sampled batches); learner: "
              "replay memory here (READ every transition); hybrid: replay memory here, fed "
              "with what the buffer node forwards once each (its --forward chooses what: by "
              "priority, uniformly, or oldest first)");
DEFINE_string(env, "CartPole-v1",
              "environment (CartPole-v1, Acrobot-v1, MountainCar-v0, MinAtar/Breakout, "
              "MinAtar/Asterix, MinAtar/Freeway, MinAtar/Seaquest, MinAtar/SpaceInvaders)");
DEFINE_string(observation, "native",
              "what the environment observes: native, or pixels84 (MinAtar only: 4 stacked "
              "84x84 frames; the Nature DQN network); the actors'");
DEFINE_string(optimizer, "adam",
              "adam or rmsprop (centered, --rmsprop_alpha, --rmsprop_epsilon); MinAtar "
              "environments default to rmsprop");
DEFINE_double(lr, 1e-3, "learning rate (MinAtar environments default to 0.00025)");
DEFINE_double(adam_epsilon, 1e-8, "Adam epsilon");
DEFINE_double(rmsprop_alpha, 0.95, "RMSprop smoothing constant of the squared gradient");
DEFINE_double(rmsprop_epsilon, 0.01, "RMSprop epsilon");
DEFINE_double(gamma, 0.99, "discount; must be the actors' (taken from the server's spec)");
DEFINE_int32(n_step, 3,
             "n of the n-step transitions; must be the actors' (taken from the "
             "server's spec)");
DEFINE_int64(target_update, 500,
             "train steps between target network updates (MinAtar environments default to "
             "1000)");
DEFINE_string(hidden, "",
              "hidden layer sizes of the Q-network's head (the actors'); empty: the "
              "environment's default (64,64; MinAtar 128; pixels84 512)");
DEFINE_double(huber_delta, 1.0, "Huber loss threshold");
DEFINE_double(max_grad_norm, 10.0, "gradient norm clipping (0: off)");
DEFINE_bool(double_dqn, true, "double DQN targets");
DEFINE_int64(seed, 1, "seed of the initial network (the actors' --seed gives them the same)");

DEFINE_double(alpha, 0.6, "learner and hybrid placements: prioritization exponent");
DEFINE_double(priority_epsilon, 1e-6, "learner and hybrid placements: added to priorities");
DEFINE_double(beta, 0.4, "learner and hybrid placements: initial importance-sampling exponent");
DEFINE_double(beta_final, 1.0, "learner and hybrid placements: final importance-sampling exponent");
DEFINE_int64(beta_steps, 100000,
             "learner and hybrid placements: batches over which beta is annealed");
DEFINE_int64(min_replay_size, 1000,
             "learner and hybrid placements: transitions stored before training starts (as "
             "the buffer placement's server --min_size_to_sample)");
DEFINE_int64(local_capacity, 0,
             "learner and hybrid placements: slots of the local replay memory, a power of "
             "two (0: the server's capacity). Sized to the arrival rate, it makes the local "
             "memory cover the same seconds of data as the buffer node's");
DEFINE_double(max_updates_per_s, 0,
              "at most this many train steps per second, in every placement, so that runs "
              "can be compared at equal updates (0: as fast as data allows)");
DEFINE_double(samples_per_insert, 0,
              "learner and hybrid placements: target transitions trained on per transition "
              "generated (the "
              "server's ingest cursor: what forwarding lost counts too), enforced "
              "by a rate limiter on the local replay memory (0: no limit; the buffer placement's "
              "limit is the server's flag). With --servers: one limit over every node's inserts "
              "(each node's server may keep its own)");
DEFINE_double(spi_error_buffer, 0,
              "learner and hybrid placements, and --servers: the rate limiter's slack in "
              "transitions (>= the "
              "batch size "
              "with a --samples_per_insert limit)");
DEFINE_string(forward_policy, "in_order",
              "learner placement: in_order (every transition, in sequence order) or freshest "
              "(the newest first, skipping what fell behind)");
DEFINE_int64(forward_window, 0,
             "learner placement, --forward_policy=freshest: of the sequences taken from the "
             "journal and not READ yet, how many of the newest are kept; older ones are skipped "
             "(counted as skipped_sequences). In [0, capacity]; 0: capacity/2");
DEFINE_int32(forward_chunk_slots, 256, "learner placement: slots per forwarding READ");
DEFINE_int32(forward_chunks_in_flight, 8,
             "learner placement: forwarding READs in flight (with --forward_chunk_slots, the "
             "bytes in flight: size them to the link's bandwidth-delay product)");
DEFINE_bool(learner_cache, true,
            "buffer placement: keep the transitions already fetched and READ only the batch "
            "entries not held (transfer-once: each transition crosses the link at most once; "
            "what is learned is the same). Hybrid placement with frames stored once: the "
            "frame records already received are not sent again. --nolearner_cache READs every "
            "entry");
DEFINE_bool(assemble_ahead, true,
            "buffer placement: decode each staged batch and assemble its frame stacks on a thread "
            "of its own, READing the next batch while the learner trains on the one before "
            "(--noassemble_ahead: on the learner's thread, between steps)");
DEFINE_int32(probe_size, 1024,
             "transitions in the probe set (random actions in the learner's own environment, "
             "collected at the start) whose unweighted TD loss is reported (0: none)");
DEFINE_int64(probe_seed, 12345, "seed of the probe set's environment and actions");
DEFINE_int32(batch_depth, 0,
             "buffer and hybrid placements: batch READs in flight (0: the server's staging "
             "depth)");

DEFINE_int64(train_steps, 0, "stop after this many train steps (0: no limit)");
DEFINE_double(duration_s, 0, "stop after this many seconds (0: no limit)");
DEFINE_bool(stop_when_solved, false, "stop at the first evaluation that reaches --solve_return");
DEFINE_double(solve_return, 475, "greedy mean return that counts as solved");
DEFINE_int32(eval_episodes, 100, "episodes per greedy evaluation");
DEFINE_double(eval_interval_s, 5,
              "seconds between greedy evaluations (0: none in the learner; evaluate "
              "--snapshot_dir offline instead)");
DEFINE_string(snapshot_dir, "",
              "write parameter snapshots here for offline evaluation "
              "(tools/experiment/evaluate_snapshots); empty: none");
DEFINE_double(snapshot_interval_s, 2, "seconds between snapshots with --snapshot_dir");
DEFINE_int64(publish_every, 100, "train steps between parameter publications (0: never)");
DEFINE_double(max_priority, 1e6, "new priorities above this are written as this");
DEFINE_string(metrics_out, "", "write progress and summary records here as JSON lines");
DEFINE_string(verification_log, "",
              "if set, append a record of every batch entry or forwarded transition handed to "
              "training to this file "
              "(common/verification_log.h; for tools/chaos/chaos.py)");
DEFINE_double(progress_interval_s, 5, "seconds between progress records");
DEFINE_string(metrics_listen, "",
              "HOST:PORT to serve Prometheus metrics on, at /metrics, e.g. 127.0.0.1:9465 "
              "(empty: off). HOST is an IP address; port 0: the OS picks one (printed). The "
              "figures are the latest progress record's.");
DEFINE_string(metrics_port_file, "",
              "if set, the metrics port is written to this file (with --metrics_listen)");
DEFINE_double(connect_timeout_s, 30, "how long the first connection is retried");
DEFINE_double(reconnect_timeout_s, 60,
              "how long the learner keeps reconnecting when the server goes away");

namespace dreplay::learner {
namespace {

// What --help prints above the flags.
constexpr char kUsage[] =
    "the DQN learner: trains on experiences from the replay server across a long link, "
    "publishes parameters for the actors, reports metrics.\n"
    "Exit status: 0 after a run, 1 failure, 2 bad flag.\n"
    "Usage: learner --server=HOST:PORT (or --servers=HOST:PORT,HOST:PORT "
    "[--shard_policy=exact|first_ready|round_robin]) [--replay_placement=buffer|learner|hybrid] "
    "[--link=10km-25g] [--stop_when_solved] [--metrics_out=FILE] ...";

bool FlagIsDefault(const char* name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(name, &info) && info.is_default;
}

// The DQN flags into `dqn`. MinAtar environments start from MinAtar's
// published hyper-parameters (rl::MinAtarDqnOptions), which a flag given on
// the command line overrides; other environments from the flags' defaults.
absl::Status DqnFromFlags(rl::DqnOptions* dqn) {
  const bool minatar = absl::StartsWith(FLAGS_env, "MinAtar/");
  if (minatar) *dqn = rl::MinAtarDqnOptions();
  auto given = [minatar](const char* flag) { return !minatar || !FlagIsDefault(flag); };
  if (given("optimizer")) {
    if (FLAGS_optimizer == "adam") {
      dqn->optimizer = rl::DqnOptimizer::kAdam;
    } else if (FLAGS_optimizer == "rmsprop") {
      dqn->optimizer = rl::DqnOptimizer::kRmsprop;
    } else {
      return FlagError("optimizer", FLAGS_optimizer, "must be adam or rmsprop");
    }
  }
  if (given("lr")) dqn->learning_rate = FLAGS_lr;
  if (given("target_update")) dqn->target_update_period = FLAGS_target_update;
  dqn->adam_epsilon = FLAGS_adam_epsilon;
  dqn->rmsprop_alpha = FLAGS_rmsprop_alpha;
  dqn->rmsprop_epsilon = FLAGS_rmsprop_epsilon;
  dqn->huber_delta = FLAGS_huber_delta;
  dqn->double_dqn = FLAGS_double_dqn;
  dqn->max_gradient_norm = FLAGS_max_grad_norm;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<MetricsHttpOptions>> MetricsOptionsFromFlags() {
  if (FLAGS_metrics_listen.empty()) return std::optional<MetricsHttpOptions>();
  MetricsHttpOptions o;
  absl::Status s = protocol::ParseHostPort(FLAGS_metrics_listen, &o.host, &o.port);
  if (s.ok()) s = o.Validate();
  if (!s.ok()) return FlagError("metrics_listen", FLAGS_metrics_listen, s.message());
  return std::optional<MetricsHttpOptions>(std::move(o));
}

// The nodes --servers and --links name, or --servers_file lists (then
// `file` is set); none without either.
absl::StatusOr<std::vector<NodeAddress>> NodeAddressesFromFlags(bool* file) {
  *file = !FLAGS_servers_file.empty();
  if (*file) {
    if (!FLAGS_server.empty() || !FLAGS_servers.empty() || !FLAGS_links.empty()) {
      return FlagError("servers_file", FLAGS_servers_file,
                       "excludes --server, --servers and --links (the file names each node's "
                       "link)");
    }
    absl::StatusOr<std::vector<NodeAddress>> nodes = ReadServersFile(FLAGS_servers_file);
    if (!nodes.ok()) return FlagError("servers_file", FLAGS_servers_file, nodes.status().message());
    if (nodes->empty()) return FlagError("servers_file", FLAGS_servers_file, "lists no node");
    return nodes;
  }
  std::vector<NodeAddress> nodes;
  if (FLAGS_servers.empty()) return nodes;
  if (!FLAGS_server.empty()) return FlagError("servers", FLAGS_servers, "excludes --server");
  std::vector<std::string> servers = absl::StrSplit(FLAGS_servers, ',');
  std::vector<std::string> links;
  if (!FLAGS_links.empty()) {
    links = absl::StrSplit(FLAGS_links, ',');
    if (links.size() != servers.size()) {
      return FlagError(
          "links", FLAGS_links,
          absl::StrCat("names ", links.size(), " links for ", servers.size(), " servers"));
    }
  }
  for (size_t k = 0; k < servers.size(); ++k) {
    nodes.push_back(NodeAddress{servers[k], links.empty() ? "" : links[k]});
  }
  return nodes;
}

// The nodes, --shard_policy, --node_timeout_s, ... into c->nodes and
// c->multi: each node's connection is c->connection's with its address and
// link.
absl::Status NodesFromFlags(const std::vector<NodeAddress>& addresses, bool file,
                            LearnerRunOptions* c) {
  const char* const flag = file ? "servers_file" : "servers";
  const std::string value = file ? FLAGS_servers_file : FLAGS_servers;
  if (c->loop.placement != ReplayPlacement::kBuffer) {
    return FlagError(flag, value, "needs --replay_placement=buffer");
  }
  absl::StatusOr<ShardPolicy> policy = ParseShardPolicy(FLAGS_shard_policy);
  if (!policy.ok()) {
    return FlagError("shard_policy", FLAGS_shard_policy,
                     "must be exact, first_ready or round_robin");
  }
  c->multi.policy = *policy;
  // One limit over every node's inserts, started once they hold
  // --min_replay_size together.
  c->multi.samples_per_insert = FLAGS_samples_per_insert;
  c->multi.spi_error_buffer = FLAGS_spi_error_buffer;
  c->multi.min_inserted = static_cast<uint64_t>(std::max<int64_t>(1, FLAGS_min_replay_size));
  ASSIGN_OR_RETURN(c->multi.node_timeout, Seconds("node_timeout_s", FLAGS_node_timeout_s, false));
  ASSIGN_OR_RETURN(c->multi.start_timeout,
                   Seconds("node_start_timeout_s", FLAGS_node_start_timeout_s, false));
  if (c->multi.start_timeout < c->multi.node_timeout) {
    return FlagError("node_start_timeout_s", absl::StrCat(FLAGS_node_start_timeout_s),
                     "must be >= --node_timeout_s");
  }
  for (const NodeAddress& address : addresses) {
    // Everything but the address and link (placement, cache, deadlines) as
    // the first's.
    absl::StatusOr<client::ConnectionOptions> each = NodeConnection(c->connection, address);
    if (!each.ok()) return FlagError(flag, value, each.status().message());
    c->nodes.push_back(*std::move(each));
  }
  if (file) {
    c->servers_file = FLAGS_servers_file;
    ASSIGN_OR_RETURN(c->servers_file_interval,
                     Seconds("servers_file_interval_s", FLAGS_servers_file_interval_s, false));
  }
  std::vector<std::string> servers;
  for (const NodeAddress& a : addresses) servers.push_back(a.server);
  c->server = absl::StrJoin(servers, ",");
  c->link = file ? absl::StrCat("as ", FLAGS_servers_file, " says (default ", FLAGS_link, ")")
            : FLAGS_links.empty() ? FLAGS_link
                                  : FLAGS_links;
  return absl::OkStatus();
}

// Everything but what the server publishes (batch size, capacity).
absl::StatusOr<LearnerRunOptions> ConfigFromFlags() {
  client::ConnectionFlags flags;
  flags.server = FLAGS_server;
  flags.provider = verbs::ProviderFlagsFromCommandLine();
  flags.link = FLAGS_link;
  flags.auth_token = FLAGS_auth_token;
  flags.auth_token_file = FLAGS_auth_token_file;
  flags.insecure = FLAGS_insecure;
  LearnerRunOptions c;
  bool from_file = false;
  ASSIGN_OR_RETURN(const std::vector<NodeAddress> nodes, NodeAddressesFromFlags(&from_file));
  if (!nodes.empty()) flags.server = nodes[0].server;
  ASSIGN_OR_RETURN(c.connection,
                   client::ConnectionOptionsFromFlags(flags, protocol::Role::kLearner));
  ASSIGN_OR_RETURN(c.retry.connect_timeout,
                   Seconds("connect_timeout_s", FLAGS_connect_timeout_s, false));
  ASSIGN_OR_RETURN(c.retry.reconnect_timeout,
                   Seconds("reconnect_timeout_s", FLAGS_reconnect_timeout_s, false));
  ASSIGN_OR_RETURN(c.metrics, MetricsOptionsFromFlags());
  if (!FLAGS_metrics_port_file.empty() && !c.metrics.has_value()) {
    return FlagError("metrics_port_file", FLAGS_metrics_port_file, "needs --metrics_listen");
  }
  c.metrics_port_file = FLAGS_metrics_port_file;

  LearnerLoopOptions& o = c.loop;
  {
    absl::StatusOr<ReplayPlacement> placement = ParseReplayPlacement(FLAGS_replay_placement);
    if (!placement.ok()) {
      return FlagError("replay_placement", FLAGS_replay_placement,
                       "must be buffer, learner or hybrid");
    }
    o.placement = *placement;
  }
  o.env = FLAGS_env;
  ASSIGN_OR_RETURN(o.observation, rl::ObservationFlag(FLAGS_observation));
  RETURN_IF_ERROR(DqnFromFlags(&o.dqn));
  ASSIGN_OR_RETURN(o.dqn.network.hidden_sizes,
                   rl::HiddenFlag(FLAGS_hidden, FLAGS_env, o.observation));
  RETURN_IF_ERROR(CheckAtLeast("seed", FLAGS_seed, 0));
  o.dqn.seed = static_cast<uint64_t>(FLAGS_seed);
  o.seed = static_cast<uint64_t>(FLAGS_seed);
  o.memory.alpha = FLAGS_alpha;
  o.memory.priority_epsilon = FLAGS_priority_epsilon;
  o.memory.seed = static_cast<uint64_t>(FLAGS_seed);
  o.beta.initial = FLAGS_beta;
  o.beta.final = FLAGS_beta_final;
  RETURN_IF_ERROR(CheckAtLeast("beta_steps", FLAGS_beta_steps, 0));
  o.beta.steps = static_cast<uint64_t>(FLAGS_beta_steps);
  RETURN_IF_ERROR(CheckAtLeast("min_replay_size", FLAGS_min_replay_size, 1));
  o.min_replay_size = static_cast<uint64_t>(FLAGS_min_replay_size);
  o.samples_per_insert = FLAGS_samples_per_insert;
  if (!(FLAGS_max_updates_per_s >= 0) || !std::isfinite(FLAGS_max_updates_per_s)) {
    return FlagError("max_updates_per_s", absl::StrCat(FLAGS_max_updates_per_s),
                     "must be finite and >= 0");
  }
  o.max_updates_per_s = FLAGS_max_updates_per_s;
  o.spi_error_buffer = FLAGS_spi_error_buffer;
  RETURN_IF_ERROR(CheckAtLeast("probe_size", FLAGS_probe_size, 0));
  o.probe_size = FLAGS_probe_size;
  RETURN_IF_ERROR(CheckAtLeast("probe_seed", FLAGS_probe_seed, 0));
  o.probe_seed = static_cast<uint64_t>(FLAGS_probe_seed);
  if (FLAGS_forward_policy != "in_order" && FLAGS_forward_policy != "freshest") {
    return FlagError("forward_policy", FLAGS_forward_policy, "must be in_order or freshest");
  }
  o.publish_every = FLAGS_publish_every;
  o.max_priority = static_cast<float>(FLAGS_max_priority);
  o.max_train_steps = FLAGS_train_steps;
  ASSIGN_OR_RETURN(o.duration, Seconds("duration_s", FLAGS_duration_s, true));
  o.stop_when_solved = FLAGS_stop_when_solved;
  o.solve_return = FLAGS_solve_return;
  o.eval_episodes = FLAGS_eval_episodes;
  ASSIGN_OR_RETURN(o.eval_interval, Seconds("eval_interval_s", FLAGS_eval_interval_s, true));
  if (o.stop_when_solved && o.eval_interval == absl::InfiniteDuration()) {
    return FlagError("eval_interval_s", "0", "must be > 0 with --stop_when_solved");
  }
  if (!FLAGS_snapshot_dir.empty()) {
    ASSIGN_OR_RETURN(o.snapshot_interval,
                     Seconds("snapshot_interval_s", FLAGS_snapshot_interval_s, false));
  }
  ASSIGN_OR_RETURN(o.progress_interval,
                   Seconds("progress_interval_s", FLAGS_progress_interval_s, false));
  RETURN_IF_ERROR(CheckAtLeast("batch_depth", FLAGS_batch_depth, 0));
  RETURN_IF_ERROR(CheckAtLeast("forward_window", FLAGS_forward_window, 0));
  RETURN_IF_ERROR(CheckAtLeast("forward_chunk_slots", FLAGS_forward_chunk_slots, 1));
  RETURN_IF_ERROR(CheckAtLeast("forward_chunks_in_flight", FLAGS_forward_chunks_in_flight, 1));
  RETURN_IF_ERROR(CheckAtLeast("n_step", FLAGS_n_step, 1));
  // The server stages references only for a learner that keeps what it gets:
  // the buffer placement's cache, or the hybrid placement's frame records
  // (with frames stored once; a server without frames ignores it there).
  const bool learner_cache = FLAGS_learner_cache && o.placement == ReplayPlacement::kBuffer;
  c.connection.session.learner_cache =
      FLAGS_learner_cache && o.placement != ReplayPlacement::kLearner;
  c.io.batch_reader.depth = static_cast<uint32_t>(FLAGS_batch_depth);
  c.io.learner_cache = learner_cache;
  c.io.assemble_ahead = FLAGS_assemble_ahead;
  c.io.forward_policy = FLAGS_forward_policy;
  c.io.forward_reader.window = static_cast<uint64_t>(FLAGS_forward_window);
  c.io.forward_reader.chunk_slots = static_cast<uint32_t>(FLAGS_forward_chunk_slots);
  c.io.forward_reader.max_chunks_in_flight = static_cast<uint32_t>(FLAGS_forward_chunks_in_flight);
  RETURN_IF_ERROR(CheckAtLeast("local_capacity", FLAGS_local_capacity, 0));
  if (FLAGS_local_capacity > 0 && o.placement == ReplayPlacement::kBuffer) {
    return FlagError("local_capacity", absl::StrCat(FLAGS_local_capacity),
                     "needs a replay memory at the learner (--replay_placement=learner or hybrid)");
  }
  if ((FLAGS_local_capacity & (FLAGS_local_capacity - 1)) != 0) {
    return FlagError("local_capacity", absl::StrCat(FLAGS_local_capacity),
                     "must be a power of two");
  }
  c.local_capacity = static_cast<uint64_t>(FLAGS_local_capacity);
  c.expected = {FLAGS_n_step, FLAGS_gamma, !FlagIsDefault("n_step"), !FlagIsDefault("gamma")};
  c.metrics_out = FLAGS_metrics_out;
  c.verification_log = FLAGS_verification_log;
  c.snapshot_dir = FLAGS_snapshot_dir;
  c.server = FLAGS_server;
  c.link = FLAGS_link;
  if (!nodes.empty()) RETURN_IF_ERROR(NodesFromFlags(nodes, from_file, &c));
  return c;
}

int Run(const BinaryMain& binary) {
  absl::StatusOr<LearnerRunOptions> config = ConfigFromFlags();
  if (!config.ok()) return binary.BadFlag(config.status());
  StopSignals signals;
  config->retry.stop = &signals.flag();
  absl::StatusOr<std::unique_ptr<verbs::Provider>> provider =
      verbs::CreateProvider(config->connection.provider);
  if (!provider.ok()) return binary.Failure(provider.status());
  const absl::Status status = RunLearner(*config, provider->get(), signals);
  if (!status.ok()) return binary.Failure(status);
  return kExitSuccess;
}

}  // namespace
}  // namespace dreplay::learner

int main(int argc, char** argv) {
  dreplay::BinaryMain binary({"learner", dreplay::learner::kUsage, "learner_main"});
  if (std::optional<int> done = binary.Init(argc, argv)) return *done;
  return dreplay::learner::Run(binary);
}
