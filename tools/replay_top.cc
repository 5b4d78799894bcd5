// Copyright dreplay authors.
//
// replay_top: a live view of a replay server, read with one-sided RDMA READs
// only (no server CPU): it connects as a monitor and READs the stats region,
// the actors region and (once) the control block's replay policy.
//
//   replay_top --server=10.0.0.2:7471 --auth_token_file=/etc/dreplay/token
//   replay_top --server=127.0.0.1:7471 --once            # one screen, then exit
//   replay_top --server=127.0.0.1:7471 --once --json     # one JSON object
//   replay_top --server=127.0.0.1:7471 --json            # a JSON line per interval
//   replay_top --servers=10.0.0.2:7471,10.0.1.2:7471     # several buffer nodes
//
// What it shows (rates, priorities, drops by cause, the replay ratio against
// the published policy, transfer-once figures, clients, per-actor lines) is
// defined in tools/replay_monitor.h. The live view redraws every
// --interval_s until Ctrl-C and keeps trying when the server goes away; with
// --once it takes two snapshots --interval_s apart and exits. Exit status: 0
// success; 1 when the server cannot be reached, refuses or cannot be read; 2
// for a bad flag.
//
// With --servers (several buffer nodes, as `learner --servers`): totals over
// the nodes and a view per node (tools/replay_monitor.h, RenderNodesText and
// RenderNodesJson). A node that cannot be reached or read shows as such, with
// its error, and does not stop the others: the live view tries it again every
// interval (and ends only when no node can be reached at the start); --once
// prints the others and exits 1.

#include <cstddef>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/connection_flags.h"
#include "client/session.h"
#include "client/stats_reader.h"
#include "common/binary_main.h"
#include "common/flag_values.h"
#include "common/status_macros.h"
#include "common/stop_signals.h"
#include "gflags/gflags.h"
#include "protocol/handshake.h"
#include "protocol/layout.h"
#include "tools/replay_monitor.h"
#include "verbs/provider_flag_definitions.h"
#include "verbs/verbs.h"

DEFINE_string(server, "", "HOST:PORT of the replay server (this or --servers)");
DEFINE_string(servers, "",
              "several buffer nodes (edge sites), HOST:PORT,HOST:PORT,...: totals over them and "
              "a view per node");
DEFINE_string(link, "none",
              "soft provider: emulated link to the server (none, 10km-25g, ... or DELAY_US:GBPS)");
DEFINE_string(links, "",
              "with --servers, soft provider: each node's link, comma-separated in the order of "
              "--servers (empty: --link for every node)");
DEFINE_string(auth_token, "", "the server's token (prefer --auth_token_file)");
DEFINE_string(auth_token_file, "", "file holding the server's token (one line)");
DEFINE_bool(insecure, false,
            "connect without a token to a server started with --insecure (its replies go "
            "unproven)");
DEFINE_double(interval_s, 1,
              "refresh interval; with --once, the window over which rates are measured "
              "(0: a single snapshot, no rates)");
DEFINE_bool(once, false, "print one view and exit");
DEFINE_bool(json, false, "print JSON (one object per view) instead of text");
DEFINE_double(connect_timeout_s, 5, "give up connecting after this long");

namespace dreplay::tools {
namespace {

// What --help prints above the flags.
constexpr char kUsage[] =
    "a live view of replay servers, read with RDMA READs only (role monitor).\n"
    "Usage: replay_top --server=HOST:PORT (or --servers=HOST:PORT,HOST:PORT,...) "
    "[--auth_token_file=F] [--interval_s=1] [--once] [--json]\n"
    "Exit status: 0 success, 1 a server unreachable / refused / unreadable, 2 bad flag.";

using client::ClientSession;

// ANSI: cursor home, clear screen.
constexpr char kClearScreen[] = "\x1b[H\x1b[2J";
constexpr double kMaxSeconds = 1e6;

// One node to watch: its address as given and how to connect to it.
struct NodeConfig {
  std::string server;
  client::ConnectionOptions connection;
};

struct Config {
  std::vector<NodeConfig> nodes;  // in the order of --servers; one for --server
  bool several = false;           // --servers: the view of several nodes
  absl::Duration interval;
};

// --server or --servers, and --link or --links, into config->nodes.
absl::Status NodesFromFlags(const client::ConnectionFlags& flags, Config* config) {
  if (FLAGS_server.empty() == FLAGS_servers.empty()) {
    return FLAGS_server.empty() ? FlagError("server", "", "required (or --servers)")
                                : FlagError("servers", FLAGS_servers, "excludes --server");
  }
  config->several = !FLAGS_servers.empty();
  const std::vector<std::string> servers =
      config->several ? absl::StrSplit(FLAGS_servers, ',') : std::vector<std::string>{FLAGS_server};
  std::vector<std::string> links;
  if (!FLAGS_links.empty()) {
    if (!config->several) return FlagError("links", FLAGS_links, "needs --servers");
    links = absl::StrSplit(FLAGS_links, ',');
    if (links.size() != servers.size()) {
      return FlagError(
          "links", FLAGS_links,
          absl::StrCat("names ", links.size(), " links for ", servers.size(), " servers"));
    }
  }
  for (size_t k = 0; k < servers.size(); ++k) {
    client::ConnectionFlags node = flags;
    node.server = servers[k];
    if (!links.empty()) node.link = links[k];
    absl::StatusOr<client::ConnectionOptions> options =
        client::ConnectionOptionsFromFlags(node, protocol::Role::kMonitor);
    if (!options.ok()) {
      if (!config->several) return options.status();
      return links.empty() ? FlagError("servers", FLAGS_servers, options.status().message())
                           : FlagError("servers/links", FLAGS_servers + " " + FLAGS_links,
                                       options.status().message());
    }
    config->nodes.push_back({servers[k], *std::move(options)});
  }
  return absl::OkStatus();
}

absl::StatusOr<Config> ConfigFromFlags() {
  client::ConnectionFlags flags;
  flags.provider = verbs::ProviderFlagsFromCommandLine();
  flags.link = FLAGS_link;
  flags.auth_token = FLAGS_auth_token;
  flags.auth_token_file = FLAGS_auth_token_file;
  flags.insecure = FLAGS_insecure;
  flags.empty_token_file = EmptyTokenFile::kRefused;
  Config c;
  RETURN_IF_ERROR(NodesFromFlags(flags, &c));
  if (!(FLAGS_interval_s >= 0) || FLAGS_interval_s > kMaxSeconds ||
      (!FLAGS_once && FLAGS_interval_s == 0)) {
    return FlagError("interval_s", std::to_string(FLAGS_interval_s),
                     FLAGS_once ? "must be >= 0" : "must be > 0");
  }
  c.interval = absl::Seconds(FLAGS_interval_s);
  if (!(FLAGS_connect_timeout_s > 0) || FLAGS_connect_timeout_s > kMaxSeconds) {
    return FlagError("connect_timeout_s", std::to_string(FLAGS_connect_timeout_s), "must be > 0");
  }
  for (NodeConfig& node : c.nodes) {
    node.connection.session.connect_deadline = absl::Seconds(FLAGS_connect_timeout_s);
    node.connection.session.op_timeout = absl::Seconds(FLAGS_connect_timeout_s);
  }
  return c;
}

// A monitor's connection and its reader.
struct Monitor {
  std::unique_ptr<ClientSession> session;
  std::unique_ptr<client::StatsReader> reader;
  std::unique_ptr<client::RegisteredBuffer> lease_lines;  // READ target
};

// Connects; the message says what went wrong in the user's terms.
absl::StatusOr<Monitor> Connect(verbs::Provider* provider, const NodeConfig& node) {
  Monitor m;
  absl::StatusOr<std::unique_ptr<ClientSession>> session =
      ClientSession::Connect(provider, node.connection.session);
  if (!session.ok()) {
    const absl::Status& s = session.status();
    std::string why;
    if (absl::IsPermissionDenied(s)) {
      why = "the server refused the connection";
    } else if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      why = absl::StrCat("cannot reach the server within ",
                         absl::FormatDuration(node.connection.session.connect_deadline));
    } else {
      why = "cannot connect";
    }
    return absl::Status(s.code(), absl::StrCat(node.server, ": ", why, ": ", s.message()));
  }
  m.session = std::move(*session);
  ASSIGN_OR_RETURN(m.reader, client::StatsReader::Create(m.session.get()));
  return m;
}

absl::StatusOr<MonitorSnapshot> Snapshot(Monitor* m) {
  MonitorSnapshot snap;
  ASSIGN_OR_RETURN(snap.stats, m->reader->ReadStats());
  if (m->session->config().max_actors > 0) {
    ASSIGN_OR_RETURN(snap.actors, m->reader->ReadActors());
  }
  // The lease lines: informational words, each READ as it is.
  const uint32_t leases = m->session->config().leases;
  const uint64_t bytes = uint64_t{leases} * sizeof(protocol::LeaseLine);
  if (m->lease_lines == nullptr) {
    ASSIGN_OR_RETURN(m->lease_lines,
                     client::RegisteredBuffer::Create(m->session->provider(), bytes));
  }
  RETURN_IF_ERROR(m->session->ReadSync(protocol::RegionKind::kLeases, 0,
                                       static_cast<uint32_t>(bytes), m->lease_lines->mr(),
                                       m->lease_lines->data()));
  snap.leases.resize(leases);
  std::memcpy(snap.leases.data(), m->lease_lines->data(), bytes);
  snap.taken = absl::Now();
  return snap;
}

// The facts shown with every view: the layout and the published policy.
absl::StatusOr<MonitorInfo> InfoOf(const std::string& server, Monitor* m) {
  MonitorInfo info{server, m->session->config()};
  ASSIGN_OR_RETURN(
      std::unique_ptr<client::RegisteredBuffer> buffer,
      client::RegisteredBuffer::Create(m->session->provider(), sizeof(protocol::PolicyLine)));
  RETURN_IF_ERROR(m->session->ReadSync(protocol::RegionKind::kControl,
                                       offsetof(protocol::ControlBlock, policy),
                                       sizeof(protocol::PolicyLine), buffer->mr(), buffer->data()));
  std::memcpy(&info.policy, buffer->data(), sizeof(info.policy));
  return info;
}

// One node as the tool watches it: connected (with its info) or not, and
// its last snapshot, for rates. Used by one thread at a time.
class Node {
 public:
  explicit Node(NodeConfig config) : config_(std::move(config)) {}

  // Connects when not connected, READs a snapshot and returns the view
  // (with the previous snapshot, if any, for rates); a failure leaves the
  // node to connect again next time.
  NodeView Read(verbs::Provider* provider) {
    NodeView view;
    view.server = config_.server;
    if (const absl::Status status = Connected(provider); !status.ok()) {
      view.error = std::string(status.message());
      return view;
    }
    absl::StatusOr<MonitorSnapshot> now = Snapshot(&*monitor_);
    if (!now.ok()) {
      view.error = std::string(Lost(now.status()).message());
      return view;
    }
    view.info = info_;
    view.now = *now;
    view.before = std::move(previous_);
    previous_ = *std::move(now);
    return view;
  }

 private:
  // Connects when not connected; the status of that, messages naming the
  // server.
  absl::Status Connected(verbs::Provider* provider) {
    if (monitor_.ok()) return absl::OkStatus();
    monitor_ = Connect(provider, config_);
    if (!monitor_.ok()) return monitor_.status();
    absl::StatusOr<MonitorInfo> info = InfoOf(config_.server, &*monitor_);
    if (!info.ok()) return Lost(info.status());
    info_ = *std::move(info);
    return absl::OkStatus();
  }

  // Forgets the connection (the next call connects again) and the last
  // snapshot; the status, its message naming the server.
  absl::Status Lost(const absl::Status& error) {
    monitor_ = absl::UnavailableError("not connected");
    previous_.reset();
    return absl::Status(error.code(),
                        absl::StrCat("reading ", config_.server, ": ", error.ToString()));
  }

  const NodeConfig config_;
  absl::StatusOr<Monitor> monitor_ = absl::UnavailableError("not connected");
  MonitorInfo info_;                         // valid while monitor_ is
  std::optional<MonitorSnapshot> previous_;  // of this connection
};

std::vector<Node> NodesOf(const Config& config) {
  std::vector<Node> nodes;
  nodes.reserve(config.nodes.size());
  for (const NodeConfig& node : config.nodes) nodes.emplace_back(node);
  return nodes;
}

// Calls read(&nodes[k], &(*views)[k]) for every node at once, one thread
// each, and returns when all have: a node that cannot be reached delays the
// view by its --connect_timeout_s once, not once per such node.
template <typename ReadFn>
void ReadNodes(std::vector<Node>* nodes, std::vector<NodeView>* views, ReadFn read) {
  views->resize(nodes->size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < nodes->size(); ++k) {
    threads.emplace_back([&read, node = &(*nodes)[k], view = &(*views)[k]] { read(node, view); });
  }
  for (std::thread& thread : threads) thread.join();
}

std::vector<std::string> ErrorsOf(const std::vector<NodeView>& views) {
  std::vector<std::string> errors;
  for (const NodeView& view : views) {
    if (!view.error.empty()) errors.push_back(view.error);
  }
  return errors;
}

// One view of one node (--server) or several (--servers), as text or JSON.
std::string Render(const Config& config, const std::vector<NodeView>& views) {
  if (config.several) {
    return FLAGS_json ? RenderNodesJson(views) + "\n" : RenderNodesText(views);
  }
  const NodeView& v = views[0];
  const MonitorSnapshot* before = v.before.has_value() ? &*v.before : nullptr;
  return FLAGS_json ? RenderMonitorJson(v.info, v.now, before) + "\n"
                    : RenderMonitorText(v.info, v.now, before);
}

int RunOnce(const BinaryMain& binary, verbs::Provider* provider, const Config& config) {
  std::vector<Node> nodes = NodesOf(config);
  std::vector<NodeView> views;
  ReadNodes(&nodes, &views, [&](Node* node, NodeView* view) {
    *view = node->Read(provider);
    if (view->error.empty() && config.interval > absl::ZeroDuration()) {
      absl::SleepFor(config.interval);  // the window the rates are measured over
      *view = node->Read(provider);
    }
  });
  const std::vector<std::string> errors = ErrorsOf(views);
  if (!config.several && !errors.empty()) return binary.Exit(kExitFailure, errors[0]);
  std::cout << Render(config, views) << std::flush;
  if (errors.empty()) return kExitSuccess;
  return binary.Exit(kExitFailure, absl::StrJoin(errors, "; "));
}

// Draws one refresh of the live view: a node's error replaces the view of
// one server; with several, failed nodes show inside the view.
void Draw(const Config& config, const std::vector<NodeView>& views) {
  if (config.several || views[0].error.empty()) {
    std::cout << (FLAGS_json ? "" : kClearScreen) << Render(config, views);
    if (!FLAGS_json) {
      std::cout << "\n(refresh every " << absl::FormatDuration(config.interval)
                << ", Ctrl-C quits)\n";
    }
  } else if (FLAGS_json) {
    std::cerr << "replay_top: " << views[0].error << "\n";
  } else {
    std::cout << kClearScreen << "replay_top  " << views[0].server
              << "\n\nerror: " << views[0].error << "\n(retrying every "
              << absl::FormatDuration(config.interval) << ", Ctrl-C quits)\n";
  }
  std::cout << std::flush;
}

int RunLive(const BinaryMain& binary, verbs::Provider* provider, const Config& config,
            StopSignals* signals) {
  std::vector<Node> nodes = NodesOf(config);
  std::vector<NodeView> views;
  const auto read = [provider](Node* node, NodeView* view) { *view = node->Read(provider); };
  ReadNodes(&nodes, &views, read);
  // A node must be read at first: a typo in --server or the token should
  // end the tool, not leave it waiting. With --servers one is enough; the
  // others are tried again at every refresh.
  const std::vector<std::string> errors = ErrorsOf(views);
  if (errors.size() == nodes.size()) return binary.Exit(kExitFailure, absl::StrJoin(errors, "; "));
  while (true) {
    Draw(config, views);
    signals->WaitFor(config.interval);
    if (signals->requested()) return kExitSuccess;
    ReadNodes(&nodes, &views, read);
  }
}

int Run(const BinaryMain& binary) {
  const absl::StatusOr<Config> config = ConfigFromFlags();
  if (!config.ok()) return binary.BadFlag(config.status());
  const client::ConnectionOptions& first = config->nodes[0].connection;
  absl::StatusOr<std::unique_ptr<verbs::Provider>> provider = verbs::CreateProvider(first.provider);
  if (!provider.ok()) return binary.Failure(provider.status());
  for (const NodeConfig& node : config->nodes) {
    if (node.connection.session.qp.link.enabled() && (*provider)->name() != "soft") {
      return binary.Exit(
          kExitBadFlag,
          absl::StrCat(FLAGS_links.empty() ? "--link=" + FLAGS_link : "--links=" + FLAGS_links,
                       " needs the soft provider, not ", (*provider)->name()));
    }
  }
  if (FLAGS_once) return RunOnce(binary, provider->get(), *config);
  StopSignals signals;
  return RunLive(binary, provider->get(), *config, &signals);
}

}  // namespace
}  // namespace dreplay::tools

int main(int argc, char** argv) {
  dreplay::BinaryMain binary(
      {"replay_top", dreplay::tools::kUsage, "replay_top", /*warnings_only=*/true});
  if (std::optional<int> done = binary.Init(argc, argv)) return *done;
  return dreplay::tools::Run(binary);
}
