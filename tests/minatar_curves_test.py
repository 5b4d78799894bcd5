"""tools/bench/minatar_curves.py end to end, shortened: one MinAtar/Breakout
run of a few seconds through the whole system, its snapshots evaluated
offline, and a result with one point per snapshot, the run's rates and the
random policy's mean; then the plot and the table are drawn from it.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

TIMEOUT_S = 240
DURATION_S = 12
SNAPSHOT_INTERVAL_S = 4


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(path)
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


class MinAtarCurvesTest(unittest.TestCase):

    def test_a_short_run_gives_a_curve_with_its_rates(self):
        tmp = tempfile.mkdtemp(prefix="curves-", dir=os.environ.get("TEST_TMPDIR"))
        results = os.path.join(tmp, "results")
        bin_dir = os.path.dirname(os.path.dirname(runfile("learner_client/learner")))
        proc = subprocess.run(
            [sys.executable, runfile("tools/bench/minatar_curves.py"), "--games",
             "MinAtar/Breakout", "--seeds", "1", "--duration_s", str(DURATION_S),
             "--snapshot_interval_s", str(SNAPSHOT_INTERVAL_S), "--episodes", "3",
             "--actors", "2", "--results_dir", results, "--runs_dir", os.path.join(tmp, "runs"),
             "--bin_dir", bin_dir],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
        output = proc.stdout.decode(errors="replace")
        self.assertEqual(proc.returncode, 0, output)
        with open(os.path.join(results, "Breakout-seed1.json")) as f:
            result = json.load(f)
        points = result["points"]
        # A snapshot at the start, every 4 s and at the end.
        self.assertGreaterEqual(len(points), 3, points)
        self.assertEqual([p["index"] for p in points], list(range(len(points))))
        self.assertEqual(points[0]["train_steps"], 0)  # the initial network
        self.assertGreater(points[-1]["env_steps"], 0)
        for earlier, later in zip(points, points[1:]):
            self.assertLessEqual(earlier["wall_s"], later["wall_s"])
            self.assertLessEqual(earlier["env_steps"], later["env_steps"])
        for p in points:
            lo, hi = p["return_ci95"]
            self.assertLessEqual(lo, p["return_mean"])
            self.assertLessEqual(p["return_mean"], hi)
        self.assertEqual(result["frames"], points[-1]["env_steps"])
        self.assertGreater(result["actor_env_steps_per_s"], 0)
        self.assertGreater(result["link_bytes_per_s"], 0)
        self.assertGreaterEqual(result["random_return_mean"], 0)
        with open(os.path.join(results, "summary.md")) as f:
            self.assertIn("| MinAtar/Breakout | 1 |", f.read())
        if os.path.exists(os.path.join(results, "curves.png")):
            self.assertGreater(os.path.getsize(os.path.join(results, "curves.png")), 0)
        # A second call keeps the result and only redraws.
        again = subprocess.run(
            [sys.executable, runfile("tools/bench/minatar_curves.py"), "--games",
             "MinAtar/Breakout", "--seeds", "1", "--results_dir", results, "--bin_dir", bin_dir],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
        self.assertEqual(again.returncode, 0, again.stdout.decode(errors="replace"))
        self.assertIn("exists, kept", again.stdout.decode(errors="replace"))


if __name__ == "__main__":
    unittest.main()
