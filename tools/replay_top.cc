// Copyright dreplay authors.
//
// replay_top: a live view of a replay server, read with one-sided RDMA READs
// only (no server CPU): it connects as a monitor and READs the stats region
// and the actors region.
//
//   replay_top --server=10.0.0.2:7471 --auth_token_file=/etc/dreplay/token
//   replay_top --server=127.0.0.1:7471 --once            # one screen, then exit
//   replay_top --server=127.0.0.1:7471 --once --json     # one JSON object
//   replay_top --server=127.0.0.1:7471 --json            # a JSON line per interval
//
// Shows memory size / capacity, inserts/s, samples/s, batches/s and
// updates/s (from two snapshots, by the server's clock), the priority mean
// (sum / size, of p^alpha) and maximum, drops by cause (torn, abandoned,
// overrun, copy rejects, stale / invalid priority updates, mailbox rejects,
// update timeouts, slots dropped on restore), clients connected by role,
// the epoch, and per actor its env steps (and rate), episodes, mean and last
// return, committed transitions and the age of its line. See
// tools/replay_monitor.h for the definitions.
//
// The live view redraws in place (ANSI clear) every --interval_s until
// Ctrl-C; if the server goes away it says so and keeps trying. With --once
// it takes two snapshots --interval_s apart (rates over that window; 0: one
// snapshot, no rates) and exits.
//
// Exit status: 0 success; 1 when the server cannot be reached, refuses the
// connection (a wrong token: "authentication failed") or cannot be read;
// 2 for a bad flag. The reason is printed on stderr.

#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/flag_values.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "client/stats_reader.h"
#include "client/session.h"
#include "protocol/host_port.h"
#include "protocol/handshake.h"
#include "protocol/layout.h"
#include "tools/replay_monitor.h"
#include "verbs/verbs.h"

DEFINE_string(server, "", "HOST:PORT of the replay server (required)");
DEFINE_string(provider, "auto", "RDMA provider: auto (ibverbs when a device exists), ibverbs, soft");
DEFINE_string(ib_device, "", "ibverbs: device (empty: the first with an active port)");
DEFINE_int32(ib_port, 1, "ibverbs: port number");
DEFINE_int32(gid_index, -1, "ibverbs: GID index (-1: automatic, RoCE v2 preferred)");
DEFINE_string(link, "none",
              "soft provider: emulated link to the server (none, 10km-25g, ... or DELAY_US:GBPS)");
DEFINE_string(auth_token, "", "the server's token (prefer --auth_token_file)");
DEFINE_string(auth_token_file, "", "file holding the server's token (one line)");
DEFINE_double(interval_s, 1,
              "refresh interval; with --once, the window over which rates are measured "
              "(0: a single snapshot, no rates)");
DEFINE_bool(once, false, "print one view and exit");
DEFINE_bool(json, false, "print JSON (one object per view) instead of text");
DEFINE_double(connect_timeout_s, 5, "give up connecting after this long");
DECLARE_bool(help);
DECLARE_string(helpmatch);

// gflags ends the process through this hook on a flag it cannot parse and
// after --help; it is exported by libgflags but not declared in its headers.
namespace google {
extern void (*gflags_exitfunc)(int);
}  // namespace google

namespace dreplay::tools {
namespace {

using client::ClientSession;
using client::ClientSessionOptions;

constexpr int kExitFailure = 1;
constexpr int kExitBadFlag = 2;
// ANSI: cursor home, clear screen.
constexpr char kClearScreen[] = "\x1b[H\x1b[2J";
// The live view checks for Ctrl-C this often while it waits.
constexpr absl::Duration kStopPoll = absl::Milliseconds(50);
constexpr double kMaxSeconds = 1e6;

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

[[noreturn]] void ExitBadFlag(int) { std::exit(kExitBadFlag); }
[[noreturn]] void ExitAfterHelp(int) { std::exit(0); }


struct Config {
  verbs::ProviderOptions provider;
  ClientSessionOptions session;
  absl::Duration interval;
};

absl::StatusOr<std::string> ReadToken() {
  ASSIGN_OR_RETURN(std::string token, ReadAuthToken(FLAGS_auth_token, FLAGS_auth_token_file));
  if (!FLAGS_auth_token_file.empty() && token.empty()) {
    return FlagError("auth_token_file", FLAGS_auth_token_file, "holds no token");
  }
  return token;
}

absl::StatusOr<Config> ConfigFromFlags() {
  Config c;
  if (FLAGS_server.empty()) return FlagError("server", "", "is required (HOST:PORT)");
  {
    const absl::Status s = protocol::ParseHostPort(FLAGS_server, &c.session.host, &c.session.port);
    if (!s.ok()) return FlagError("server", FLAGS_server, s.message());
  }
  absl::StatusOr<verbs::ProviderKind> kind = verbs::ParseProviderKind(FLAGS_provider);
  if (!kind.ok()) return FlagError("provider", FLAGS_provider, kind.status().message());
  c.provider.kind = *kind;
  c.provider.ib_device = FLAGS_ib_device;
  c.provider.ib_port = FLAGS_ib_port;
  c.provider.gid_index = FLAGS_gid_index;
  {
    const absl::Status s = c.provider.Validate();
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("bad ibverbs flag: ", s.message()));
  }
  absl::StatusOr<verbs::LinkModel> link = verbs::ParseLinkModel(FLAGS_link);
  if (!link.ok()) return FlagError("link", FLAGS_link, link.status().message());
  c.session.qp.link = *link;
  if (!(FLAGS_interval_s >= 0) || FLAGS_interval_s > kMaxSeconds ||
      (!FLAGS_once && FLAGS_interval_s == 0)) {
    return FlagError("interval_s", std::to_string(FLAGS_interval_s),
                     FLAGS_once ? "must be >= 0" : "must be > 0");
  }
  c.interval = absl::Seconds(FLAGS_interval_s);
  if (!(FLAGS_connect_timeout_s > 0) || FLAGS_connect_timeout_s > kMaxSeconds) {
    return FlagError("connect_timeout_s", std::to_string(FLAGS_connect_timeout_s), "must be > 0");
  }
  c.session.role = protocol::Role::kMonitor;
  ASSIGN_OR_RETURN(c.session.auth_token, ReadToken());
  c.session.connect_deadline = absl::Seconds(FLAGS_connect_timeout_s);
  c.session.op_timeout = absl::Seconds(FLAGS_connect_timeout_s);
  RETURN_IF_ERROR(c.session.Validate());
  return c;
}

// A monitor's connection and its reader.
struct Monitor {
  std::unique_ptr<ClientSession> session;
  std::unique_ptr<client::StatsReader> reader;
};

// Connects; the message says what went wrong in the user's terms.
absl::StatusOr<Monitor> Connect(verbs::Provider* provider, const Config& config) {
  Monitor m;
  absl::StatusOr<std::unique_ptr<ClientSession>> session =
      ClientSession::Connect(provider, config.session);
  if (!session.ok()) {
    const absl::Status& s = session.status();
    std::string why;
    if (absl::IsPermissionDenied(s)) {
      why = "the server refused the connection";
    } else if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      why = absl::StrCat("cannot reach the server within ",
                         absl::FormatDuration(config.session.connect_deadline));
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
  snap.taken = absl::Now();
  return snap;
}

std::string Render(const MonitorInfo& info, const MonitorSnapshot& now,
                   const MonitorSnapshot* before) {
  return FLAGS_json ? RenderMonitorJson(info, now, before) + "\n"
                    : RenderMonitorText(info, now, before);
}

int RunOnce(verbs::Provider* provider, const Config& config) {
  absl::StatusOr<Monitor> m = Connect(provider, config);
  if (!m.ok()) {
    std::cerr << "replay_top: " << m.status().message() << "\n";
    return kExitFailure;
  }
  const MonitorInfo info{FLAGS_server, m->session->config()};
  absl::StatusOr<MonitorSnapshot> first = Snapshot(&*m);
  absl::StatusOr<MonitorSnapshot> second = first;
  if (first.ok() && config.interval > absl::ZeroDuration()) {
    absl::SleepFor(config.interval);  // the window the rates are measured over
    second = Snapshot(&*m);
  }
  if (!second.ok()) {
    std::cerr << "replay_top: reading " << FLAGS_server << ": " << second.status() << "\n";
    return kExitFailure;
  }
  const bool rates = config.interval > absl::ZeroDuration();
  std::cout << Render(info, *second, rates ? &*first : nullptr) << std::flush;
  return 0;
}

// Waits up to `d`, returning early on Ctrl-C.
void WaitUnlessStopped(absl::Duration d) {
  const absl::Time until = absl::Now() + d;
  while (!g_stop && absl::Now() < until) {
    absl::SleepFor(std::min(kStopPoll, until - absl::Now()));
  }
}

int RunLive(verbs::Provider* provider, const Config& config) {
  // The first connection must work: a typo in --server or the token should
  // end the tool, not leave it waiting.
  absl::StatusOr<Monitor> m = Connect(provider, config);
  if (!m.ok()) {
    std::cerr << "replay_top: " << m.status().message() << "\n";
    return kExitFailure;
  }
  const MonitorInfo info{FLAGS_server, m->session->config()};
  std::optional<MonitorSnapshot> previous;
  while (!g_stop) {
    absl::Status error;
    if (m.ok()) {
      absl::StatusOr<MonitorSnapshot> now = Snapshot(&*m);
      if (now.ok()) {
        const std::string view = Render(info, *now, previous ? &*previous : nullptr);
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
        std::cout << kClearScreen << "replay_top  " << FLAGS_server << "\n\nerror: "
                  << error.message() << "\n(retrying every "
                  << absl::FormatDuration(config.interval) << ", Ctrl-C quits)\n"
                  << std::flush;
      }
    }
    WaitUnlessStopped(config.interval);
  }
  return 0;
}

int Run() {
  absl::StatusOr<Config> config = ConfigFromFlags();
  if (!config.ok()) {
    std::cerr << "replay_top: " << config.status().message() << "\n";
    return kExitBadFlag;
  }
  absl::StatusOr<std::unique_ptr<verbs::Provider>> provider =
      verbs::CreateProvider(config->provider);
  if (!provider.ok()) {
    std::cerr << "replay_top: " << provider.status() << "\n";
    return kExitFailure;
  }
  if (config->session.qp.link.enabled() && (*provider)->name() != "soft") {
    std::cerr << "replay_top: --link=" << FLAGS_link << " needs the soft provider, not "
              << (*provider)->name() << "\n";
    return kExitBadFlag;
  }
  if (FLAGS_once) return RunOnce(provider->get(), *config);
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  return RunLive(provider->get(), *config);
}

}  // namespace
}  // namespace dreplay::tools

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "a live view of a replay server, read with RDMA READs only (role monitor).\n"
      "Usage: replay_top --server=HOST:PORT [--auth_token_file=F] [--interval_s=1] "
      "[--once] [--json]\n"
      "Exit status: 0 success, 1 server unreachable / refused / unreadable, 2 bad flag.");
  namespace t = dreplay::tools;
  google::gflags_exitfunc = &t::ExitBadFlag;
  gflags::ParseCommandLineNonHelpFlags(&argc, &argv, /*remove_flags=*/true);
  google::gflags_exitfunc = &t::ExitAfterHelp;
  if (FLAGS_help) {
    FLAGS_help = false;
    FLAGS_helpmatch = "replay_top";
  }
  gflags::HandleCommandLineHelpFlags();
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  // The view is the output; only warnings and errors go to the log.
  FLAGS_minloglevel = google::GLOG_WARNING;
  if (argc > 1) {
    std::cerr << "replay_top: unexpected argument \"" << argv[1] << "\"\n";
    return t::kExitBadFlag;
  }
  return t::Run();
}
