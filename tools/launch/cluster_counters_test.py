"""tools/launch/cluster_counters.py on hand-made output directories: the checks
that hold, each that fails, and the inputs it refuses."""

import json
import os
import tempfile
import unittest

from tools.launch import cluster_counters

PROM = """# HELP dreplay_server_inserted_total x
# TYPE dreplay_server_inserted_total counter
dreplay_server_inserted_total {inserted}
dreplay_server_dropped_total{{cause="abandoned"}} 7
dreplay_server_dropped_total{{cause="overrun"}} {overrun}
dreplay_server_dropped_total{{cause="torn"}} {torn}
dreplay_server_batches_released_total 12
dreplay_server_priority_updates_total{{result="applied"}} 768
dreplay_server_connections_accepted_total{{role="actor"}} 2
dreplay_server_connections_accepted_total{{role="learner"}} 1
"""


def actor_line(index, committed):
    return ("I1130 actor_run.cc:88] actor %d: 674 env steps, 40 episodes, %d transitions "
            "committed (0 abandoned), 2 parameter refreshes (version 4)\n" % (index, committed))


class ClusterCountersTest(unittest.TestCase):

    def make(self, committed=(100, 50), inserted=140, overrun=6, torn=4, train_steps=12):
        d = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        for i, n in enumerate(committed):
            with open(os.path.join(d, "actor-%d.log" % i), "w") as f:
                f.write("start\n" + actor_line(i, n))
        with open(os.path.join(d, "server_metrics.prom"), "w") as f:
            f.write(PROM.format(inserted=inserted, overrun=overrun, torn=torn))
        with open(os.path.join(d, "metrics.jsonl"), "w") as f:
            f.write(json.dumps({"type": "progress", "train_steps": 5}) + "\n")
            f.write(json.dumps({"type": "summary", "train_steps": train_steps,
                                "transitions_fetched_total": 768}) + "\n")
        return d

    def read_counters(self, d):
        with open(os.path.join(d, "counters.txt")) as f:
            return dict(line.strip().split("=") for line in f)

    def test_counters_that_add_up_pass(self):
        d = self.make()
        self.assertEqual(cluster_counters.main(["--out_dir", d, "--actors", "2"]), 0)
        c = self.read_counters(d)
        self.assertEqual(c["actors_committed"], "150")
        self.assertEqual(c["server_inserted"], "140")
        self.assertEqual(c["learner_train_steps"], "12")

    def test_a_transition_neither_inserted_nor_dropped_fails(self):
        d = self.make(inserted=139)
        self.assertEqual(cluster_counters.main(["--out_dir", d, "--actors", "2"]), 1)

    def test_no_train_step_fails(self):
        d = self.make(train_steps=0)
        self.assertEqual(cluster_counters.main(["--out_dir", d, "--actors", "2"]), 1)

    def test_fewer_actor_connections_than_actors_fails(self):
        d = self.make(committed=(100, 50, 0), inserted=140)
        self.assertEqual(cluster_counters.main(["--out_dir", d, "--actors", "3"]), 1)

    def test_an_actor_without_its_final_line_is_an_input_error(self):
        d = self.make()
        with open(os.path.join(d, "actor-1.log"), "w") as f:
            f.write("killed before its last line\n")
        self.assertEqual(cluster_counters.main(["--out_dir", d, "--actors", "2"]), 2)

    def test_a_learner_without_summary_is_an_input_error(self):
        d = self.make()
        with open(os.path.join(d, "metrics.jsonl"), "w") as f:
            f.write(json.dumps({"type": "progress", "train_steps": 5}) + "\n")
        self.assertEqual(cluster_counters.main(["--out_dir", d, "--actors", "2"]), 2)

    def test_another_actors_line_does_not_count(self):
        d = self.make()
        with open(os.path.join(d, "actor-1.log"), "w") as f:
            f.write(actor_line(0, 50))
        self.assertEqual(cluster_counters.main(["--out_dir", d, "--actors", "2"]), 2)

    def test_each_site_is_checked_with_its_own_actors_and_server(self):
        # Actors 0 and 2 write to site 0, actor 1 and 3 to site 1.
        d = self.make(committed=(100, 30, 60, 20), inserted=150)
        with open(os.path.join(d, "server-0_metrics.prom"), "w") as f:
            f.write(PROM.format(inserted=150, overrun=6, torn=4))
        with open(os.path.join(d, "server-1_metrics.prom"), "w") as f:
            f.write(PROM.format(inserted=50, overrun=0, torn=0))
        for site in (0, 1):
            self.assertEqual(cluster_counters.main(
                ["--out_dir", d, "--actors", "4", "--sites", "2", "--site", str(site)]), 0)
        with open(os.path.join(d, "counters-site-1.txt")) as f:
            c = dict(line.strip().split("=") for line in f)
        self.assertEqual(c["actors_committed"], "50")
        # Site 1's server inserting one short fails site 1 alone.
        with open(os.path.join(d, "server-1_metrics.prom"), "w") as f:
            f.write(PROM.format(inserted=49, overrun=0, torn=0))
        self.assertEqual(cluster_counters.main(
            ["--out_dir", d, "--actors", "4", "--sites", "2", "--site", "1"]), 1)
        self.assertEqual(cluster_counters.main(
            ["--out_dir", d, "--actors", "4", "--sites", "2", "--site", "0"]), 0)


if __name__ == "__main__":
    unittest.main()
