"""replay_bench across two processes: `--server` serves the replay server of
its flags, `--connect` runs the actors and the learner against it (here over
loopback, with the TCP path forced) and reads its counters through a monitor
session. Checks that both ends measure, that the no-link baseline runs
against the same server, that the server stops on SIGTERM, that a client
whose flags describe another layout is refused, and that contradictory
flags exit 2.
"""

import json
import os
import re
import signal
import subprocess
import time
import unittest


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(os.path.join("bazel-bin", path))
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


BENCH = runfile("tools/bench/replay_bench")
COMMON = ["--soft_transport=tcp", "--actors=1", "--max_batch=64", "--ring_mib=8",
          "--duration_s=0.4", "--warmup_s=0.1", "--read_probes=3"]
LISTEN_TIMEOUT_S = 60


class Server:
    """A replay_bench --server on loopback; its port once it listens."""

    def __init__(self, flags):
        self.proc = subprocess.Popen([BENCH, "--server", "--host=127.0.0.1", "--port=0"] + flags,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        self.port = None
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while self.port is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"replay_bench server listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise
        self.log.append(err)
        return self.proc.returncode


def client(port, flags, timeout=180):
    return subprocess.run([BENCH, "--connect=127.0.0.1:%d" % port] + flags,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


class ReplayBenchRemoteTest(unittest.TestCase):

    def test_clients_measure_a_server_in_another_process(self):
        server = Server(COMMON + ["--link=10km-25g"])
        try:
            self.assertIsNotNone(server.port, "".join(server.log))
            result = client(server.port, COMMON + ["--link=10km-25g", "--baseline=nolink",
                                                   "--json"])
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            report = json.loads(result.stdout)
            self.assertEqual(report["config"]["server"], "127.0.0.1:%d" % server.port)
            # Counted at the server (its ingest, read through the monitor
            # session) and at the learner, for the run and its baseline.
            self.assertGreater(report["result"]["inserted_per_s"], 0, report["result"])
            self.assertGreater(report["result"]["sampled_per_s"], 0, report["result"])
            self.assertGreater(report["nolink"]["sampled_per_s"], 0, report["nolink"])
            self.assertGreater(report["sampled_ratio_vs_nolink"], 0)
        finally:
            rc = server.stop()
        self.assertEqual(rc, 0, "".join(server.log)[-3000:])

    def test_a_client_with_another_layout_is_refused(self):
        server = Server(COMMON)
        try:
            self.assertIsNotNone(server.port, "".join(server.log))
            result = client(server.port, COMMON + ["--payload_bytes=256"])
            self.assertEqual(result.returncode, 1, result.stderr[-3000:])
            self.assertIn("another layout", result.stderr)
            self.assertIn("capacity: 32768 vs 16384", result.stderr)  # slots of 144 B vs 272 B
        finally:
            self.assertEqual(server.stop(), 0, "".join(server.log)[-3000:])

    def test_contradictory_flags_exit_2_and_name_the_flag(self):
        for flags, named in ((["--server", "--connect=127.0.0.1:1"], "--connect"),
                             (["--connect=127.0.0.1"], "--connect"),
                             (["--connect=127.0.0.1:70000"], "--connect"),
                             (["--connect=127.0.0.1:1", "--baseline=tcp"], "--baseline"),
                             (["--server", "--port=-1"], "--port")):
            with self.subTest(flags=flags):
                result = subprocess.run([BENCH] + flags, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, timeout=60)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(named, result.stderr)


if __name__ == "__main__":
    unittest.main()
