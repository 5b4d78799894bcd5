#!/usr/bin/env python3
"""Chaos soak: runs the real replay_server, several actors and a learner on
this machine for --duration_s while it kills, pauses and restarts them and
injects link faults at random (all randomness from --seed), then checks
that nothing was lost, duplicated or corrupted.

  tools/chaos/chaos.py --duration_s 120 --seed 7 --json

What it does. The server runs with --checkpoint_dir (a periodic checkpoint
every --checkpoint_interval_s) and --verification_log; every client
reaches it through a loopback TCP proxy of its own (tools/chaos/chaos_proxy.py),
over the soft RDMA provider with --soft_transport=tcp (a proxy cannot see
or cut what the same-host transport moves through shared memory; with
--soft_transport=auto the data moves that way, and the proxies fault only
the connections).
--replay_placement=learner runs the learner placement instead (the learner
keeps the replay memory and enforces the replay ratio), and
--replay_placement=hybrid the hybrid one (the server forwards each
transition once, by priority, into the learner's own replay). --env MinAtar/...
--observation pixels84 --frame_stack 4 stores frames once (--link_codec
compresses them on the link). Every --event_interval_s on average (an
exponential gap) one event hits one process, chosen uniformly among the
server, the learner and the actors:

  sigkill   SIGKILL, then a restart after 0.2 to 2 s (the server restores
            its newest checkpoint, on a new port the proxies then forward to)
  sigterm   SIGTERM: the process must exit with status 0 (the server after
            its final checkpoint) within --grace_s; then a restart as above
  pause     SIGSTOP, SIGCONT 0.2 to 2 s later
  drop      the proxy cuts every connection of that client (of every client
            for the server): its queue pairs fail and it reconnects
  stall     the proxy forwards nothing on that link (every link for the
            server) for 0.2 to 2 s, then delivers what it held
  move      (with --sites) an actor is stopped (SIGTERM) and restarted at
            another site that is up, unless it is its site's last actor

Edge sites: --sites K runs K servers, each with its own proxy, checkpoints
and logs (OUT_DIR/site-<k>/), actor i starting at site i mod K, and one
learner over all of them through a servers file the run writes
(learner --servers_file, --shard_policy); --join_site_at_s T holds the
last site (its server and actors) back until T seconds in, then adds it to
the file, so that it joins while the learner trains. Each site is checked
on its own and the learner against all of them (chaos_check.py), and the
learner must have trained on rows of every site (its node: lines).

An event aimed at a process that is down or paused does nothing (the
schedule is the same for a seed whatever the timing). At the end the actors,
the learner and the server get SIGTERM, in that order, and must exit with
status 0.

Invariants (tools/chaos/chaos_check.py reads the verification logs):
  * the learner never accepted a torn or mismatched entry (torn_accepted 0),
    and accepted some: batch entries in the buffer placement, forwarded
    transitions in the learner and hybrid placements;
  * no transition is ingested twice;
  * every transition in the cut of a checkpoint that was later restored is
    present after the restore, unless the checkpoint's writer recorded its
    slot absent (overwritten by its actor during the write: eviction;
    unexpected_losses 0); what a killed server ingested after the restored
    cut is reported as lost_since_checkpoint, not an error;
  * every transition an actor saw committed (the actors' P records) was
    ingested, or was lost after the last cut with a server a later start
    replaced, beyond all that server ingested of the actor's lease
    (actor_commits_lost, reported); none unaccounted
    (actor_commits_unaccounted 0);
  * every process exits cleanly: none exits by itself, each SIGTERM ends
    its process with status 0 within --grace_s.

Output: progress lines on stderr every --progress_interval_s; at the end a
summary, or with --json exactly one JSON object on stdout: duration_s
(seconds from the start to the final stop: --duration_s, then the time
every process takes to be up again), kills (SIGKILL and SIGTERM events), server_restarts, learner_restarts,
actor_restarts, reconnects (the clients' "reconnecting" log lines),
same_host_mappings (with --soft_transport=auto, the clients' mappings of
the server's memory: 0 there is a failure),
transitions_committed (distinct transitions the server verified and
ingested), records_held (with frames: verified slots taken as frame
records that add no transition), torn_rejected (slots the server declared torn), and
lost_since_checkpoint, unexpected_losses, torn_accepted,
actor_commits_ingested, actor_commits_lost, actor_commits_unaccounted as
above. Exit
status 0 only when every invariant holds; otherwise 1, with one
"chaos: invariant broken: ..." line per broken invariant on stderr; 2 for
a bad command line or a run that could not start.

Logs and verification logs stay in --out_dir (server.log, learner.log,
actor-<i>.log, server.<n>.vlog and learner.<n>.vlog per start,
actor.<i>.<n>.vlog per start of actor i, events.log);
`tools/chaos/chaos_check.py OUT_DIR` checks them again. Binaries come from Bazel's
output (bazel-out/k8-opt/bin, else bazel-bin; or --bin_dir). Only the
Python standard library is used.
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launch"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos_check  # noqa: E402
import chaos_proxy  # noqa: E402
from chaos_process import Child  # noqa: E402
import launch_plan  # noqa: E402
import run_local  # noqa: E402

EVENTS = (("sigkill", 3), ("sigterm", 2), ("pause", 2), ("drop", 2), ("stall", 2))
# With --sites: an actor moves to another site (SIGTERM, then its restart
# writes to the other site's server).
SITE_EVENTS = EVENTS + (("move", 2),)
MIN_FAULT_S = 0.2
MAX_FAULT_S = 2.0
LOOP_S = 0.05
SERVER_START_TIMEOUT_S = 60.0


class ChaosError(Exception):
    """The run could not be set up (exit status 2)."""


def log(msg):
    print("chaos: " + msg, file=sys.stderr, flush=True)


class Chaos:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.failures = []
        self.counts = {"kills": 0, "server_restarts": 0, "learner_restarts": 0,
                       "actor_restarts": 0, "pauses": 0, "drops": 0, "stalls": 0,
                       "moves": 0, "no_ops": 0}
        self.proxies = []  # per site
        self.servers = []  # per site
        self.learner = None
        self.actors = []
        self.actor_site = [i % args.sites for i in range(args.actors)]
        self.sites_up = args.sites
        self.events_log = open(os.path.join(args.out_dir, "events.log"), "a")
        self.ingested_seen = {}  # vlog path -> (offset, I records)

    # -- processes ---------------------------------------------------------

    def plan(self, actor_start=0):
        """The run's launch plan (tools/launch/launch_plan.py) with the soak's
        choices; an actor's seed moves with its start, so that a restarted
        actor does not replay its episodes."""
        a = self.args
        return launch_plan.options(
            env=a.env, observation=a.observation, frame_stack=a.frame_stack,
            link_codec=a.link_codec, seed=a.seed + 1000 * actor_start, actors=a.actors,
            capacity=a.capacity,
            batch_size=a.batch_size, staging_depth=4, min_replay=2 * a.batch_size,
            replay_placement=a.replay_placement, link="none", provider="soft",
            learner_soft_transport=a.soft_transport, actor_rate=a.actor_rate, flush_batch=16,
            samples_per_insert=a.samples_per_insert,
            # Every entry trained on is then a slot the learner READ, which
            # its A record verifies against what a server start ingested.
            learner_cache=False,
            eval_interval_s=1e6, eval_episodes=1, probe_size=64, progress_interval_s=10.0)

    def site_dir(self, site):
        """Where a site's server and the actors writing to it keep their
        verification logs: OUT_DIR itself with one site, else OUT_DIR/site-K
        (tools/chaos/chaos_check.py checks each site on its own)."""
        if self.args.sites == 1:
            return self.args.out_dir
        return os.path.join(self.args.out_dir, "site-%d" % site)

    def server_argv(self, site, n):
        a = self.args
        checkpoints = a.checkpoint_dir if a.sites == 1 else os.path.join(
            a.checkpoint_dir, "site-%d" % site)
        return [run_local.binary(a, "server")] + launch_plan.server_flags(
            self.plan(), self.layout) + run_local.token_argv(self.token_file) + [
            "--listen=127.0.0.1:0",
            "--port_file=" + self.port_file(site, n),
            "--soft_transport=" + a.soft_transport,
            "--checkpoint_dir=" + checkpoints,
            "--checkpoint_interval_s=%r" % a.checkpoint_interval_s,
            "--heartbeat_interval_s=0.2",
            "--stats_interval_s=10",
            "--verification_log=" + os.path.join(self.site_dir(site), "server.%d.vlog" % n),
        ]

    def learner_argv(self, n):
        a = self.args
        if a.sites == 1:
            servers = ["--server=127.0.0.1:%d" % self.learner_ports[0]]
        else:
            servers = ["--servers_file=" + self.servers_file(), "--servers_file_interval_s=0.2",
                       "--shard_policy=" + a.shard_policy]
        return [run_local.binary(a, "learner")] + launch_plan.learner_flags(
            self.plan()) + run_local.token_argv(self.token_file) + self.vmodule_argv() + servers + [
            "--verification_log=" + os.path.join(a.out_dir, "learner.%d.vlog" % n),
        ]

    def actor_argv(self, index, n):
        a = self.args
        site = self.actor_site[index]
        return [run_local.binary(a, "actor")] + launch_plan.actor_flags(
            self.plan(actor_start=n), index) + run_local.token_argv(
            self.credential_files[index]) + self.vmodule_argv() + [
            "--server=127.0.0.1:%d" % self.actor_ports[site][index],
            "--soft_transport=" + a.soft_transport,
            "--verification_log=" + os.path.join(self.site_dir(site),
                                                 "actor.%d.%d.vlog" % (index, n)),
        ]

    def vmodule_argv(self):
        """With the same-host transport, the clients log each mapping of
        the server's memory (verbs/soft/shared_path.cc), which the run
        counts to show that the data moved through shared memory."""
        return ["--vmodule=shared_path=1"] if self.args.soft_transport == "auto" else []

    def same_host_mappings(self):
        return self.count_in_client_logs(b"same-host mapping for key")

    def servers_file(self):
        return os.path.join(self.args.out_dir, "servers.txt")

    def write_servers_file(self):
        """Lists the sites that are up for the learner (its proxy links);
        a site that joins is added while the learner trains."""
        path = self.servers_file()
        with open(path + ".new", "w") as f:
            for site in range(self.sites_up):
                f.write("127.0.0.1:%d\n" % self.learner_ports[site])
        os.rename(path + ".new", path)

    def join_site(self):
        """The last site comes up: its server, its line in the learner's
        servers file, its actors."""
        site = self.sites_up
        self.event("site %d joins" % site)
        self.start_server(site)
        self.sites_up += 1
        self.write_servers_file()
        for index, actor in enumerate(self.actors):
            if self.actor_site[index] == site and actor.starts == 0:
                actor.start()
                self.event("%s start 0 at site %d" % (actor.name, site))

    def port_file(self, site, n):
        return os.path.join(self.site_dir(site), "server.%d.port" % n)

    def start_server(self, site):
        server = self.servers[site]
        n = server.starts
        if os.path.exists(self.port_file(site, n)):
            os.remove(self.port_file(site, n))
        server.start()
        port = self.wait_for_port(server, self.port_file(site, n))
        self.proxies[site].set_target("127.0.0.1", port)
        self.event("%s start %d listening on port %d" % (server.name, n, port))

    def wait_for_port(self, server, port_file):
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if server.popen.poll() is not None:
                raise ChaosError("the replay server exited (code %s) before listening:\n%s" % (
                    server.popen.poll(), server.tail()))
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            except (OSError, ValueError):
                pass
            time.sleep(LOOP_S)
        raise ChaosError("the replay server did not listen within %.0f s" %
                         SERVER_START_TIMEOUT_S)

    def children(self):
        return self.servers + [self.learner] + self.actors

    # -- events ------------------------------------------------------------

    def event(self, text):
        self.events_log.write("%8.2f %s\n" % (time.monotonic() - self.t0, text))
        self.events_log.flush()

    def fail(self, text):
        self.failures.append(text)
        self.event("FAILURE " + text)
        log("failure: " + text.splitlines()[0])

    def links_of(self, child):
        """(proxy, link name) of every connection the child's faults hit."""
        if child in self.servers:
            site = self.servers.index(child)
            return [(self.proxies[site], "learner")] + [
                (self.proxies[site], "actor-%d" % i) for i in range(len(self.actors))]
        if child is self.learner:
            return [(proxy, "learner") for proxy in self.proxies]
        return [(self.proxies[self.actor_site[self.actors.index(child)]], child.name)]

    def apply_event(self, now):
        # Every event draws the same values, so a seed gives one schedule.
        events = EVENTS if self.args.sites == 1 else SITE_EVENTS
        kind = self.rng.choices([k for k, _ in events], weights=[w for _, w in events])[0]
        target = self.rng.choice(self.actors if kind == "move" else self.children())
        seconds = self.rng.uniform(MIN_FAULT_S, MAX_FAULT_S)
        if kind == "move":
            index = self.actors.index(target)
            new_site = (self.actor_site[index] + self.rng.randrange(1, self.args.sites)) % \
                self.args.sites
            if new_site >= self.sites_up:
                self.counts["no_ops"] += 1
                self.event("move %s: no-op (site %d not up yet)" % (target.name, new_site))
                return
        if kind in ("sigkill", "sigterm", "pause", "move") and target.state != "running":
            self.counts["no_ops"] += 1
            self.event("%s %s: no-op (%s)" % (kind, target.name, target.state))
            return
        if kind in ("sigterm", "move") and not target.ready():
            self.counts["no_ops"] += 1
            self.event("%s %s: no-op (starting)" % (kind, target.name))
            return
        if kind == "move" and self.actor_site.count(self.actor_site[index]) == 1:
            # Every site keeps an actor, so every site keeps making data.
            self.counts["no_ops"] += 1
            self.event("move %s: no-op (its site's last actor)" % target.name)
            return
        self.event("%s %s (%.2f s)" % (kind, target.name, seconds))
        if kind == "move":
            # A clean stop at its site, then a start at the other one.
            self.counts["moves"] += 1
            self.actor_site[index] = new_site
            self.event("%s moves to site %d" % (target.name, new_site))
        if kind == "sigkill":
            self.counts["kills"] += 1
            target.send(signal.SIGKILL)
            target.popen.wait()
            target.state = "down"
            target.restart_at = now + seconds
        elif kind in ("sigterm", "move"):
            self.counts["kills"] += kind == "sigterm"
            target.send(signal.SIGTERM)
            target.state = "terminating"
            target.deadline = now + self.args.grace_s
            target.restart_at = None
            target.fault_s = seconds
        elif kind == "pause":
            self.counts["pauses"] += 1
            target.send(signal.SIGSTOP)
            target.state = "paused"
            target.resume_at = now + seconds
        elif kind == "drop":
            self.counts["drops"] += 1
            for proxy, link in self.links_of(target):
                proxy.drop(link)
        elif kind == "stall":
            self.counts["stalls"] += 1
            for proxy, link in self.links_of(target):
                proxy.stall(link, seconds)

    def restart(self, child):
        if child in self.servers:
            self.counts["server_restarts"] += 1
            self.start_server(self.servers.index(child))
        else:
            self.counts["learner_restarts" if child is self.learner else "actor_restarts"] += 1
            child.start()
            self.event("%s start %d" % (child.name, child.starts - 1))

    def tend(self, now):
        """Resumes, reaps and restarts what is due; notices unexpected exits."""
        for child in self.children():
            code = child.popen.poll() if child.popen is not None else None
            if child.state == "paused" and now >= child.resume_at:
                child.send(signal.SIGCONT)
                child.state = "running"
                self.event("resume %s" % child.name)
            if child.state in ("running", "paused") and code is not None:
                self.fail("%s exited by itself with code %s:\n%s" % (
                    child.name, code, child.tail()))
                child.state = "down"
                child.restart_at = now + MIN_FAULT_S
            elif child.state == "terminating":
                if code is not None:
                    if code != 0:
                        self.fail("%s exited with code %s after SIGTERM:\n%s" % (
                            child.name, code, child.tail()))
                    self.event("%s exited with code %s after SIGTERM" % (child.name, code))
                    child.state = "down"
                    child.restart_at = now + child.fault_s
                elif now > child.deadline:
                    self.fail("%s did not exit within %.0f s of SIGTERM:\n%s" % (
                        child.name, self.args.grace_s, child.tail()))
                    child.send(signal.SIGCONT)
                    child.send(signal.SIGKILL)
                    child.popen.wait()
                    child.state = "down"
                    child.restart_at = now + child.fault_s
            if child.state == "down" and child.restart_at is not None and now >= child.restart_at:
                self.restart(child)

    def stop_all(self):
        """SIGTERM to the actors, then the learner, then the server; each
        must exit with status 0 within grace_s."""
        for child in self.children():
            if child.state == "paused":
                child.send(signal.SIGCONT)
                child.state = "running"
        for group in (self.actors, [self.learner], self.servers):
            live = [c for c in group if c.popen is not None and c.popen.poll() is None]
            for c in live:
                c.send(signal.SIGTERM)
            deadline = time.monotonic() + self.args.grace_s
            for c in live:
                try:
                    code = c.popen.wait(timeout=max(deadline - time.monotonic(), 0.01))
                except subprocess.TimeoutExpired:
                    self.fail("%s did not exit within %.0f s of the final SIGTERM:\n%s" % (
                        c.name, self.args.grace_s, c.tail()))
                    c.send(signal.SIGKILL)
                    c.popen.wait()
                    continue
                if code != 0:
                    self.fail("%s exited with code %s after the final SIGTERM:\n%s" % (
                        c.name, code, c.tail()))
                self.event("%s stopped (code %s)" % (c.name, code))
            for c in group:
                c.state = "down"

    # -- progress ----------------------------------------------------------

    def ingested_so_far(self):
        total = 0
        paths = [os.path.join(self.site_dir(site), "server.%d.vlog" % n)
                 for site, server in enumerate(self.servers) for n in range(server.starts)]
        for path in paths:
            offset, count = self.ingested_seen.get(path, (0, 0))
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                data = b""
            end = data.rfind(b"\n") + 1
            count += data[:end].count(b"I ")
            self.ingested_seen[path] = (offset + end, count)
            total += count
        return total

    def progress(self, now):
        c = self.counts
        log("%4.0f/%d s: kills %d, pauses %d, drops %d, stalls %d; restarts: server %d, "
            "learner %d, actors %d; ingest records %d; failures %d" % (
                now - self.t0, self.args.duration_s, c["kills"], c["pauses"], c["drops"],
                c["stalls"], c["server_restarts"], c["learner_restarts"], c["actor_restarts"],
                self.ingested_so_far(), len(self.failures)))

    def site_rows(self):
        """Per site, the rows the learner trained on from it: the sum of the
        node: lines every learner start that exited cleanly printed."""
        try:
            with open(self.learner.log_path, "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return [0] * self.args.sites
        rows = [0] * self.args.sites
        for m in re.finditer(r"node: 127\.0\.0\.1:(\d+) rows (\d+)", text):
            port = int(m.group(1))
            if port in self.learner_ports:
                rows[self.learner_ports.index(port)] += int(m.group(2))
        return rows

    def reconnects(self):
        return self.count_in_client_logs(b"); reconnecting")

    def count_in_client_logs(self, needle):
        """How often `needle` occurs in the learner's and actors' logs."""
        total = 0
        for child in [self.learner] + self.actors:
            try:
                with open(child.log_path, "rb") as f:
                    total += f.read().count(needle)
            except OSError:
                pass
        return total

    # -- the run -----------------------------------------------------------

    def run(self):
        a = self.args
        run_local.binary(a, "actor")  # a clear error when it is not built
        self.layout = launch_plan.actor_layout(a.bin_dir, self.plan())
        # A fresh token, and each actor its own credential, as run_local.py
        # makes them (the proxies relay the challenge and proof, never it).
        self.token_file, self.credential_files = run_local.make_credentials(a.out_dir, a.actors)
        self.t0 = time.monotonic()
        try:
            # A proxy per site, with a link for the learner and one for each
            # actor (an actor may move to any site).
            self.learner_ports, self.actor_ports = [], []
            for site in range(a.sites):
                os.makedirs(self.site_dir(site), exist_ok=True)
                proxy = chaos_proxy.FaultProxy()
                self.proxies.append(proxy)
                self.learner_ports.append(proxy.add_link("learner"))
                self.actor_ports.append([proxy.add_link("actor-%d" % i) for i in range(a.actors)])
                name = "server" if a.sites == 1 else "server-%d" % site
                self.servers.append(Child(name, lambda n, site=site: self.server_argv(site, n),
                                          a.out_dir, "listening on "))
            self.learner = Child("learner", self.learner_argv, a.out_dir, "learner: buffer placement")
            self.actors = [Child("actor-%d" % i, lambda n, i=i: self.actor_argv(i, n), a.out_dir,
                                 "actor %d of %d: " % (i, a.actors)) for i in range(a.actors)]
            # With --join_site_at_s the last site comes up later.
            self.sites_up = a.sites - (1 if a.join_site_at_s > 0 else 0)
            for site in range(self.sites_up):
                self.start_server(site)
            if a.sites > 1:
                self.write_servers_file()
            self.learner.start()
            for index, actor in enumerate(self.actors):
                if self.actor_site[index] < self.sites_up:
                    actor.start()
            log("%s, learner and %d actors started; logs in %s" % (
                "server" if a.sites == 1 else "%d servers (sites)" % a.sites, a.actors,
                a.out_dir))
            end = self.t0 + a.duration_s
            next_event = self.t0 + self.rng.expovariate(1.0 / a.event_interval_s)
            next_progress = self.t0 + a.progress_interval_s
            while True:
                now = time.monotonic()
                if now >= end:
                    break
                if self.sites_up < a.sites and now >= self.t0 + a.join_site_at_s:
                    self.join_site()
                self.tend(now)
                if now >= next_event:
                    self.apply_event(now)
                    next_event = now + self.rng.expovariate(1.0 / a.event_interval_s)
                if now >= next_progress:
                    self.progress(now)
                    next_progress += a.progress_interval_s
                time.sleep(LOOP_S)
            # Let what is down come back and what is terminating finish,
            # so the final stop finds every process up.
            settle = time.monotonic() + a.grace_s + MAX_FAULT_S
            while time.monotonic() < settle and any(
                    c.state in ("down", "terminating") or not c.ready() for c in self.children()):
                self.tend(time.monotonic())
                time.sleep(LOOP_S)
            elapsed = time.monotonic() - self.t0
        finally:
            if self.servers:
                self.stop_all()
            for proxy in self.proxies:
                proxy.close()
            self.events_log.close()
        report = chaos_check.check_run(a.out_dir)
        figures = {
            "duration_s": round(elapsed, 1),
            "kills": self.counts["kills"],
            "server_restarts": self.counts["server_restarts"],
            "learner_restarts": self.counts["learner_restarts"],
            "actor_restarts": self.counts["actor_restarts"],
            "reconnects": self.reconnects(),
            "same_host_mappings": self.same_host_mappings(),
        }
        figures.update(report.figures())
        failures = self.failures + report.failures
        if report.accepted == 0:
            failures.append("the learner handed entries to training: its logs hold none")
        if a.sites > 1:
            figures["moves"] = self.counts["moves"]
            figures["site_rows"] = self.site_rows()
            if 0 in figures["site_rows"]:
                failures.append("the learner trained on rows of every site: its node: lines "
                                "say %s" % figures["site_rows"])
        if a.soft_transport == "auto" and figures["same_host_mappings"] == 0:
            failures.append("with --soft_transport=auto the clients mapped the server's memory: "
                            "no same-host mapping is in their logs")
        return figures, report, failures


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration_s", type=float, default=120,
                   help="how long faults are injected (default 120)")
    p.add_argument("--seed", type=int, default=1, help="seeds every random choice (default 1)")
    p.add_argument("--actors", type=int, default=3, help="actor processes (default 3)")
    p.add_argument("--sites", type=int, default=1, metavar="K",
                   help="edge sites: K replay servers (server-K.log; verification logs in "
                   "OUT_DIR/site-K), actor i starting at site i mod K and moved between "
                   "sites by move events, one learner over all of them (default 1)")
    p.add_argument("--join_site_at_s", type=float, default=0,
                   help="with --sites > 1: the last site (its server and actors) comes up this "
                   "many seconds into the run and joins the learner through its servers file "
                   "(default 0: every site from the start)")
    p.add_argument("--shard_policy", default="exact",
                   choices=("exact", "first_ready", "round_robin"),
                   help="with --sites > 1, the learner's --shard_policy (default exact)")
    p.add_argument("--event_interval_s", type=float, default=3.0,
                   help="mean seconds between events (default 3)")
    p.add_argument("--checkpoint_dir", default="",
                   help="the server's --checkpoint_dir (default OUT_DIR/checkpoints; must "
                   "hold no checkpoint)")
    p.add_argument("--checkpoint_interval_s", type=float, default=2.0,
                   help="the server's periodic checkpoints (default 2)")
    p.add_argument("--capacity", type=int, default=8192,
                   help="replay capacity in slots, a power of two (default 8192)")
    p.add_argument("--batch_size", type=int, default=32, help="default 32")
    p.add_argument("--samples_per_insert", type=float, default=2.0,
                   help="the replay ratio, bounding the learner's work (default 2): the "
                   "server's in the buffer placement, the learner's in the learner placement")
    p.add_argument("--soft_transport", choices=("tcp", "auto"), default="tcp",
                   help="every process's soft transport: tcp (default; the proxies carry and "
                   "fault all traffic) or auto (same-host shared memory moves the WRITEs and "
                   "READs; the proxies then fault the connections, not the data path)")
    p.add_argument("--replay_placement", choices=("buffer", "learner", "hybrid"),
                   default="buffer",
                   help="the learner's replay placement (default buffer)")
    p.add_argument("--actor_rate", type=float, default=200,
                   help="environment steps per second per actor (default 200)")
    p.add_argument("--env", default="CartPole-v1", choices=launch_plan.ENVIRONMENTS)
    p.add_argument("--observation", default="native", choices=("native", "pixels84"),
                   help="MinAtar's observations: native, or 84x84 u8 frames (default native)")
    p.add_argument("--frame_stack", type=int, default=0,
                   help="frames stored once, stacks of this depth (4 for pixels84; default 0: "
                   "off)")
    p.add_argument("--link_codec", default="raw",
                   help="the server's link compression: raw, lz4[:N], lz4hc[:N], zstd[:N]")
    p.add_argument("--grace_s", type=float, default=30.0,
                   help="how long a process may take to exit after SIGTERM (default 30)")
    p.add_argument("--progress_interval_s", type=float, default=10.0,
                   help="seconds between progress lines (default 10)")
    p.add_argument("--out_dir", default="", help="logs and verification logs (default: a new "
                   "temporary directory)")
    p.add_argument("--bin_dir", default=os.environ.get("DREPLAY_BIN_DIR", ""),
                   help="where the binaries are (default: Bazel's output)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = p.parse_args(argv)
    if args.duration_s <= 0 or args.actors < 1 or args.event_interval_s <= 0:
        p.error("--duration_s, --actors and --event_interval_s must be positive")
    if args.sites < 1 or args.sites > args.actors:
        p.error("--sites must be between 1 and --actors (%d), got %d" % (args.actors, args.sites))
    if args.sites > 1 and args.replay_placement != "buffer":
        p.error("--sites > 1 needs --replay_placement=buffer")
    if args.join_site_at_s < 0 or args.join_site_at_s >= args.duration_s or (
            args.join_site_at_s > 0 and args.sites == 1):
        p.error("--join_site_at_s must be in [0, --duration_s) and needs --sites > 1")
    if args.capacity & (args.capacity - 1):
        p.error("--capacity must be a power of two")
    if not args.bin_dir:
        opt = os.path.join(run_local.ROOT, "bazel-out", "k8-opt", "bin")
        args.bin_dir = opt if os.path.isdir(opt) else os.path.join(run_local.ROOT, "bazel-bin")
    if not args.out_dir:
        args.out_dir = tempfile.mkdtemp(prefix="dreplay-chaos-")
    os.makedirs(args.out_dir, exist_ok=True)
    if not args.checkpoint_dir:
        args.checkpoint_dir = os.path.join(args.out_dir, "checkpoints")
    if os.path.isdir(args.checkpoint_dir) and os.listdir(args.checkpoint_dir):
        p.error("--checkpoint_dir %s is not empty: the checker needs every start's records"
                % args.checkpoint_dir)
    return args


def main(argv):
    args = parse_args(argv)
    chaos = Chaos(args)
    try:
        figures, report, failures = chaos.run()
    except (ChaosError, run_local.RunError, launch_plan.PlanError) as e:
        log("error: %s" % e)
        return 2
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    if args.json:
        print(json.dumps(figures), flush=True)
    else:
        for k, v in figures.items():
            print("%s: %s" % (k, v))
    log("checked %d learner entries, %d restores, %d evicted at a checkpoint (saved absent), "
        "%d reingested after a restore, %d sequences reissued with new content" % (
            report.accepted, report.restores, report.evicted_at_checkpoint,
            report.reingested_after_restore, report.sequences_reissued))
    for f in failures:
        print("chaos: invariant broken: " + f, file=sys.stderr, flush=True)
    if not failures:
        log("every invariant holds")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
