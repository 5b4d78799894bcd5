"""tools/bench/peer_bench end to end at small sizes: every arm (Redis with the
redis-server the tool starts, gRPC, dreplay) runs about a second per size,
the JSON holds every case with rates above zero, the ratios and the copy
reference of every size; a bad flag exits 2 and names it.
"""

import json
import os
import subprocess
import unittest

SYSTEMS = ("redis", "grpc", "dreplay")
SIZES = (128, 2048)


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(os.path.join("bazel-bin", path))
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


BINARY = runfile("tools/bench/peer_bench")


class PeerBenchTest(unittest.TestCase):

    def test_every_case_runs_and_the_json_parses(self):
        run = subprocess.run(
            [BINARY, "--json", "--duration_s=1", "--warmup_s=0.2", "--ring_mib=16",
             "--payload_bytes=" + ",".join(str(s) for s in SIZES),
             "--systems=" + ",".join(SYSTEMS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
        self.assertEqual(run.returncode, 0, run.stderr)
        report = json.loads(run.stdout)
        cases = {(c["payload_bytes"], c["system"]): c for c in report["cases"]}
        self.assertEqual(set(cases), {(p, s) for p in SIZES for s in SYSTEMS})
        for key, case in cases.items():
            self.assertGreater(case["inserted_per_s"], 0, key)
            self.assertGreater(case["sampled_per_s"], 0, key)
            self.assertGreater(case["seconds"], 0.9, key)
            self.assertGreater(case["cpu_seconds"], 0, key)
        for size in SIZES:
            ratios = report["ratios"][str(size)]
            dreplay = cases[(size, "dreplay")]
            for other in ("redis", "grpc"):
                o = cases[(size, other)]
                expected = ((dreplay["inserted_per_s"] + dreplay["sampled_per_s"]) /
                            (o["inserted_per_s"] + o["sampled_per_s"]))
                self.assertAlmostEqual(ratios["dreplay_over_" + other], expected,
                                       delta=max(1e-3 * expected, 1e-4))
        for size in SIZES:
            copy = report["copy"][str(size)]
            self.assertGreater(copy["blocks_per_s"], 0, size)
            self.assertAlmostEqual(copy["bytes_per_s"], copy["blocks_per_s"] * size,
                                   delta=1e-6 * copy["bytes_per_s"] + 1)
        self.assertEqual(report["config"]["writers"], 4)

    def test_a_bad_flag_is_named(self):
        run = subprocess.run([BINARY, "--systems=redis,kafka"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(run.returncode, 2)
        self.assertIn("kafka", run.stderr)


if __name__ == "__main__":
    unittest.main()
