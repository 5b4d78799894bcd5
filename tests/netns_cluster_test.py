"""tools/launch/netns_cluster.sh: the real binaries across network namespaces, one
per host, each with an address that exists only inside its namespace.

  * a short training run: the learner trains and reads batches, the actors
    insert, and the counters add up across hosts (what the actors committed
    is what the server inserted or dropped as overrun or torn; the learner's
    priority updates reach the server); every client reached the server from
    its own namespace's address;
  * verbs_bench --server / --connect between two namespaces, on a link
    shaped by tc tbf: the measured rate stays under the bucket's;
  * replay_bench --server / --connect between two namespaces: the clients
    count, and so does the server they read through a monitor session;
  * two edge sites (--sites 2): each buffer node in its own namespace, the
    learner over both, each site's counters adding up on their own;
  * Ctrl-C (SIGINT) while training: the script stops its processes and
    deletes its namespaces.

Needs root and `ip netns`; skips with the reason otherwise.
"""

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from tools.launch import metrics_lines

ACTORS = 2
TRAIN_STEPS = 500
SUBNET = "10.77.0"
STAGING_DEPTH = 8  # the server's default --staging_depth
# The bucket's rate, and the margin a 1 s measurement may exceed it by (its
# burst and the warm-up's tail).
SHAPED_MBIT = 200
SHAPED_MARGIN = 1.25
SCRIPT_TIMEOUT_S = 100
INTERRUPT_TIMEOUT_S = 30


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(path)
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


def bin_dir():
    if os.environ.get("TEST_SRCDIR") is None:  # by hand: the workspace's build
        return os.path.abspath("bazel-bin")
    return os.path.dirname(os.path.dirname(runfile("learner_client/learner")))


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, tc); run the test as root"
    try:
        proc = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "`ip netns` is unavailable: %s" % e
    if proc.returncode != 0:
        return "`ip netns` is unavailable: %s" % proc.stderr.decode(errors="replace").strip()
    return None


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, check=True).stdout
    return [line.split()[0] for line in out.decode().splitlines() if line.strip()]


def run_id(out_dir):
    with open(os.path.join(out_dir, "topology.txt")) as f:
        return re.match(r"run (\S+),", f.readline()).group(1)


def read_counters(out_dir):
    counters = {}
    with open(os.path.join(out_dir, "counters.txt")) as f:
        for line in f:
            key, _, value = line.strip().partition("=")
            counters[key] = int(value)
    return counters


def prom_value(text, sample):
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    raise AssertionError("no sample %s in the server's metrics" % sample)


@unittest.skipIf(skip_reason() is not None, skip_reason())
class NetnsClusterTest(unittest.TestCase):

    def script(self, extra, out_dir, timeout=SCRIPT_TIMEOUT_S):
        cmd = [runfile("tools/launch/netns_cluster.sh"), "--bin_dir", bin_dir(),
               "--out_dir", out_dir, "--subnet", SUBNET] + extra
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout)
        output = proc.stdout.decode(errors="replace")
        print(output)
        return proc.returncode, output

    def out_dir(self, name):
        return tempfile.mkdtemp(prefix="netns-%s-" % name, dir=os.environ.get("TEST_TMPDIR"))

    def assert_torn_down(self, out_dir):
        rid = run_id(out_dir)
        left = [ns for ns in namespaces() if rid in ns]
        self.assertEqual(left, [], "namespaces left behind")

    def test_training_across_namespaces_adds_up(self):
        out_dir = self.out_dir("train")
        rc, output = self.script(["--actors", str(ACTORS), "--train_steps", str(TRAIN_STEPS),
                                  "--duration_s", "60", "--seed", "3"], out_dir)
        self.assertEqual(rc, 0, output)
        self.assert_torn_down(out_dir)

        # The learner trained its budget on batches it read.
        progress, summary = metrics_lines.read(os.path.join(out_dir, "metrics.jsonl"),
                                               strict=True)
        self.assertIsNotNone(summary, "no summary record")
        self.assertEqual(summary["train_steps"], TRAIN_STEPS)
        self.assertGreater(summary["transitions_fetched_total"], 0)
        self.assertGreater(summary["link_bytes_total"], 0)

        # What the actors say they committed, from their own logs.
        committed = 0
        for i in range(ACTORS):
            with open(os.path.join(out_dir, "actor-%d.log" % i)) as f:
                found = re.findall(r"actor %d: \d+ env steps, \d+ episodes, (\d+) transitions "
                                   r"committed" % i, f.read())
            self.assertTrue(found, "actor-%d.log has no final line" % i)
            committed += int(found[-1])
        self.assertGreater(committed, 0)

        # The server's own counters, scraped from the learner's namespace.
        with open(os.path.join(out_dir, "server_metrics.prom")) as f:
            prom = f.read()
        inserted = prom_value(prom, "dreplay_server_inserted_total")
        overrun = prom_value(prom, 'dreplay_server_dropped_total{cause="overrun"}')
        torn = prom_value(prom, 'dreplay_server_dropped_total{cause="torn"}')
        self.assertEqual(inserted + overrun + torn, committed)
        self.assertGreater(inserted, 0)
        # A staging slot is released when the learner's priority update for
        # it is consumed (one per train step), or without one for the at most
        # --staging_depth batches outstanding when the learner leaves.
        released = prom_value(prom, "dreplay_server_batches_released_total")
        self.assertGreater(released, 0)
        self.assertLessEqual(released, summary["train_steps"] + STAGING_DEPTH)
        self.assertGreater(prom_value(prom, 'dreplay_server_priority_updates_total'
                                      '{result="applied"}'), 0)
        self.assertEqual(prom_value(prom, 'dreplay_server_connections_accepted_total'
                                    '{role="actor"}'), ACTORS)
        self.assertEqual(prom_value(prom, 'dreplay_server_connections_accepted_total'
                                    '{role="learner"}'), 1)

        # The script's own check agrees.
        counters = read_counters(out_dir)
        self.assertEqual(counters["actors_committed"], committed)
        self.assertEqual(counters["server_inserted"], inserted)
        self.assertEqual(counters["learner_train_steps"], TRAIN_STEPS)

        # Each client came from its own namespace's address, not loopback.
        with open(os.path.join(out_dir, "server.log")) as f:
            server_log = f.read()
        self.assertIn("listening on %s.1:" % SUBNET, server_log)
        self.assertRegex(server_log, r"accepted learner \(%s\.2:\d+\)" % re.escape(SUBNET))
        for i in range(ACTORS):
            self.assertRegex(server_log, r"accepted actor %d \(%s\.%d:\d+\)" %
                             (i, re.escape(SUBNET), 10 + i))
        self.assertNotIn("127.0.0.1", server_log)

    def test_two_edge_sites_each_add_up(self):
        # Actors 0 and 2 at site 0 (namespace "buffer", .1), actor 1 at site
        # 1 ("buffer1", .3); one learner over both, exact sampling.
        out_dir = self.out_dir("sites")
        rc, output = self.script(["--sites", "2", "--actors", "3", "--train_steps",
                                  str(TRAIN_STEPS), "--duration_s", "60", "--seed", "3",
                                  "--min_replay", "128",
                                  "--learner_flag=--shard_policy=exact"], out_dir)
        self.assertEqual(rc, 0, output)
        self.assert_torn_down(out_dir)
        _, summary = metrics_lines.read(os.path.join(out_dir, "metrics.jsonl"), strict=True)
        self.assertEqual(summary["train_steps"], TRAIN_STEPS)
        with open(os.path.join(out_dir, "learner.log")) as f:
            nodes = re.findall(r"^node: (\S+) rows (\d+) ", f.read(), re.M)
        self.assertEqual([address.rsplit(":", 1)[0] for address, _ in nodes],
                         [SUBNET + ".1", SUBNET + ".3"])
        for address, rows in nodes:
            self.assertGreater(int(rows), 0, "the learner took rows from %s" % address)
        for site, actors in ((0, [0, 2]), (1, [1])):
            with open(os.path.join(out_dir, "counters-site-%d.txt" % site)) as f:
                counters = dict(line.strip().split("=") for line in f)
            self.assertGreater(int(counters["actors_committed"]), 0, counters)
            self.assertGreater(int(counters["server_priority_updates_applied"]), 0, counters)
            with open(os.path.join(out_dir, "server-%d.log" % site)) as f:
                server_log = f.read()
            for i in actors:
                self.assertRegex(server_log, r"accepted actor %d \(%s\.%d:\d+\)" %
                                 (i, re.escape(SUBNET), 10 + i))
            self.assertRegex(server_log, r"accepted learner \(%s\.2:\d+\)" % re.escape(SUBNET))

    def test_verbs_bench_between_namespaces_on_a_shaped_link(self):
        out_dir = self.out_dir("bench")
        rc, output = self.script(["--bench_only", "--learner_rate", "%dmbit" % SHAPED_MBIT,
                                  "--bench_flag", "--baseline=tcp"], out_dir)
        self.assertEqual(rc, 0, output)
        self.assert_torn_down(out_dir)
        with open(os.path.join(out_dir, "bench.json")) as f:
            bench = json.load(f)
        self.assertEqual(bench["op"], "READ")
        self.assertTrue(bench["mode"].startswith("remote %s.1:" % SUBNET), bench["mode"])
        self.assertGreater(bench["ops"], 0)
        self.assertGreater(bench["gbps"], 0)
        # READ responses cross the bucket towards the learner.
        self.assertLess(bench["gbps"], SHAPED_MBIT / 1000.0 * SHAPED_MARGIN, bench)
        # The TCP baseline streams to the server's sink across the same
        # shaped link (learner to buffer), not over the learner's loopback.
        self.assertGreater(bench["tcp"]["gbps"], 0, bench)
        # CPU per byte, for both: the host's busy time over the bytes moved
        # (-1: not measured). The client busy-polls, so its window is busy;
        # a slow stream may fit in a clock tick.
        self.assertGreater(bench["cpu_ns_per_byte"], 0, bench)
        self.assertGreaterEqual(bench["tcp"]["cpu_ns_per_byte"], 0, bench)
        self.assertLess(bench["tcp"]["gbps"], SHAPED_MBIT / 1000.0 * SHAPED_MARGIN, bench)
        with open(os.path.join(out_dir, "topology.txt")) as f:
            self.assertIn("tbf", f.read())
        with open(os.path.join(out_dir, "bench-server.log")) as f:
            self.assertRegex(f.read(), r"serving client 1: .* <-> %s\.2:" % re.escape(SUBNET))

    def test_replay_bench_between_namespaces(self):
        out_dir = self.out_dir("replay-bench")
        flags = ["--actors=1", "--max_batch=64", "--ring_mib=8", "--duration_s=0.5",
                 "--warmup_s=0.1", "--read_probes=3", "--link=10km-25g", "--baseline=nolink"]
        args = ["--bench_only", "--bench_tool", "replay_bench"]
        for f in flags:
            args += ["--bench_flag", f]
        rc, output = self.script(args, out_dir)
        self.assertEqual(rc, 0, output)
        self.assert_torn_down(out_dir)
        with open(os.path.join(out_dir, "bench.json")) as f:
            bench = json.load(f)
        # The clients ran in the learner's namespace against the server in
        # the buffer's, and counted at both.
        self.assertTrue(bench["config"]["server"].startswith("%s.1:" % SUBNET), bench["config"])
        self.assertGreater(bench["result"]["inserted_per_s"], 0, bench["result"])
        self.assertGreater(bench["result"]["sampled_per_s"], 0, bench["result"])
        self.assertGreater(bench["nolink"]["sampled_per_s"], 0, bench["nolink"])
        with open(os.path.join(out_dir, "bench-server.log")) as f:
            self.assertRegex(f.read(), r"replay_bench server listening on %s\.1:\d+" %
                             re.escape(SUBNET))

    def test_interrupt_tears_everything_down(self):
        out_dir = self.out_dir("interrupt")
        cmd = [runfile("tools/launch/netns_cluster.sh"), "--bin_dir", bin_dir(),
               "--out_dir", out_dir, "--subnet", SUBNET, "--actors", "1", "--duration_s", "300"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            # Until the learner has connected: every process and namespace exists.
            deadline = time.monotonic() + INTERRUPT_TIMEOUT_S
            server_log = os.path.join(out_dir, "server.log")
            while time.monotonic() < deadline and proc.poll() is None:
                if os.path.exists(server_log):
                    with open(server_log) as f:
                        if "accepted actor 0" in f.read():
                            break
                time.sleep(0.1)
            self.assertIsNone(proc.poll(), "the script ended early")
            rid = run_id(out_dir)
            self.assertTrue([ns for ns in namespaces() if rid in ns])
            inside = []
            for ns in namespaces():
                if rid in ns:
                    inside += subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE,
                                             check=True).stdout.decode().split()
            self.assertGreaterEqual(len(inside), 3, "server, learner and actor run inside")
            proc.send_signal(signal.SIGINT)
            output = proc.communicate(timeout=INTERRUPT_TIMEOUT_S)[0].decode(errors="replace")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        print(output)
        self.assertEqual(proc.returncode, 130, output)
        self.assertIn("interrupted", output)
        self.assert_torn_down(out_dir)
        for pid in inside:
            self.assertFalse(os.path.exists("/proc/%s" % pid), "pid %s still runs" % pid)


if __name__ == "__main__":
    unittest.main()
