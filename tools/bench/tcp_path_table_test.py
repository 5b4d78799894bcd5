"""tools/bench/tcp_path_table.py at a small size, over loopback: every case
is reported once per release mode when it crosses a link and once when it
does not, every figure is measured (positive), the default mode never
beats the credit ceiling (no frame is early), and bad arguments exit 2.
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


SCRIPT = runfile("tools/bench/tcp_path_table.py")
BIN_DIR = runfile("")
SMALL = ["--mode", "loopback", "--bin_dir", BIN_DIR, "--rounds", "1", "--duration_s", "0.4",
         "--warmup_s", "0.1"]


def run(args, timeout=300):
    return subprocess.run([sys.executable, SCRIPT] + SMALL + args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


class TcpPathTableTest(unittest.TestCase):

    def test_every_case_and_release_mode_is_measured(self):
        result = run(["--json", "--cases", "read1k,write64,sampling,sampling_alone",
                      "--releases", "auto,sender"])
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        report = json.loads(result.stdout)
        self.assertEqual(report["mode"], "loopback")
        rows = {(r["case"], r["release"]): r for r in report["cases"]}
        self.assertEqual(set(rows), {("read1k", "auto"), ("read1k", "sender"),
                                     ("write64", None), ("sampling", "auto"),
                                     ("sampling", "sender"), ("sampling_alone", "auto"),
                                     ("sampling_alone", "sender")})
        for key, row in rows.items():
            with self.subTest(case=key):
                self.assertEqual(len(row["figures"]), 1)
                self.assertGreater(row["median"], 0)
                self.assertEqual(row["met"], row["median"] >= row["target"])
        write = rows[("write64", None)]["runs"][0]
        self.assertAlmostEqual(write["figure"], write["ops_per_s"] / 1e6, places=3)
        self.assertGreater(write["tcp_gbps"], 0)
        for case in ("sampling", "sampling_alone"):
            sampling = rows[(case, "auto")]["runs"][0]
            self.assertAlmostEqual(sampling["figure"],
                                   sampling["sampled_per_s"] / sampling["nolink_sampled_per_s"],
                                   places=3)
        # 16 credits per round trip of at least 100 us, less the reader's
        # allowance of 1 us each way: never more than 16 / 98 us.
        self.assertLessEqual(rows[("read1k", "auto")]["median"], 100 / 98)

    def test_bad_arguments_exit_2_and_name_the_flag(self):
        for args, flag in ((["--cases", "read1k,bogus"], "--cases"),
                           (["--releases", "peer"], "--releases"),
                           (["--rounds", "0"], "--rounds")):
            with self.subTest(args=args):
                result = run(args, timeout=60)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(flag, result.stderr)


if __name__ == "__main__":
    unittest.main()
