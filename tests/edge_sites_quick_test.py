"""tools/experiment/edge_sites.py --quick end to end: the three shard
policies each run once over two unequal sites (real binaries, soft provider,
emulated links), their snapshots are evaluated offline, and summary.json /
summary.md come out with every policy's figures. Exact sampling's distance
from exact sampling is its multinomial noise; round robin takes half its
rows from each site whatever their mass.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

TIMEOUT_S = 280


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(path)
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


class EdgeSitesQuickTest(unittest.TestCase):

    def test_quick_set_runs_every_policy_and_summarizes(self):
        out = tempfile.mkdtemp(prefix="edge-sites-", dir=os.environ.get("TEST_TMPDIR"))
        bin_dir = os.path.dirname(os.path.dirname(runfile("learner_client/learner")))
        proc = subprocess.run(
            [sys.executable, runfile("tools/experiment/edge_sites.py"), "--quick", "--out", out,
             "--bin_dir", bin_dir],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
        output = proc.stdout.decode(errors="replace")
        self.assertEqual(proc.returncode, 0, output)
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(set(summary["policies"]), {"exact", "first_ready", "round_robin"})
        for policy, figures in summary["policies"].items():
            for figure in ("auc_updates", "tv", "site0_taken_share", "site0_mass_share"):
                self.assertEqual(figures[figure]["n"], 1, (policy, figure, output))
        exact = summary["policies"]["exact"]
        round_robin = summary["policies"]["round_robin"]
        self.assertLess(exact["tv"]["mean"], 0.02, output)
        self.assertAlmostEqual(round_robin["site0_taken_share"]["mean"], 0.5, delta=0.05)
        # Site 0 generates four times what site 1 does: most of the mass.
        self.assertGreater(exact["site0_mass_share"]["mean"], 0.6, output)
        self.assertGreater(round_robin["tv"]["mean"], exact["tv"]["mean"], output)
        self.assertIn("exact-round_robin", summary["paired"])
        with open(os.path.join(out, "summary.md")) as f:
            self.assertIn("| round_robin |", f.read())


if __name__ == "__main__":
    unittest.main()
