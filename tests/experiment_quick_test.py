"""tools/experiment/experiment.py --quick end to end: the seven arms of the smoke set run
(real binaries, soft provider, emulated links), its snapshots are evaluated
offline, and summary.json / summary.md come out with the documented shape;
--report_only redraws the same summary.md from summary.json alone.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

ARMS = {"learner-fifo", "learner-freshest", "learner-uniform", "hybrid", "buffer",
        "buffer-cache", "hybrid-aa"}
CELLS = ["rho2-u0.25"]
TIMEOUT_S = 280


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(path)
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


class ExperimentQuickTest(unittest.TestCase):

    def test_quick_set_runs_every_arm_and_summarizes(self):
        out = tempfile.mkdtemp(prefix="experiment-", dir=os.environ.get("TEST_TMPDIR"))
        bin_dir = os.path.dirname(os.path.dirname(runfile("learner_client/learner")))
        proc = subprocess.run(
            [sys.executable, runfile("tools/experiment/experiment.py"), "--quick", "--out", out,
             "--bin_dir", bin_dir],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
        output = proc.stdout.decode(errors="replace")
        self.assertEqual(proc.returncode, 0, output)
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual([c["name"] for c in summary["cells"]], CELLS)
        self.assertTrue(summary["design"]["governed"])
        updates = summary["design"]["updates"]
        for c in summary["cells"]:
            self.assertEqual({a["name"] for a in c["arms"]}, ARMS)
            # rho and kappa as defined: G s / B and rho u batch.
            self.assertAlmostEqual(c["generation_per_s"] * c["slot_bytes"] / c["link_bytes_per_s"],
                                   c["rho"], places=3)
            self.assertAlmostEqual(c["kappa"], c["rho"] * c["u"] * 64, places=3)
            # Memories over the same seconds of data, within a power of two.
            self.assertLess(c["local_capacity"], c["capacity"])
            self.assertLess(abs(c["capacity_s"] - c["local_capacity_s"]),
                            max(c["capacity_s"], c["local_capacity_s"]) / 2 + 1e-9)
            for a in c["arms"]:
                self.assertEqual(a["seeds"], [1])
                # One seed: a mean and no interval.
                self.assertGreater(a["auc"]["mean"], 0)
                self.assertIsNone(a["auc"]["ci95"])
                self.assertGreater(a["link_bytes_down"]["mean"], 0)
                self.assertGreater(a["link_bytes_up"]["mean"], 0)
                self.assertGreater(a["train_steps"]["mean"], 0)
                # The run stops at the set's updates.
                self.assertLessEqual(a["train_steps"]["mean"], updates)
                run = os.path.join(out, "runs", c["name"], "%s-seed1" % a["name"])
                with open(os.path.join(run, "evals.jsonl")) as f:
                    evals = [json.loads(line) for line in f if line.strip()]
                self.assertGreaterEqual(len(evals), 3)
                self.assertEqual([e["index"] for e in evals], list(range(len(evals))))
                # Where the buffer node stages what crosses, the percentile of
                # what crossed in its priority distribution; the freshest
                # reader READs the ring itself, so none there.
                crossing = a["crossing_percentile"]["mean"]
                if a["name"] == "learner-freshest":
                    self.assertIsNone(crossing)
                else:
                    self.assertIsNotNone(crossing, a["name"])
                    self.assertGreaterEqual(crossing, 0)
                    self.assertLessEqual(crossing, 100)
            # The learner-side arms train at about the governed rate: most
            # of the set's updates within the window (which leaves a margin
            # for a loaded machine).
            for name in ("learner-fifo", "learner-freshest", "hybrid"):
                self.assertGreater(next(a for a in c["arms"] if a["name"] == name)
                                   ["updates_reached"]["mean"], 0.5, name)
        # Three named contrasts and the A/A check; one seed claims nothing.
        self.assertEqual([(n["a"], n["b"]) for n in summary["contrasts"]],
                         [("hybrid", "learner-freshest"), ("buffer", "hybrid"),
                          ("buffer-cache", "hybrid")])
        for n in summary["contrasts"]:
            self.assertEqual(n["test"]["n"], 1)
            self.assertIsNone(n["test"]["ci95"])
            self.assertIsNone(n["holm_p"])
        self.assertEqual(len(summary["aa"]), 1)
        self.assertIsNone(summary["aa"][0]["valid"])
        pm = summary["paper_metrics"]["rho2-u0.25"]
        self.assertIn("buffer/learner-freshest", pm)
        with open(os.path.join(out, "summary.md")) as f:
            text = f.read()
        for name in CELLS:
            self.assertIn("`%s`" % name, text)
        # The raw runs are not kept: the report comes back from summary.json.
        os.rename(os.path.join(out, "summary.md"), os.path.join(out, "first.md"))
        redraw = subprocess.run(
            [sys.executable, runfile("tools/experiment/experiment.py"), "--report_only",
             "--out", out],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
        self.assertEqual(redraw.returncode, 0, redraw.stdout.decode(errors="replace"))
        with open(os.path.join(out, "summary.md")) as f:
            self.assertEqual(f.read(), text)
        if importlib.util.find_spec("matplotlib") is not None:
            for png in ("return_vs_updates.png", "return_vs_time.png", "return_vs_bytes.png",
                        "placement_map.png"):
                self.assertGreater(os.path.getsize(os.path.join(out, png)), 0)


if __name__ == "__main__":
    unittest.main()
