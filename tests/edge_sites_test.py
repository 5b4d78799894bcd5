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

Both nodes start staging well within the learner's node timeout (a small
--min_replay), so neither is passed over. Every run trains, answers every batch (the servers would stall otherwise)
and prints one "node:" line per node (learner_client/learner_run.cc).
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

from tools.launch import metrics_lines

DURATION_S = 12
PROCESS_TIMEOUT_S = 120
NODE_LINE = re.compile(r"^node: (?P<address>\S+) rows (?P<rows>\d+) "
                       r"taken_share (?P<taken>[0-9.e-]+) mass_share (?P<mass>[0-9.e-]+) "
                       r"batches (?P<batches>\d+) passed_over (?P<passed_over>\d+) "
                       r"dropped (?P<dropped>\d+) priority_sum (?P<sum>[0-9.e+-]+) "
                       r"link_bytes (?P<bytes>\d+) ingested (?P<ingested>\d+)")
SHARDS_LINE = re.compile(r"^shards: policy (?P<policy>\S+) tv (?P<tv>[0-9.e-]+) "
                         r"mass_drift_per_s (?P<drift>\S+)")


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(path)
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


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
        with open(os.path.join(out_dir, "learner.log")) as f:
            lines = f.read().splitlines()
        nodes = [m.groupdict() for m in map(NODE_LINE.match, lines) if m]
        shards = [m.groupdict() for m in map(SHARDS_LINE.match, lines) if m]
        self.assertEqual(len(nodes), 2, "one node: line per node expected")
        self.assertEqual(len(shards), 1, "one shards: line expected")
        self.assertEqual(shards[0]["policy"], policy)
        for n in nodes:
            self.assertEqual(int(n["passed_over"]), 0, "no node was passed over: %s" % n)
            self.assertGreater(float(n["sum"]), 0, "each node has priority mass: %s" % n)
            self.assertGreater(int(n["bytes"]), 0, n)
            self.assertGreater(int(n["ingested"]), 0, n)
        # Node 0 has two of the three actors: more transitions, more mass.
        self.assertGreater(float(nodes[0]["mass"]), 0.55, nodes)
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

if __name__ == "__main__":
    unittest.main()
