"""tools/bench/frame_feed_bench at a small size: every arm moves data across
the emulated link, frames stored once cost fewer link bytes per new
transition than stacks sent raw, compression shrinks the experience bytes
again, the byte counts add up, the limiter holds the ratio, and a bad flag
exits 2 and names it.
"""

import json
import os
import subprocess
import unittest


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(os.path.join("bazel-bin", path))
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


BINARY = runfile("tools/bench/frame_feed_bench")
ARMS = ("stacks", "frames", "frames+zstd:1")
SMALL = ["--trace_steps=512", "--consume_rate=1200", "--samples_per_insert=4",
         "--batch_size=32", "--capacity=1024", "--warmup_s=0.5", "--window_s=2",
         "--link=50:1"]


class FrameFeedBenchTest(unittest.TestCase):

    def test_every_arm_feeds_the_learner_and_frames_cost_less(self):
        run = subprocess.run([BINARY, "--json", "--arms=" + ",".join(ARMS)] + SMALL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             timeout=240)
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        report = json.loads(run.stdout)
        self.assertEqual(report["consume_rate"], 1200)
        arms = {a["arm"]: a for a in report["arms"]}
        self.assertEqual(tuple(a["arm"] for a in report["arms"]), ARMS)
        for name, a in arms.items():
            with self.subTest(arm=name):
                self.assertGt(a["consumed"], 0)
                self.assertGt(a["inserted"], 0)
                down = a["link_bytes_experience"] + a["link_bytes_metadata"] + \
                    a["link_bytes_polling"]
                self.assertEqual(a["link_bytes_down"], down)
                total = down + a["link_bytes_priorities"] + a["link_bytes_params"] + \
                    a["link_bytes_control"]
                self.assertAlmostEqual(a["link_bytes_per_new_transition"],
                                       total / a["inserted"], delta=1e-3 * total)
                # The limiter holds the ratio, within its error buffer.
                self.assertLess(a["samples_per_insert"], 4 * 1.5)
                self.assertLessEqual(a["fraction_of_rate"], 1.1)
        stacks, frames, packed = arms["stacks"], arms["frames"], arms["frames+zstd:1"]
        self.assertEqual(stacks["records_inserted"], stacks["inserted"])
        self.assertGt(frames["records_inserted"], frames["inserted"])  # episode starts
        # Each frame crosses about once instead of eight times in stacks.
        self.assertLess(frames["experience_bytes_per_new_transition"],
                        0.5 * stacks["experience_bytes_per_new_transition"])
        self.assertEqual(frames["packed_in_bytes"], frames["packed_out_bytes"])
        self.assertEqual(frames["compression_ratio"], 0)
        self.assertLess(packed["packed_out_bytes"], packed["packed_in_bytes"])
        self.assertGt(packed["compression_ratio"], 4)
        self.assertLess(packed["experience_bytes_per_new_transition"],
                        0.25 * frames["experience_bytes_per_new_transition"])
        targets = report["targets"]
        self.assertEqual(targets["raw_stacked_bytes"], 2 * 4 * 84 * 84)
        self.assertEqual(targets["best_codec_arm"], "frames+zstd:1")
        self.assertAlmostEqual(targets["compressed_reduction"],
                               frames["link_bytes_per_new_transition"]
                               / packed["link_bytes_per_new_transition"], places=3)

    def test_the_learner_side_placements_keep_their_own_replay(self):
        arms = ("hybrid/frames+zstd:1", "hybrid-fifo/frames", "learner/frames")
        run = subprocess.run([BINARY, "--json", "--arms=" + ",".join(arms)] + SMALL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             timeout=240)
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        report = {a["arm"]: a for a in json.loads(run.stdout)["arms"]}
        self.assertEqual(set(report), set(arms))
        for name, a in report.items():
            with self.subTest(arm=name):
                self.assertNotIn("stalled", a)
                self.assertGt(a["consumed"], 0)
                self.assertGt(a["distinct_fetched_per_s"], 0)
                # The learner's own limiter holds the ratio to what was generated.
                self.assertLess(a["samples_per_insert"], 4 * 1.5)
                # Priorities stay local: the hybrid answers each forwarded
                # batch with an update of no records, just to free its slot.
                self.assertLess(a["link_bytes_priorities"], a["link_bytes_experience"] / 10)
        self.assertEqual(report["learner/frames"]["link_bytes_priorities"], 0)
        hybrid, learner = report["hybrid/frames+zstd:1"], report["learner/frames"]
        self.assertGt(hybrid["compression_ratio"], 4)
        # Compressed, forwarded once: fewer bytes than every record READ raw.
        self.assertLess(hybrid["experience_bytes_per_new_transition"],
                        0.25 * learner["experience_bytes_per_new_transition"])
        self.assertEqual(report["hybrid-fifo/frames"]["compression_ratio"], 0)

    def test_a_bad_flag_exits_2_and_names_it(self):
        for flag in ("--arms=frames+gzip", "--arms=pixels", "--arms=edge/frames",
                     "--arms=learner/frames+zstd:1", "--capacity=1000",
                     "--samples_per_insert=0", "--link=fast"):
            with self.subTest(flag=flag):
                run = subprocess.run([BINARY, flag], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, timeout=60)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertIn(flag.split("=")[0].lstrip("-"), run.stderr)

    assertGt = unittest.TestCase.assertGreater


if __name__ == "__main__":
    unittest.main()
