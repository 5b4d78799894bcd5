#!/usr/bin/env python3
"""Runs distributed DQN on this machine: a replay server (the buffer node),
N actors and one learner, over loopback with the soft RDMA provider (or a
real device with --provider), the learner's connection emulating a long-haul
link (--link).

  tools/launch/run_local.py --replay_placement buffer --link 10km-25g --actors 4 \\
      --stop_when_solved --duration_s 600 --metrics_out /tmp/m.jsonl

--replay_placement buffer: replay memory at the buffer node (the learner
READs the batches it pre-samples, keeping what it received: the learner
cache, --nolearner_cache to READ every entry); --replay_placement learner:
replay memory at the learner (the server forwards every transition);
--replay_placement hybrid: replay memory at the learner, fed what the
server forwards once each (by priority, or with --forward_policy uniform or
fifo, the forwarding controls). The
hyper-parameters that several processes must agree on (n-step, gamma,
network, batch size, replay capacity, alpha and beta, seed) are options of
this script; the launch plan (tools/launch/launch_plan.py, which every
launcher uses) turns them into each process's flags; --server_flag,
--actor_flag and --learner_flag pass anything else to one kind of process
(repeatable, e.g. --learner_flag=--lr=5e-4).

Edge sites: --buffer_nodes=K starts K replay servers (server-0.log, ...);
actor i writes to server i mod K (so --actors=3 --buffer_nodes=2 gives
sites of 2 and 1 actors), --site_speeds scales each site's actor rate, and
the learner trains on all of them (learner --servers, --shard_policy:
exact, first_ready or round_robin; docs/edge-sites.md).

The server listens on 127.0.0.1 with a port the OS chooses (read from its
--port_file). The learner starts first (its clock is the run's clock), then
the actors. The learner's progress lines are shown as they come; every
process logs to --out_dir (server.log, learner.log, actor-<i>.log). When the
learner ends (solved with --stop_when_solved, --duration_s or
--train_steps), or on an error, on Ctrl-C or SIGTERM, every process this
script started is stopped by pid: SIGTERM, then SIGKILL after a grace
period.

Exit status: 0 when the learner completed and no process failed, 1
otherwise, 130 after Ctrl-C.

The server is sized by the launch plan from the actor binary's own layout
(actor_client/actor_layout.h), so nothing here repeats the binaries'
constants.

Binaries come from Bazel's output (bazel-out/k8-opt/bin, else bazel-bin; or
--bin_dir or $DREPLAY_BIN_DIR); --build runs `bazel build` first.
Only the Python standard library is used.
"""

import argparse
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_plan  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ("//replay_server:replay_server", "//actor_client:actor", "//learner_client:learner")
BINARIES = {
    "server": os.path.join("replay_server", "replay_server"),
    "actor": os.path.join("actor_client", "actor"),
    "learner": os.path.join("learner_client", "learner"),
}
# Sizes, defaults and the components' flags: the launch plan.
ENVIRONMENTS = launch_plan.ENVIRONMENTS
LAYOUT_KEYS = launch_plan.LAYOUT_KEYS
PARAM_BYTES_MULTIPLE = launch_plan.PARAM_BYTES_MULTIPLE
STOP_GRACE_S = 5.0              # SIGTERM -> SIGKILL
SERVER_START_TIMEOUT_S = 30.0
POLL_S = 0.2
# How long past --duration_s the learner may take (startup, final
# evaluation) before the run is declared hung.
LEARNER_SLACK_S = 120.0


class RunError(Exception):
    pass


def log(msg):
    print("run_local: " + msg, file=sys.stderr, flush=True)


def actor_layout(args):
    """What the run's actors need of the server (launch_plan.actor_layout)."""
    binary(args, "actor")  # a clear error when it is not built
    try:
        return launch_plan.actor_layout(args.bin_dir, args)
    except launch_plan.PlanError as e:
        raise RunError(str(e))


def log_tail(path, lines):
    """The last `lines` lines of a log, indented, for an error message ("" if
    it cannot be read)."""
    try:
        with open(path, "rb") as f:
            data = f.read().decode(errors="replace").splitlines()
        return "\n".join("    " + l for l in data[-lines:])
    except OSError:
        return ""


class Process:
    """A child process with its log file."""

    def __init__(self, name, argv, log_path, stdout_lines=None, cpus=None):
        self.name = name
        if cpus:
            # taskset execs the binary: the pid is the binary's, and every
            # thread it starts inherits the affinity.
            argv = ["taskset", "--cpu-list", cpus] + argv
        self.argv = argv
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.log.write((" ".join(argv) + "\n").encode())
        self.log.flush()
        self.reader = None
        if stdout_lines is None:
            self.popen = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        else:
            # Both streams through a pipe: every line goes to the log, and
            # stdout_lines(line) decides what to show.
            self.popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
            self.reader = threading.Thread(target=self._pump, args=(stdout_lines,), daemon=True)
            self.reader.start()

    def _pump(self, show):
        for raw in iter(self.popen.stdout.readline, b""):
            self.log.write(raw)
            self.log.flush()
            show(raw.decode(errors="replace").rstrip("\n"))

    @property
    def pid(self):
        return self.popen.pid

    def poll(self):
        return self.popen.poll()

    def signal(self, sig):
        if self.popen.poll() is None:
            try:
                os.kill(self.popen.pid, sig)
            except ProcessLookupError:
                pass

    def tail(self, lines=15):
        return log_tail(self.log_path, lines)

    def close(self):
        if self.reader is not None:
            self.reader.join(timeout=2.0)
        self.log.close()


def stop_all(groups, grace_s=STOP_GRACE_S):
    """Stops the processes group after group (actors, then the learner, then
    the server, so that each can finish talking to the next): SIGTERM to
    every live process of a group, then SIGKILL to those still alive after
    grace_s. Returns {name: exit code}."""
    codes = {}
    for group in groups:
        for p in group:
            if p.poll() is None:
                p.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in group:
            try:
                p.popen.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                log("%s (pid %d) did not stop within %.0f s: SIGKILL" % (p.name, p.pid, grace_s))
                p.signal(signal.SIGKILL)
                p.popen.wait()
            codes[p.name] = p.popen.returncode
            p.close()
    return codes


def wait_for_port(process, port_file, timeout_s, what="the replay server"):
    """The port `process` (`what`, for errors) writes to `port_file`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RunError("%s exited (code %d) before listening:\n%s" %
                           (what, process.poll(), process.tail()))
        try:
            with open(port_file) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise RunError("%s did not listen within %.0f s" % (what, timeout_s))


def build(args):
    cmd = ["bazel", "build", "--jobs=2"] + list(TARGETS)
    log("building: " + " ".join(cmd))
    if subprocess.call(cmd, cwd=ROOT) != 0:
        raise RunError("bazel build failed")


def binary(args, name):
    path = os.path.join(args.bin_dir, BINARIES[name])
    if not os.access(path, os.X_OK):
        raise RunError("%s not found: build it (bazel build %s, or pass --build) or give "
                       "--bin_dir" % (path, " ".join(TARGETS)))
    return path


ACTOR_CREDENTIAL_LABEL = b"dreplay actor credential v1"


def write_secret(path, text):
    """Writes `text` to a new file only its owner may read (mode 0600)."""
    if os.path.exists(path):
        os.remove(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    return path


def actor_credential(master, actor_id):
    """The credential actor `actor_id` proves to a server whose actor token
    is `master`: protocol::ActorCredential (protocol/auth.h)."""
    message = ACTOR_CREDENTIAL_LABEL + struct.pack("<I", actor_id)
    return hmac.new(master.encode(), message, hashlib.sha256).hexdigest()


def make_credentials(out_dir, actors):
    """A fresh token for this run, in files of mode 0600: the server's and
    the learner's, and each actor's own credential (so that no actor can
    claim another's id). Returns (token file, [actor credential files])."""
    master = secrets.token_hex(32)
    token_file = write_secret(os.path.join(out_dir, "token"), master)
    actor_files = [write_secret(os.path.join(out_dir, "actor-%d.credential" % i),
                                actor_credential(master, i)) for i in range(actors)]
    return token_file, actor_files


def token_argv(token_file):
    """--auth_token_file, or --insecure without a token."""
    return ["--auth_token_file=" + token_file] if token_file else ["--insecure"]


def metrics_argv(args, name):
    """--metrics_listen: `name` (server, learner) serves /metrics on a port
    the OS picks and writes it to OUT_DIR/<name>.metrics_port."""
    if not args.metrics_listen:
        return []
    return ["--metrics_listen=%s:0" % args.metrics_listen,
            "--metrics_port_file=" + metrics_port_file(args, name)]


def metrics_port_file(args, name):
    return os.path.join(os.path.abspath(args.out_dir), name + ".metrics_port")


def server_argv(args, port_file, layout, token_file=None, name="server"):
    return ([binary(args, "server"), "--listen=127.0.0.1:0", "--port_file=" + port_file] +
            launch_plan.server_flags(args, layout) + token_argv(token_file) +
            metrics_argv(args, name) + args.server_flag)


def learner_argv(args, addresses, token_file=None):
    argv = [binary(args, "learner")] + token_argv(token_file)
    if len(addresses) == 1:
        argv.append("--server=" + addresses[0])
    else:
        argv += ["--servers=" + ",".join(addresses), "--shard_policy=" + args.shard_policy]
    argv += launch_plan.learner_flags(args) + metrics_argv(args, "learner")
    if args.metrics_out:
        argv.append("--metrics_out=" + os.path.abspath(args.metrics_out))
    return argv + args.learner_flag


def actor_argv(args, address, index, credential_file=None):
    argv = ([binary(args, "actor")] + token_argv(credential_file) + ["--server=" + address] +
            launch_plan.actor_flags(args, index))
    if args.site_speeds:
        # The later flag wins: this site's share of --actor_rate.
        argv.append("--max_steps_per_s=%r" %
                    (args.actor_rate * args.site_speeds[index % args.buffer_nodes]))
    return argv + args.actor_flag


def server_name(args, k):
    """The name of buffer node k's server: its log, port and metrics files."""
    return "server" if args.buffer_nodes == 1 else "server-%d" % k


def show_metrics_urls(args, servers, learner):
    """Waits for the servers' and the learner's metrics ports, prints their
    URLs and writes them to OUT_DIR/metrics_urls, one per line."""
    host = args.metrics_listen if ":" not in args.metrics_listen else "[%s]" % args.metrics_listen
    urls = []
    for name, process in [(s.name, s) for s in servers] + [("learner", learner)]:
        port = wait_for_port(process, metrics_port_file(args, name), SERVER_START_TIMEOUT_S,
                             "the %s's metrics endpoint" % name)
        urls.append("http://%s:%d/metrics" % (host, port))
        log("%s metrics: %s" % (name, urls[-1]))
    with open(os.path.join(args.out_dir, "metrics_urls"), "w") as f:
        f.write("".join(u + "\n" for u in urls))


def run(args):
    out_dir = args.out_dir
    os.makedirs(out_dir, exist_ok=True)
    servers = []
    learner = None
    actors = []
    failed = []
    codes = {}

    def show(line):
        if line.startswith(("progress:", "summary:", "learner:")):
            print(line, flush=True)

    try:
        layout = actor_layout(args)
        names = [server_name(args, k) for k in range(args.buffer_nodes)]
        port_files = [os.path.join(out_dir, n + ".port") for n in names]
        for stale in port_files + [metrics_port_file(args, n) for n in names + ["learner"]]:
            if os.path.exists(stale):
                os.remove(stale)
        token_file, credential_files = make_credentials(out_dir, args.actors)
        addresses = []
        for name, port_file in zip(names, port_files):
            server = Process(name, server_argv(args, port_file, layout, token_file, name),
                             os.path.join(out_dir, name + ".log"), cpus=args.rest_cpus)
            servers.append(server)
            port = wait_for_port(server, port_file, SERVER_START_TIMEOUT_S)
            addresses.append("127.0.0.1:%d" % port)
            log("replay server %s(pid %d) listening on %s; logs in %s" % (
                "" if args.buffer_nodes == 1 else name + " ", server.pid, addresses[-1], out_dir))
        learner = Process("learner", learner_argv(args, addresses, token_file),
                          os.path.join(out_dir, "learner.log"), stdout_lines=show,
                          cpus=args.learner_cpus)
        log("learner (pid %d): %s placement over link %s%s" % (
            learner.pid, args.replay_placement, args.link,
            "" if args.buffer_nodes == 1 else
            ", %d buffer nodes, %s sampling" % (args.buffer_nodes, args.shard_policy)))
        if args.metrics_listen:
            show_metrics_urls(args, servers, learner)
        for i in range(args.actors):
            # Actor i writes to buffer node i mod K: the sites' actors.
            actors.append(Process("actor-%d" % i,
                                  actor_argv(args, addresses[i % len(addresses)], i,
                                             credential_files[i]),
                                  os.path.join(out_dir, "actor-%d.log" % i),
                                  cpus=args.rest_cpus))
        log("%d actors (pids %s), %d env(s) each, at most %s steps/s each" % (
            args.actors, " ".join(str(a.pid) for a in actors), args.envs_per_actor,
            args.actor_rate if args.actor_rate > 0 else "unlimited"))

        deadline = None
        if args.duration_s > 0:
            deadline = time.monotonic() + args.duration_s + LEARNER_SLACK_S
        while learner.poll() is None:
            for p in actors + servers:
                code = p.poll()
                if code is not None:
                    raise RunError("%s (pid %d) exited with code %d while the learner ran:\n%s" %
                                   (p.name, p.pid, code, p.tail()))
            if deadline is not None and time.monotonic() > deadline:
                raise RunError("the learner did not finish within --duration_s + %.0f s" %
                               LEARNER_SLACK_S)
            time.sleep(POLL_S)
        if learner.poll() != 0:
            failed.append("learner exited with code %d:\n%s" % (learner.poll(), learner.tail()))
    except RunError as e:
        failed.append(str(e))
    finally:
        codes = stop_all([actors] + ([[learner]] if learner is not None else []) + [servers])
    for name, code in codes.items():
        # SIGTERM is how this script stops them; a clean stop exits 0.
        if name != "learner" and code not in (0, -signal.SIGTERM) and not failed:
            failed.append("%s exited with code %s (see %s)" % (
                name, code, os.path.join(out_dir, name + ".log")))
    for f in failed:
        log("error: " + f)
    return 1 if failed else 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    launch_plan.add_arguments(p)
    p.add_argument("--mode", help=argparse.SUPPRESS)  # the former name, refused below
    p.add_argument("--metrics_out", default="", help="learner metrics, JSON lines")
    p.add_argument("--metrics_listen", default="", metavar="ADDRESS",
                   help="the server and the learner serve Prometheus metrics on this IP address "
                   "(e.g. 127.0.0.1), each at a port the OS picks; their URLs are printed and "
                   "written to OUT_DIR/metrics_urls")
    p.add_argument("--buffer_nodes", type=int, default=1, metavar="K",
                   help="edge sites: K replay servers, actor i writing to server i mod K, and "
                   "one learner over all of them (buffer placement; default 1)")
    p.add_argument("--shard_policy", choices=("exact", "first_ready", "round_robin"),
                   default="exact",
                   help="with --buffer_nodes > 1, how the learner makes its batches: exact "
                   "(prioritized over all nodes), first_ready or round_robin (default exact)")
    p.add_argument("--site_speeds", default="", metavar="F,F,...",
                   help="with --buffer_nodes, each site's actor speed as a factor of "
                   "--actor_rate, e.g. 1,0.5: site 1's actors step half as fast (default: all 1)")
    p.add_argument("--out_dir", default="", help="logs (default: a new directory in /tmp)")
    p.add_argument("--build", action="store_true", help="bazel build the binaries first")
    p.add_argument("--bin_dir", default=os.environ.get("DREPLAY_BIN_DIR", ""),
                   help="where the built binaries are (default: bazel-out/k8-opt/bin, the "
                   "output of a plain `bazel build`, else bazel-bin)")
    p.add_argument("--pin_cpus", default="",
                   help="LEARNER:REST, e.g. 0:1: the learner runs on the CPUs of the first "
                   "list, the server and the actors on those of the second (taskset "
                   "--cpu-list syntax), so that the learner's CPU is the same in every run "
                   "(default: no pinning)")
    # Pass-through.
    p.add_argument("--server_flag", action="append", default=[], metavar="FLAG",
                   help="extra flag for the replay server (repeatable)")
    p.add_argument("--actor_flag", action="append", default=[], metavar="FLAG",
                   help="extra flag for every actor (repeatable)")
    p.add_argument("--learner_flag", action="append", default=[], metavar="FLAG",
                   help="extra flag for the learner (repeatable)")
    args = p.parse_args(argv)
    if args.mode is not None:
        p.error("--mode is now --replay_placement, as the learner names it")
    try:
        launch_plan.finish(args)
    except launch_plan.PlanError as e:
        p.error(str(e))
    if args.buffer_nodes < 1:
        p.error("--buffer_nodes must be >= 1, got %d" % args.buffer_nodes)
    if args.buffer_nodes > 1 and args.replay_placement != "buffer":
        p.error("--buffer_nodes > 1 needs --replay_placement=buffer")
    if args.buffer_nodes > args.actors:
        p.error("--buffer_nodes=%d needs at least as many --actors (one per site), got %d"
                % (args.buffer_nodes, args.actors))
    if args.site_speeds:
        try:
            args.site_speeds = [float(x) for x in args.site_speeds.split(",")]
        except ValueError:
            p.error("--site_speeds must be numbers separated by commas, got %r"
                    % args.site_speeds)
        if len(args.site_speeds) != args.buffer_nodes or not all(
                0 < x < float("inf") for x in args.site_speeds):
            p.error("--site_speeds needs one positive factor per buffer node (%d), got %r"
                    % (args.buffer_nodes, args.site_speeds))
        if args.actor_rate <= 0:
            p.error("--site_speeds needs an --actor_rate to scale")
    if args.metrics_listen:
        try:
            ipaddress.ip_address(args.metrics_listen)
        except ValueError:
            p.error("--metrics_listen must be an IP address such as 127.0.0.1, got %r"
                    % args.metrics_listen)
    args.learner_cpus = args.rest_cpus = None
    if args.pin_cpus:
        parts = args.pin_cpus.split(":")
        if len(parts) != 2 or not all(re.fullmatch(r"[0-9]+([-,][0-9]+)*", x) for x in parts):
            p.error("--pin_cpus must be LEARNER_CPUS:REST_CPUS, e.g. 0:1 or 0:1-3")
        args.learner_cpus, args.rest_cpus = parts
    if not args.bin_dir:
        # bazel-bin follows the last build's configuration (a sanitizer build
        # moves it); the optimised default has its own directory.
        opt = os.path.join(ROOT, "bazel-out", "k8-opt", "bin")
        args.bin_dir = opt if os.path.isdir(opt) else os.path.join(ROOT, "bazel-bin")
    if not args.out_dir:
        args.out_dir = tempfile.mkdtemp(prefix="dreplay-run-")
    return args


class Interrupted(Exception):
    pass


def main(argv):
    args = parse_args(argv)

    def on_signal(signum, frame):
        # Later signals are ignored: the processes are being stopped.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        if args.build:
            build(args)
        return run(args)
    except Interrupted as e:
        # run() stopped its processes in its finally clause.
        log("interrupted (%s)" % e)
        return 130
    except RunError as e:
        log("error: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
