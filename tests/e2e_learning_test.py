"""End to end: the real replay server, actor and learner binaries, started
by tools/launch/run_local.py on loopback with the soft provider and an emulated
10 km / 25 GbE learner link, learn CartPole-v1.

  * buffer placement: within a bounded time the learner's
    greedy evaluation goes well above a random policy (about 22);
  * learner placement: a short run completes and reports the
    transferred-experience metrics;
  * hybrid placement, forwarding by priority and as the FIFO control: short
    runs complete, and no transition crosses twice.

Each run has a time limit; the buffer run also ends as soon as an evaluation
reaches kStopReturn, so it usually takes well under its limit.
"""

import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from tools.launch import metrics_lines

RANDOM_POLICY_RETURN = 22.0
# Learning is "well above random" at three times its mean return.
LEARNED_RETURN = 3 * RANDOM_POLICY_RETURN
# The buffer run stops at the first evaluation reaching this.
STOP_RETURN = 150.0
BUFFER_LIMIT_S = 75
BASELINE_LIMIT_S = 15
MINATAR_LIMIT_S = 12
# A MinAtar/Breakout transition's encoding with u8 and with f32 observations
# (a 20-byte header, then s and s' of 400 values each).
MINATAR_U8_TRANSITION_BYTES = 20 + 2 * 400
MINATAR_F32_TRANSITION_BYTES = 20 + 2 * 4 * 400
# run_local.py's own margin on top of the learner's limit.
PROCESS_TIMEOUT_S = 150


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(path)
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


# A pixels84 transition sent whole: two stacks of 4 84x84 frames, and its
# 20-byte header.
PIXELS84_TRANSITION_BYTES = 20 + 8 * 84 * 84

LINK_CLASSES = ("experience", "metadata", "polling", "priorities", "params", "control")


class E2eLearningTest(unittest.TestCase):

    def check_common_metrics(self, summary):
        """The figures both placements report alike."""
        self.assertIsNotNone(summary["probe_loss"])
        self.assertGreaterEqual(summary["probe_loss"], 0)
        self.assertIsNotNone(summary["samples_per_insert"])
        self.assertGreater(summary["samples_per_insert"], 0)
        # Actors and learner share a clock here: no age is negative or older
        # than the run.
        self.assertIsNotNone(summary["data_age_mean_s"])
        self.assertGreaterEqual(summary["data_age_mean_s"], 0)
        self.assertLess(summary["data_age_mean_s"], PROCESS_TIMEOUT_S)
        self.assertGreater(summary["transitions_fetched_total"], 0)
        self.assertEqual(sum(summary["link_bytes_" + c] for c in LINK_CLASSES),
                         summary["link_bytes_total"])
        # Read after the fetched counts: coverage cannot exceed 1.
        self.assertGreaterEqual(summary["server_ingested_total"],
                                summary["distinct_transitions_fetched_total"])

    def run_local(self, placement, extra):
        out_dir = tempfile.mkdtemp(prefix="e2e-%s-" % placement,
                                   dir=os.environ.get("TEST_TMPDIR"))
        metrics = os.path.join(out_dir, "metrics.jsonl")
        bin_dir = os.path.dirname(os.path.dirname(runfile("learner_client/learner")))
        cmd = [
            sys.executable, runfile("tools/launch/run_local.py"),
            "--bin_dir", bin_dir,
            "--replay_placement", placement,
            "--link", "10km-25g",
            "--env", "CartPole-v1",
            "--actors", "4",
            "--seed", "1",
            "--eval_episodes", "20",
            "--eval_interval_s", "3",
            "--progress_interval_s", "5",
            "--metrics_out", metrics,
            "--out_dir", out_dir,
        ] + extra
        self.last_out_dir = out_dir
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=PROCESS_TIMEOUT_S)
        output = proc.stdout.decode(errors="replace")
        print(output)
        self.assertEqual(proc.returncode, 0, "run_local.py failed:\n" + output)
        progress, summary = metrics_lines.read(metrics, strict=True)
        self.assertIsNotNone(summary, "no summary record:\n" + output)
        self.assertTrue(progress, "no progress record")
        return progress, summary

    def test_metrics_listen_serves_the_server_and_the_learner(self):
        out_dir = tempfile.mkdtemp(prefix="e2e-metrics-", dir=os.environ.get("TEST_TMPDIR"))
        bin_dir = os.path.dirname(os.path.dirname(runfile("learner_client/learner")))
        proc = subprocess.Popen(
            [sys.executable, runfile("tools/launch/run_local.py"), "--bin_dir", bin_dir,
             "--env", "CartPole-v1", "--actors", "1", "--duration_s", "8",
             "--eval_interval_s", "100", "--metrics_listen", "127.0.0.1", "--out_dir", out_dir],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            urls_file = os.path.join(out_dir, "metrics_urls")
            deadline = time.monotonic() + 60
            while not os.path.exists(urls_file) and proc.poll() is None:
                self.assertLess(time.monotonic(), deadline, "no metrics_urls within 60 s")
                time.sleep(0.05)
            with open(urls_file) as f:
                urls = f.read().split()
            self.assertEqual(len(urls), 2, urls)
            pages = [urllib.request.urlopen(u, timeout=10).read().decode() for u in urls]
            self.assertIn("dreplay_server_inserted_total", pages[0])
            self.assertIn("dreplay_learner_up", pages[1])
            output = proc.communicate(timeout=PROCESS_TIMEOUT_S)[0].decode(errors="replace")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0, output)
        for name, url in zip(("server", "learner"), urls):
            self.assertIn("%s metrics: %s" % (name, url), output)

    def test_buffer_placement_learns_well_above_a_random_policy(self):
        progress, summary = self.run_local("buffer", [
            "--duration_s", str(BUFFER_LIMIT_S),
            "--stop_when_solved", "--solve_return", str(STOP_RETURN),
        ])
        self.assertEqual(summary["replay_placement"], "buffer")
        self.assertGreater(summary["eval_return_best"], LEARNED_RETURN, summary)
        self.assertGreater(summary["train_steps"], 0)
        self.assertGreater(summary["env_steps"], 0)
        # Only sampled batches cross the link: every transition that crossed
        # was trained on.
        self.assertGreater(summary["link_transitions_total"], 0)
        self.assertGreater(summary["link_bytes_total"], 0)
        self.assertIsNotNone(summary["transferred_priority_mean_last_half"])
        self.assertIsNotNone(summary["loss_mean_last_half"])
        self.check_common_metrics(summary)
        # Prioritized sampling: what crossed sat above the middle of the
        # buffer node's priority distribution.
        self.assertIsNotNone(summary["crossing_percentile"])
        self.assertGreater(summary["crossing_percentile"], 50)
        self.assertLessEqual(summary["crossing_percentile"], 100)
        for rec in progress:
            self.assertEqual(rec["replay_placement"], "buffer")

    def test_learner_placement_completes_and_reports_transferred_metrics(self):
        # Padded transitions and a replay ratio enforced by the learner.
        progress, summary = self.run_local("learner", [
            "--duration_s", str(BASELINE_LIMIT_S),
            "--payload_pad_bytes", "256",
            "--samples_per_insert", "4",
        ])
        self.assertEqual(summary["replay_placement"], "learner")
        self.assertGreater(summary["train_steps"], 0)
        self.assertGreater(summary["link_transitions_total"], 0)
        self.assertGreater(summary["link_bytes_total"], 0)
        self.assertIsNotNone(summary["transferred_priority_mean_last_half"])
        self.assertGreater(summary["transferred_priority_mean_last_half"], 0)
        self.assertIsNotNone(summary["eval_return_mean"])
        self.check_common_metrics(summary)
        # The limiter never lets sampling run ahead of 4 per insert (past the
        # first --min_replay transitions, which cover its error buffer).
        self.assertLessEqual(summary["samples_per_insert"], 4.0)
        # The in-order reader READs the ring: the buffer node stages nothing.
        self.assertIsNone(summary["crossing_percentile"])
        last = progress[-1]
        for key in ("loss", "transferred", "transferred_priority", "link_bytes_per_s",
                    "link_transitions_per_s", "actor_return_mean"):
            self.assertIn(key, last)

    def test_hybrid_placement_forwards_each_transition_once(self):
        # The server forwards by priority, and as the FIFO control; the
        # learner keeps its own replay at 4 samples per insert, in a memory
        # smaller than the server's with the FIFO control.
        for policy, local_capacity in (("priority", 0), ("fifo", 2048)):
            with self.subTest(forward_policy=policy):
                progress, summary = self.run_local("hybrid", [
                    "--forward_policy", policy,
                    "--duration_s", str(BASELINE_LIMIT_S),
                    "--samples_per_insert", "4",
                    "--learner_flag=--local_capacity=%d" % local_capacity,
                ])
                with open(os.path.join(self.last_out_dir, "learner.log"),
                          errors="replace") as f:
                    self.assertIn("local replay memory %d slots" % (local_capacity or 65536),
                                  f.read())
                self.assertEqual(summary["replay_placement"], "hybrid")
                self.assertGreater(summary["train_steps"], 0)
                self.check_common_metrics(summary)
                # Staged once each: every transition that crossed was new.
                self.assertEqual(summary["transitions_fetched_total"],
                                 summary["distinct_transitions_fetched_total"])
                self.assertLessEqual(summary["samples_per_insert"], 4.0)
                self.assertIsNotNone(summary["transferred_priority_mean_last_half"])
                self.assertIsNotNone(summary["crossing_percentile"])
                self.assertGreaterEqual(summary["crossing_percentile"], 0)
                self.assertLessEqual(summary["crossing_percentile"], 100)
                for rec in progress:
                    self.assertEqual(rec["replay_placement"], "hybrid")

    def test_minatar_crosses_the_link_as_bytes_and_trains(self):
        # MinAtar's network in the actors and the learner; transitions
        # stored and moved as u8 (a float encoding would be 4x the bytes).
        # pixels84's sizes and network are checked without processes
        # (print_layout_test, run_local_layout_test, rl:conv_networks_test).
        progress, summary = self.run_local("buffer", [
            "--env", "MinAtar/Breakout", "--actors", "2", "--actor_rate", "400",
            "--min_replay", "200", "--eval_episodes", "4",
            "--duration_s", str(MINATAR_LIMIT_S),
        ])
        self.assertGreater(summary["train_steps"], 0)
        self.assertGreater(summary["env_steps"], 0)
        # Experience bytes include what staging adds to each slot (headers,
        # entries, READs repeated while a batch is staged).
        per_transition = summary["link_bytes_experience"] / summary["link_transitions_total"]
        self.assertGreaterEqual(per_transition, MINATAR_U8_TRANSITION_BYTES)
        self.assertLess(per_transition, MINATAR_F32_TRANSITION_BYTES)
        self.assertIsNotNone(summary["eval_return_mean"])

    def test_pixels84_frames_stored_once_cross_the_link_and_train(self):
        # Each 84x84 frame written, stored and moved once: the learner
        # assembles the stacks of the transitions it samples from the
        # records each batch carries (//learner_client:frames_e2e_test
        # checks them byte for byte).
        progress, summary = self.run_local("buffer", [
            "--env", "MinAtar/Breakout", "--observation", "pixels84", "--frame_stack", "4",
            "--actors", "1", "--envs_per_actor", "2", "--capacity", "4096",
            "--min_replay", "100", "--eval_episodes", "2", "--probe_size", "16",
            "--duration_s", str(MINATAR_LIMIT_S),
        ])
        self.assertGreater(summary["train_steps"], 0)
        # A transition's records: one frame at the least, and fewer bytes
        # than its two stacks sent whole.
        per_transition = summary["link_bytes_experience"] / summary["link_transitions_total"]
        self.assertGreater(per_transition, 84 * 84)
        self.assertLess(per_transition, PIXELS84_TRANSITION_BYTES)

    def test_pixels84_frames_forwarded_by_priority_train_a_learner_side_replay(self):
        # The hybrid placement with frames stored once: each transition
        # crosses once with the records its stacks need, compressed, and
        # the learner assembles stacks from the records it keeps.
        progress, summary = self.run_local("hybrid", [
            "--forward_policy", "priority", "--link_codec", "zstd:3",
            "--env", "MinAtar/Breakout", "--observation", "pixels84", "--frame_stack", "4",
            "--actors", "1", "--envs_per_actor", "2", "--capacity", "4096",
            "--min_replay", "100", "--eval_episodes", "2", "--probe_size", "16",
            "--duration_s", str(MINATAR_LIMIT_S),
        ])
        self.assertGreater(summary["train_steps"], 0)
        self.assertEqual(summary["transitions_fetched_total"],
                         summary["distinct_transitions_fetched_total"])
        # Compressed, a transition and its share of records cost less than
        # one raw frame.
        per_transition = summary["link_bytes_experience"] / summary["link_transitions_total"]
        self.assertLess(per_transition, 84 * 84)


if __name__ == "__main__":
    unittest.main()
