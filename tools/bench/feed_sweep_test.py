"""tools/bench/feed_sweep.py at a small size: one round over two links,
every arm reported per link with its regime and figures, and a bad
argument exits 2.
"""

import json
import os
import subprocess
import sys
import unittest


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(os.path.join("bazel-bin", path))
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


SCRIPT = runfile("tools/bench/feed_sweep.py")
BINARY = runfile("tools/bench/frame_feed_bench")
ARMS = "frames+zstd:1,hybrid/frames+zstd:1,learner/frames"
SMALL = ["--binary", BINARY, "--rounds", "1", "--consume_rate", "1200",
         "--samples_per_insert", "4", "--window_s", "2", "--arms", ARMS,
         "--extra", "--trace_steps=512 --batch_size=32 --capacity=1024 --warmup_s=0.5"]


class FeedSweepTest(unittest.TestCase):

    def test_every_arm_of_every_link_is_reported_with_its_regime(self):
        run = subprocess.run([sys.executable, SCRIPT, "--json", "--links", "50:1,50:0.004"]
                             + SMALL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        report = json.loads(run.stdout)
        rows = {(r["link"], r["arm"]): r for r in report["rows"]}
        self.assertEqual(set(rows), {(l, a) for l in ("50:1", "50:0.004")
                                     for a in ARMS.split(",")})
        for (link, arm), row in rows.items():
            with self.subTest(link=link, arm=arm):
                # rho = G s / B with G = C / spi and s the raw stacked s and s'.
                gbps = float(link.split(":")[1])
                self.assertAlmostEqual(row["rho"], 300 * 56448 * 8 / (gbps * 1e9), places=6)
                self.assertAlmostEqual(row["kappa"], 4 * row["rho"], places=6)
                self.assertEqual(row["utilisation"]["n"], 1)
                self.assertGreater(row["utilisation"]["median"], 0)
                self.assertLessEqual(row["utilisation"]["median"], 1.1)
        # At the fast link every arm feeds the learner; each run is kept.
        for arm in ARMS.split(","):
            self.assertGreater(rows[("50:1", arm)]["utilisation"]["median"], 0.8)
        self.assertEqual(len(report["runs"]["50:1"]), 1)
        # What crossed is placed within the buffer node's priority
        # distribution where the buffer node stages batches, and not
        # measured where it stages nothing.
        for arm in ("frames+zstd:1", "hybrid/frames+zstd:1"):
            pct = rows[("50:1", arm)]["crossing_percentile"]
            self.assertGreater(pct["median"], 0)
            self.assertLess(pct["median"], 100)
        self.assertIsNone(rows[("50:1", "learner/frames")]["crossing_percentile"])

    def test_a_bad_argument_exits_2(self):
        for bad in (["--links", "fast"], ["--links", "50:0.0001"], ["--rounds", "0"]):
            with self.subTest(bad=bad):
                run = subprocess.run([sys.executable, SCRIPT, "--binary", BINARY] + bad,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     timeout=60)
                self.assertEqual(run.returncode, 2, run.stderr)


if __name__ == "__main__":
    unittest.main()
