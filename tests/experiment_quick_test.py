"""tools/experiment/experiment.py --quick end to end: every arm of the smoke set runs
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

ARMS = {"learner-in_order", "learner-freshest", "buffer", "buffer-cache"}
REGIMES = ["wan-spi8", "wan-spi0.5", "wan-spi0.5-alpha0"]
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
        self.assertEqual([r["name"] for r in summary["regimes"]], REGIMES)
        for r in summary["regimes"]:
            arms = {a["name"] for a in r["arms"]}
            self.assertEqual(arms, ARMS if r["name"] != "wan-spi0.5-alpha0"
                             else {"buffer", "buffer-cache"})
            self.assertIsInstance(r["link_bound"], bool)
            self.assertGreater(r["generation_bytes_per_s"], 0)
            self.assertGreater(r["link_bytes_per_s"], 0)
            for a in r["arms"]:
                self.assertEqual(a["seeds"], [1])
                # One seed: a mean and no interval.
                self.assertGreater(a["auc"]["mean"], 0)
                self.assertIsNone(a["auc"]["ci95"])
                self.assertGreater(a["link_bytes"]["mean"], 0)
                self.assertGreater(a["train_steps"]["mean"], 0)
                self.assertEqual(a["time_to_solve"]["runs"], 1)
                run = os.path.join(out, "runs", r["name"], "%s-seed1" % a["name"])
                with open(os.path.join(run, "evals.jsonl")) as f:
                    evals = [json.loads(line) for line in f if line.strip()]
                # A snapshot at the start, every 2 s and at the end of 6 s.
                self.assertGreaterEqual(len(evals), 4)
                self.assertEqual([e["index"] for e in evals], list(range(len(evals))))
        pm = summary["paper_metrics"]["wan-spi0.5"]
        self.assertEqual(set(pm), {"%s/%s" % (a, b) for a in ("buffer", "buffer-cache")
                                   for b in ("learner-in_order", "learner-freshest")})
        for ratios in pm.values():
            self.assertIn("transferred_priority_ratio_alpha0", ratios)
        with open(os.path.join(out, "summary.md")) as f:
            text = f.read()
        for name in REGIMES:
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
            for png in ("return_vs_time.png", "return_vs_bytes.png", "survival.png",
                        "regime_map.png"):
                self.assertGreater(os.path.getsize(os.path.join(out, png)), 0)


if __name__ == "__main__":
    unittest.main()
