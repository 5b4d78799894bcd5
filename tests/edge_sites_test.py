"""Several edge sites: tools/launch/run_local.py --buffer_nodes=2 starts two
replay servers (actor i writing to server i mod 2) and one learner over both
(learner --servers), on loopback with the soft provider and an emulated
10 km / 25 GbE link, for each shard policy:

  * exact: the learner's batches come from each node in proportion to its
    priority mass; with 3 actors, node 0 has two of them and about twice the
    transitions, so it gives clearly more than half the rows;
  * round_robin: the nodes' batches in turn, half the rows each, whatever
    their mass (Reverb's sharding);
  * first_ready: both nodes give rows.

And a site that goes and comes back: one node's server is SIGKILLed while
the learner trains, its actor moves to the other site, and the server is
restarted from its checkpoint on the same port; the learner goes on with
the other node (no wait between batches over 1.5 s), takes the node back
when it stages again, and ends its run. And a site that joins: the learner
starts with one node listed in its --servers_file; a second server and its
actor start, the file gains its line, and the learner takes the node in
(no wait between batches over 1.5 s) and trains on its rows.

Both nodes start staging well within the learner's node timeout (a small
--min_replay), so neither is passed over. Every run trains, answers every batch (the servers would stall otherwise)
and prints one "node:" line per node (learner_client/learner_run.cc).
"""

import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from tools.launch import metrics_lines

DURATION_S = 12
PROCESS_TIMEOUT_S = 120
NODE_LINE = re.compile(r"^node: (?P<address>\S+) rows (?P<rows>\d+) "
                       r"taken_share (?P<taken>[0-9.e-]+) mass_share (?P<mass>[0-9.e-]+) "
                       r"batches (?P<batches>\d+) passed_over (?P<passed_over>\d+) "
                       r"dropped (?P<dropped>\d+) priority_sum (?P<sum>[0-9.e+-]+) "
                       r"link_bytes (?P<bytes>\d+) ingested (?P<ingested>\d+) "
                       r"policy_lag (?P<lag>\S+) inserts_per_s (?P<rate>\S+)")
SHARDS_LINE = re.compile(r"^shards: policy (?P<policy>\S+) tv (?P<tv>[0-9.e-]+) "
                         r"mass_drift_per_s (?P<drift>\S+) longest_gap_s (?P<gap>[0-9.e-]+)")


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(path)
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


def load_run_local():
    spec = importlib.util.spec_from_file_location("run_local", runfile("tools/launch/run_local.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_log(path):
    with open(path, errors="replace") as f:
        return f.read()


def train_steps(metrics):
    """The learner's train steps in its last progress record (0: none yet)."""
    try:
        progress, _ = metrics_lines.read(metrics)
    except (OSError, ValueError):
        return 0
    return progress[-1]["train_steps"] if progress else 0


def stop_roles(rl, processes):
    """Stops the actors, then the learner, then the servers."""
    rl.stop_all([[p for p in processes if p.name.startswith("actor")],
                 [p for p in processes if p.name == "learner"],
                 [p for p in processes if p.name.startswith("server")]])


def parse_lines(text):
    """The learner's node: and shards: lines, as dicts."""
    lines = text.splitlines()
    nodes = [m.groupdict() for m in map(NODE_LINE.match, lines) if m]
    shards = [m.groupdict() for m in map(SHARDS_LINE.match, lines) if m]
    return nodes, shards


class EdgeSitesTest(unittest.TestCase):

    def run_sites(self, policy):
        out_dir = tempfile.mkdtemp(prefix="edge-%s-" % policy, dir=os.environ.get("TEST_TMPDIR"))
        metrics = os.path.join(out_dir, "metrics.jsonl")
        bin_dir = os.path.dirname(os.path.dirname(runfile("learner_client/learner")))
        cmd = [sys.executable, runfile("tools/launch/run_local.py"), "--bin_dir", bin_dir,
               "--buffer_nodes", "2", "--shard_policy", policy, "--actors", "3",
               # Both nodes stage within the node timeout of each other, so
               # neither is passed over while the other fills.
               "--min_replay", "128",
               "--link", "10km-25g", "--env", "CartPole-v1", "--seed", "1",
               "--duration_s", str(DURATION_S), "--eval_interval_s", "100",
               "--progress_interval_s", "4", "--metrics_out", metrics, "--out_dir", out_dir]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=PROCESS_TIMEOUT_S)
        output = proc.stdout.decode(errors="replace")
        print(output)
        self.assertEqual(proc.returncode, 0, "run_local.py failed:\n" + output)
        _, summary = metrics_lines.read(metrics, strict=True)
        self.assertIsNotNone(summary, "no summary record:\n" + output)
        self.assertGreater(summary["train_steps"], 100, policy)
        nodes, shards = parse_lines(read_log(os.path.join(out_dir, "learner.log")))
        self.assertEqual(len(nodes), 2, "one node: line per node expected")
        self.assertEqual(len(shards), 1, "one shards: line expected")
        self.assertEqual(shards[0]["policy"], policy)
        for n in nodes:
            self.assertEqual(int(n["passed_over"]), 0, "no node was passed over: %s" % n)
            self.assertGreater(float(n["sum"]), 0, "each node has priority mass: %s" % n)
            self.assertGreater(int(n["bytes"]), 0, n)
            self.assertGreater(int(n["ingested"]), 0, n)
            # The actors act with parameters the learner published through
            # that node: a lag of a few versions, known for every node.
            self.assertNotEqual(n["lag"], "-", n)
            self.assertGreaterEqual(float(n["lag"]), 0, n)
            self.assertLess(float(n["lag"]), 1000, n)
            self.assertGreater(float(n["rate"]), 0, n)
        # Node 0 has two of the three actors: more transitions, more mass,
        # and made faster.
        self.assertGreater(float(nodes[0]["mass"]), 0.55, nodes)
        self.assertGreater(float(nodes[0]["rate"]), float(nodes[1]["rate"]), nodes)
        self.assertIsNotNone(summary.get("policy_lag_mean"), summary)
        return float(shards[0]["tv"]), [float(n["taken"]) for n in nodes]

    def test_exact_takes_rows_in_proportion_to_mass(self):
        tv, taken = self.run_sites("exact")
        self.assertGreater(taken[0], 0.55, taken)
        self.assertLess(tv, 0.05, "exact sampling's distance from exact sampling")

    def test_round_robin_takes_the_nodes_in_turn(self):
        tv, taken = self.run_sites("round_robin")
        self.assertGreater(taken[0], 0.45, taken)
        self.assertLess(taken[0], 0.55, taken)
        self.assertGreater(tv, 0.03, "half the rows from a node with more than 0.55 of the mass")

    def test_first_ready_takes_from_both(self):
        _, taken = self.run_sites("first_ready")
        for share in taken:
            self.assertGreater(share, 0, taken)


class ElasticSiteTest(unittest.TestCase):
    """A node killed and restarted while the learner trains."""

    def wait_for(self, what, condition, timeout_s, processes):
        deadline = time.monotonic() + timeout_s
        while not condition():
            for p in processes:
                self.assertIsNone(p.poll(), "%s exited (code %s) while waiting for %s:\n%s" % (
                    p.name, p.poll(), what, p.tail(30)))
            self.assertLess(time.monotonic(), deadline, "no %s within %d s" % (what, timeout_s))
            time.sleep(0.05)

    def test_a_site_killed_and_restarted_from_its_checkpoint(self):
        rl = load_run_local()
        out_dir = tempfile.mkdtemp(prefix="edge-elastic-", dir=os.environ.get("TEST_TMPDIR"))
        metrics = os.path.join(out_dir, "metrics.jsonl")
        bin_dir = os.path.dirname(os.path.dirname(runfile("learner_client/learner")))
        args = rl.parse_args([
            "--bin_dir", bin_dir, "--out_dir", out_dir, "--buffer_nodes", "2", "--actors", "4",
            "--min_replay", "128", "--duration_s", "30", "--eval_interval_s", "100",
            "--progress_interval_s", "1", "--link", "10km-25g", "--metrics_out", metrics,
            "--seed", "1", "--learner_flag=--node_timeout_s=1",
            "--server_flag=--checkpoint_interval_s=1"])
        layout = rl.actor_layout(args)
        token, credentials = rl.make_credentials(out_dir, args.actors)

        def start_server(k, listen):
            name = "server-%d" % k
            port_file = os.path.join(out_dir, name + ".port")
            if os.path.exists(port_file):
                os.remove(port_file)
            argv = [a if not a.startswith("--listen=") else "--listen=" + listen
                    for a in rl.server_argv(args, port_file, layout, token, name)]
            argv.append("--checkpoint_dir=" + os.path.join(out_dir, "checkpoint-%d" % k))
            server = rl.Process(name, argv, os.path.join(out_dir, "%s-%s.log" % (
                name, listen.replace(":", "_"))))
            return server, rl.wait_for_port(server, port_file, rl.SERVER_START_TIMEOUT_S)

        processes = []
        try:
            servers = [start_server(k, "127.0.0.1:0") for k in range(2)]
            processes += [s for s, _ in servers]
            addresses = ["127.0.0.1:%d" % port for _, port in servers]
            learner_log = os.path.join(out_dir, "learner.log")
            learner = rl.Process("learner", rl.learner_argv(args, addresses, token), learner_log)
            processes.append(learner)
            # Site 0: actors 0 and 2; site 1: actors 1 and 3.
            actors = [rl.Process("actor-%d" % i, rl.actor_argv(args, addresses[i % 2], i,
                                                               credentials[i]),
                                 os.path.join(out_dir, "actor-%d.log" % i)) for i in range(4)]
            processes += actors

            # Long enough for node 1 to hold (and checkpoint) more than
            # --min_replay transitions: it stages again once restored.
            self.wait_for("training", lambda: train_steps(metrics) > 1500, 60, processes)
            # Node 1 goes: SIGKILL, nothing flushed.
            victim = servers[1][0]
            victim.signal(signal.SIGKILL)
            victim.popen.wait()
            processes.remove(victim)
            # Found lost (its connection failed) or silent (its batch did not
            # come within the node timeout), whichever the learner saw first.
            self.wait_for("the learner passing node 1 over",
                          lambda: re.search(r"replay node 1 (lost|staged nothing)",
                                            read_log(learner_log)), 15, processes)
            trained = train_steps(metrics)
            self.wait_for("training without node 1", lambda: train_steps(metrics) > trained + 200, 15,
                          processes)
            # One of its actors moves to site 0: the same id and credential,
            # the other site's address (actor 3 stays and reconnects).
            mover = actors[1]
            mover.signal(signal.SIGTERM)
            mover.popen.wait(timeout=rl.STOP_GRACE_S * 2)
            processes.remove(mover)
            moved = rl.Process("actor-1-moved", rl.actor_argv(args, addresses[0], 1,
                                                              credentials[1]),
                               os.path.join(out_dir, "actor-1-moved.log"))
            processes.append(moved)
            server0_log = servers[0][0].log_path
            self.wait_for("site 0 accepting the moved actor",
                          lambda: re.search(r"accepted actor 1 ", read_log(server0_log)), 20,
                          processes)
            # It comes back from its checkpoint, at the address the learner knows.
            back, _ = start_server(1, addresses[1])
            processes.append(back)
            self.wait_for("node 1 staging again",
                          lambda: "replay node 1 stages again" in read_log(learner_log), 30,
                          processes)
            code = learner.popen.wait(timeout=PROCESS_TIMEOUT_S)
            self.assertEqual(code, 0, learner.tail(30))
        finally:
            stop_roles(rl, processes)
        text = read_log(learner_log)
        self.assertIn("restored checkpoint", read_log(back.log_path),
                      "the restarted server came back from its checkpoint")
        nodes, shards = parse_lines(text)
        self.assertEqual(len(nodes), 2, text[-3000:])
        self.assertGreaterEqual(int(nodes[1]["passed_over"]), 1, nodes)
        self.assertNotIn(" away", [l for l in text.splitlines() if l.startswith("node:")][1])
        self.assertEqual(int(nodes[0]["passed_over"]), 0, nodes)
        # The learner never waited long: the kill cost one node timeout at most.
        self.assertLess(float(shards[0]["gap"]), 1.5, shards)

    def test_a_site_that_joins_while_the_learner_trains(self):
        rl = load_run_local()
        out_dir = tempfile.mkdtemp(prefix="edge-join-", dir=os.environ.get("TEST_TMPDIR"))
        metrics = os.path.join(out_dir, "metrics.jsonl")
        bin_dir = os.path.dirname(os.path.dirname(runfile("learner_client/learner")))
        args = rl.parse_args([
            "--bin_dir", bin_dir, "--out_dir", out_dir, "--buffer_nodes", "2", "--actors", "2",
            "--min_replay", "128", "--duration_s", "25", "--eval_interval_s", "100",
            "--progress_interval_s", "1", "--link", "10km-25g", "--metrics_out", metrics,
            "--seed", "2", "--learner_flag=--node_timeout_s=1"])
        layout = rl.actor_layout(args)
        token, credentials = rl.make_credentials(out_dir, args.actors)

        def start_server(k):
            name = "server-%d" % k
            port_file = os.path.join(out_dir, name + ".port")
            server = rl.Process(name, rl.server_argv(args, port_file, layout, token, name),
                                os.path.join(out_dir, name + ".log"))
            return server, "127.0.0.1:%d" % rl.wait_for_port(server, port_file,
                                                             rl.SERVER_START_TIMEOUT_S)

        def write_servers(path, addresses):
            with open(path + ".new", "w") as f:
                f.write("# the sites the learner trains on\n")
                f.write("".join("%s 10km-25g\n" % a for a in addresses))
            os.rename(path + ".new", path)  # the learner never reads half a file

        processes = []
        try:
            server0, address0 = start_server(0)
            processes.append(server0)
            servers_file = os.path.join(out_dir, "servers.txt")
            write_servers(servers_file, [address0])
            learner_log = os.path.join(out_dir, "learner.log")
            argv = [a for a in rl.learner_argv(args, [address0], token)
                    if not a.startswith(("--server=", "--link="))]
            learner = rl.Process("learner", argv + [
                "--servers_file=" + servers_file, "--servers_file_interval_s=0.2",
                "--shard_policy=exact"], learner_log)
            processes.append(learner)
            processes.append(rl.Process("actor-0", rl.actor_argv(args, address0, 0,
                                                                 credentials[0]),
                                        os.path.join(out_dir, "actor-0.log")))

            self.wait_for("training on one site", lambda: train_steps(metrics) > 500, 60, processes)
            # Site 1 comes up with its actor, then is added to the file.
            server1, address1 = start_server(1)
            processes.append(server1)
            processes.append(rl.Process("actor-1", rl.actor_argv(args, address1, 1,
                                                                 credentials[1]),
                                        os.path.join(out_dir, "actor-1.log")))
            write_servers(servers_file, [address0, address1])
            self.wait_for("node 1 joining", lambda: "replay node 1 added" in read_log(learner_log),
                          20, processes)
            self.wait_for("node 1 staging", lambda: "replay node 1 stages its first batch" in read_log(
                learner_log), 30, processes)
            code = learner.popen.wait(timeout=PROCESS_TIMEOUT_S)
            self.assertEqual(code, 0, learner.tail(30))
        finally:
            stop_roles(rl, processes)
        text = read_log(learner_log)
        nodes, shards = parse_lines(text)
        self.assertEqual([n["address"] for n in nodes], [address0, address1], text[-3000:])
        self.assertGreater(int(nodes[1]["rows"]), 0, nodes)
        self.assertEqual(int(nodes[0]["passed_over"]), 0, nodes)
        self.assertEqual(int(nodes[1]["passed_over"]), 0, nodes)
        # Joining cost the learner no wait.
        self.assertLess(float(shards[0]["gap"]), 1.5, shards)


if __name__ == "__main__":
    unittest.main()
