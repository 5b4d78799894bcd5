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
//
// What it shows (rates, priorities, drops by cause, the replay ratio against
// the published policy, transfer-once figures, clients, per-actor lines) is
// defined in tools/replay_monitor.h. The live view redraws every
// --interval_s until Ctrl-C and keeps trying when the server goes away; with
// --once it takes two snapshots --interval_s apart and exits. Exit status: 0
// success; 1 when the server cannot be reached, refuses or cannot be read; 2
// for a bad flag.

#include <cstddef>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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

DEFINE_string(server, "", "HOST:PORT of the replay server (required)");
DEFINE_string(link, "none",
              "soft provider: emulated link to the server (none, 10km-25g, ... or DELAY_US:GBPS)");
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
    "a live view of a replay server, read with RDMA READs only (role monitor).\n"
    "Usage: replay_top --server=HOST:PORT [--auth_token_file=F] [--interval_s=1] "
    "[--once] [--json]\n"
    "Exit status: 0 success, 1 server unreachable / refused / unreadable, 2 bad flag.";

using client::ClientSession;

// ANSI: cursor home, clear screen.
constexpr char kClearScreen[] = "\x1b[H\x1b[2J";
constexpr double kMaxSeconds = 1e6;

struct Config {
  client::ConnectionOptions connection;
  absl::Duration interval;
};

absl::StatusOr<Config> ConfigFromFlags() {
  client::ConnectionFlags flags;
  flags.server = FLAGS_server;
  flags.provider = verbs::ProviderFlagsFromCommandLine();
  flags.link = FLAGS_link;
  flags.auth_token = FLAGS_auth_token;
  flags.auth_token_file = FLAGS_auth_token_file;
  flags.insecure = FLAGS_insecure;
  flags.empty_token_file = EmptyTokenFile::kRefused;
  Config c;
  ASSIGN_OR_RETURN(c.connection,
                   client::ConnectionOptionsFromFlags(flags, protocol::Role::kMonitor));
  if (!(FLAGS_interval_s >= 0) || FLAGS_interval_s > kMaxSeconds ||
      (!FLAGS_once && FLAGS_interval_s == 0)) {
    return FlagError("interval_s", std::to_string(FLAGS_interval_s),
                     FLAGS_once ? "must be >= 0" : "must be > 0");
  }
  c.interval = absl::Seconds(FLAGS_interval_s);
  if (!(FLAGS_connect_timeout_s > 0) || FLAGS_connect_timeout_s > kMaxSeconds) {
    return FlagError("connect_timeout_s", std::to_string(FLAGS_connect_timeout_s), "must be > 0");
  }
  c.connection.session.connect_deadline = absl::Seconds(FLAGS_connect_timeout_s);
  c.connection.session.op_timeout = absl::Seconds(FLAGS_connect_timeout_s);
  return c;
}

// A monitor's connection and its reader.
struct Monitor {
  std::unique_ptr<ClientSession> session;
  std::unique_ptr<client::StatsReader> reader;
  std::unique_ptr<client::RegisteredBuffer> lease_lines;  // READ target
};

// Connects; the message says what went wrong in the user's terms.
absl::StatusOr<Monitor> Connect(verbs::Provider* provider, const Config& config) {
  Monitor m;
  absl::StatusOr<std::unique_ptr<ClientSession>> session =
      ClientSession::Connect(provider, config.connection.session);
  if (!session.ok()) {
    const absl::Status& s = session.status();
    std::string why;
    if (absl::IsPermissionDenied(s)) {
      why = "the server refused the connection";
    } else if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      why = absl::StrCat("cannot reach the server within ",
                         absl::FormatDuration(config.connection.session.connect_deadline));
    } else {
      why = "cannot connect";
    }
    return absl::Status(s.code(), absl::StrCat(FLAGS_server, ": ", why, ": ", s.message()));
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
absl::StatusOr<MonitorInfo> InfoOf(Monitor* m) {
  MonitorInfo info{FLAGS_server, m->session->config()};
  ASSIGN_OR_RETURN(
      std::unique_ptr<client::RegisteredBuffer> buffer,
      client::RegisteredBuffer::Create(m->session->provider(), sizeof(protocol::PolicyLine)));
  RETURN_IF_ERROR(m->session->ReadSync(protocol::RegionKind::kControl,
                                       offsetof(protocol::ControlBlock, policy),
                                       sizeof(protocol::PolicyLine), buffer->mr(), buffer->data()));
  std::memcpy(&info.policy, buffer->data(), sizeof(info.policy));
  return info;
}

std::string Render(const MonitorInfo& info, const MonitorSnapshot& now,
                   const MonitorSnapshot* before) {
  return FLAGS_json ? RenderMonitorJson(info, now, before) + "\n"
                    : RenderMonitorText(info, now, before);
}

int RunOnce(const BinaryMain& binary, verbs::Provider* provider, const Config& config) {
  absl::StatusOr<Monitor> m = Connect(provider, config);
  if (!m.ok()) return binary.Exit(kExitFailure, m.status().message());
  const absl::StatusOr<MonitorInfo> info = InfoOf(&*m);
  if (!info.ok()) return binary.Failure("reading " + FLAGS_server, info.status());
  absl::StatusOr<MonitorSnapshot> first = Snapshot(&*m);
  absl::StatusOr<MonitorSnapshot> second = first;
  if (first.ok() && config.interval > absl::ZeroDuration()) {
    absl::SleepFor(config.interval);  // the window the rates are measured over
    second = Snapshot(&*m);
  }
  if (!second.ok()) return binary.Failure("reading " + FLAGS_server, second.status());
  const bool rates = config.interval > absl::ZeroDuration();
  std::cout << Render(*info, *second, rates ? &*first : nullptr) << std::flush;
  return 0;
}

int RunLive(const BinaryMain& binary, verbs::Provider* provider, const Config& config,
            StopSignals* signals) {
  // The first connection must work: a typo in --server or the token should
  // end the tool, not leave it waiting.
  absl::StatusOr<Monitor> m = Connect(provider, config);
  if (!m.ok()) return binary.Exit(kExitFailure, m.status().message());
  const absl::StatusOr<MonitorInfo> info = InfoOf(&*m);
  if (!info.ok()) return binary.Failure("reading " + FLAGS_server, info.status());
  std::optional<MonitorSnapshot> previous;
  while (!signals->requested()) {
    absl::Status error;
    if (m.ok()) {
      absl::StatusOr<MonitorSnapshot> now = Snapshot(&*m);
      if (now.ok()) {
        const std::string view = Render(*info, *now, previous ? &*previous : nullptr);
        std::cout << (FLAGS_json ? "" : kClearScreen) << view;
        if (!FLAGS_json) {
          std::cout << "\n(refresh every " << absl::FormatDuration(config.interval)
                    << ", Ctrl-C quits)\n";
        }
        std::cout << std::flush;
        previous = std::move(*now);
      } else {
        error = now.status();
        m = error;  // connect again next time
      }
    } else {
      m = Connect(provider, config);
      error = m.status();
    }
    if (!error.ok()) {
      previous.reset();
      if (FLAGS_json) {
        std::cerr << "replay_top: " << error.message() << "\n";
      } else {
        std::cout << kClearScreen << "replay_top  " << FLAGS_server
                  << "\n\nerror: " << error.message() << "\n(retrying every "
                  << absl::FormatDuration(config.interval) << ", Ctrl-C quits)\n"
                  << std::flush;
      }
    }
    signals->WaitFor(config.interval);
  }
  return 0;
}

int Run(const BinaryMain& binary) {
  const absl::StatusOr<Config> config = ConfigFromFlags();
  if (!config.ok()) return binary.BadFlag(config.status());
  absl::StatusOr<std::unique_ptr<verbs::Provider>> provider =
      verbs::CreateProvider(config->connection.provider);
  if (!provider.ok()) return binary.Failure(provider.status());
  if (config->connection.session.qp.link.enabled() && (*provider)->name() != "soft") {
    return binary.Exit(
        kExitBadFlag,
        absl::StrCat("--link=", FLAGS_link, " needs the soft provider, not ", (*provider)->name()));
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
