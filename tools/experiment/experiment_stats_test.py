#!/usr/bin/env python3
"""Tests of tools/experiment/experiment_stats.py: the experiment's statistics."""

import json
import math
import os
import statistics
import tempfile
import unittest

import scipy.stats

from tools.experiment import experiment_stats as st


class AreaUnderCurveTest(unittest.TestCase):

    def test_is_the_mean_return_over_the_run(self):
        # 0 at t=0 rising linearly to 100 at t=10: mean 50.
        points = [(t, 0, 0, 10.0 * t) for t in range(0, 11, 2)]
        self.assertAlmostEqual(st.area_under_curve(points, 10.0), 50.0)

    def test_holds_the_last_return_to_the_end(self):
        points = [(0.0, 0, 0, 20.0), (8.0, 0, 0, 20.0)]
        self.assertAlmostEqual(st.area_under_curve(points, 10.0), 20.0)

    def test_no_points_no_area(self):
        self.assertIsNone(st.area_under_curve([], 10.0))


class AreaUnderUpdatesTest(unittest.TestCase):

    def test_is_the_mean_return_over_the_updates(self):
        # Return 0 at step 0, 100 at step 50, 100 at step 100: the area is
        # 50 x 50 + 50 x 100 over 100 updates.
        points = [(0.0, 0, 0, 0.0), (3.0, 0, 50, 100.0), (9.0, 0, 100, 100.0)]
        self.assertAlmostEqual(st.area_under_updates(points, 100), 75.0)
        # Only the first 50 updates count: the ramp, mean 50.
        self.assertAlmostEqual(st.area_under_updates(points, 50), 50.0)

    def test_holds_the_last_return_to_max_updates(self):
        points = [(0.0, 0, 0, 10.0), (5.0, 0, 40, 30.0)]
        # 40 x 20 (ramp) + 60 x 30 (held) over 100.
        self.assertAlmostEqual(st.area_under_updates(points, 100), 26.0)

    def test_no_points_or_no_updates_no_area(self):
        self.assertIsNone(st.area_under_updates([], 100))
        self.assertIsNone(st.area_under_updates([(0.0, 0, 0, 1.0)], 0))

    def test_return_at_updates_is_the_last_snapshot_not_past_them(self):
        points = [(0.0, 0, 0, 10.0), (5.0, 0, 40, 30.0), (9.0, 0, 80, 50.0)]
        self.assertEqual(st.return_at_updates(points, 40), 30.0)
        self.assertEqual(st.return_at_updates(points, 79), 30.0)
        self.assertEqual(st.return_at_updates(points, 1000), 50.0)
        self.assertIsNone(st.return_at_updates(points[1:], 39))
        self.assertIsNone(st.return_at_updates([], 10))


class TimeToSolveTest(unittest.TestCase):

    def test_first_snapshot_at_the_threshold_or_censored(self):
        points = [(0.0, 0, 0, 10.0), (2.0, 0, 0, 480.0), (4.0, 0, 0, 500.0)]
        self.assertEqual(st.time_to_solve(points, 475.0, 45.0), (2.0, True))
        self.assertEqual(st.time_to_solve(points[:1], 475.0, 45.0), (45.0, False))


class KaplanMeierTest(unittest.TestCase):

    def test_censored_runs_leave_the_risk_set_without_an_event(self):
        # Four runs: solved at 10 and 20, two unsolved (censored at 45).
        curve = st.kaplan_meier([(10.0, True), (20.0, True), (45.0, False), (45.0, False)])
        self.assertEqual(curve, [(0.0, 1.0), (10.0, 0.75), (20.0, 0.5)])
        self.assertEqual(st.median_time_to_solve(curve), 20.0)

    def test_censoring_before_an_event_raises_its_weight(self):
        # Censored at 5 leaves 2 at risk at 10: the event halves the curve.
        curve = st.kaplan_meier([(5.0, False), (10.0, True), (30.0, False)])
        self.assertEqual(curve, [(0.0, 1.0), (10.0, 0.5)])
        self.assertEqual(st.median_time_to_solve(curve), 10.0)

    def test_nothing_solved_has_no_median(self):
        curve = st.kaplan_meier([(45.0, False)] * 3)
        self.assertEqual(curve, [(0.0, 1.0)])
        self.assertIsNone(st.median_time_to_solve(curve))


class BootstrapTest(unittest.TestCase):

    def test_interval_brackets_the_mean_and_is_reproducible(self):
        values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
        lo, hi = st.bootstrap_ci(values)
        self.assertLess(lo, 5.5)
        self.assertGreater(hi, 5.5)
        self.assertGreaterEqual(lo, 1.0)
        self.assertLessEqual(hi, 10.0)
        self.assertEqual(st.bootstrap_ci(values), [lo, hi])

    def test_constant_values_have_a_point_interval(self):
        self.assertEqual(st.bootstrap_ci([3.0, 3.0, 3.0]), [3.0, 3.0])

    def test_one_value_has_no_interval(self):
        self.assertEqual(st.mean_ci([2.0, None]), {"mean": 2.0, "ci95": None, "n": 1})

    def test_paired_difference_uses_only_common_seeds(self):
        d = st.paired_difference({1: 10.0, 2: 12.0, 3: 9.0}, {1: 8.0, 2: 13.0})
        self.assertEqual(d["n"], 2)
        self.assertAlmostEqual(d["mean"], 0.5)
        self.assertEqual(d["wins"], 1)


class PairedTestTest(unittest.TestCase):

    def test_t_and_wilcoxon_match_a_hand_computation(self):
        diffs = [1.0, 2.0, 3.0, 4.0, 6.0]
        a = {seed: 10.0 + d for seed, d in enumerate(diffs)}
        b = {seed: 10.0 for seed in range(len(diffs))}
        r = st.paired_test(a, b)
        self.assertEqual((r["n"], r["wins"], r["losses"]), (5, 5, 0))
        self.assertAlmostEqual(r["mean"], 3.2)
        t = statistics.fmean(diffs) / (statistics.stdev(diffs) / math.sqrt(len(diffs)))
        self.assertAlmostEqual(t, 3.2 / math.sqrt(3.7 / 5))
        self.assertAlmostEqual(r["t_p"], 2 * scipy.stats.t.sf(t, len(diffs) - 1))
        # Every difference positive: the exact signed-rank p is 2 / 2^5.
        self.assertAlmostEqual(r["wilcoxon_p"], 2 / 32)

    def test_bca_interval_contains_the_mean_and_is_reproducible(self):
        diffs = [0.5, -1.0, 2.0, 1.5, 3.0, 0.0, 2.5, 1.0]
        a = {seed: d for seed, d in enumerate(diffs)}
        b = {seed: 0.0 for seed in range(len(diffs))}
        r = st.paired_test(a, b)
        lo, hi = r["ci95"]
        self.assertLess(lo, r["mean"])
        self.assertGreater(hi, r["mean"])
        self.assertGreaterEqual(lo, -1.0)
        self.assertLessEqual(hi, 3.0)
        self.assertEqual(st.paired_test(a, b)["ci95"], [lo, hi])
        self.assertEqual((r["wins"], r["losses"]), (6, 1))

    def test_fewer_than_five_seeds_claim_nothing(self):
        r = st.paired_test({1: 3.0, 2: 5.0, 3: 4.0, 4: 9.0}, {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0})
        self.assertEqual(r, {"n": 4, "mean": 4.25, "ci95": None, "t_p": None,
                             "wilcoxon_p": None, "wins": 4, "losses": 0})

    def test_missing_seeds_and_non_figures_are_dropped(self):
        a = {1: 3.0, 2: 5.0, 3: None, 4: 9.0, 5: 2.0, 6: 7.0, 7: 1.0}
        b = {1: 1.0, 2: 6.0, 3: 1.0, 4: float("nan"), 5: 1.0, 6: 1.0, 8: 1.0}
        r = st.paired_test(a, b)
        # Seeds 1, 2, 5 and 6: differences 2, -1, 1, 6.
        self.assertEqual((r["n"], r["wins"], r["losses"]), (4, 3, 1))
        self.assertAlmostEqual(r["mean"], 2.0)
        self.assertIsNone(r["ci95"])

    def test_constant_differences_have_a_point_interval_and_no_t(self):
        ones = {seed: 1.0 for seed in range(5)}
        r = st.paired_test({seed: 3.0 for seed in range(5)}, ones)
        self.assertEqual(r["ci95"], [2.0, 2.0])
        self.assertIsNone(r["t_p"])
        self.assertAlmostEqual(r["wilcoxon_p"], 2 / 32)
        same = st.paired_test(ones, ones)
        self.assertEqual((same["mean"], same["ci95"], same["t_p"], same["wilcoxon_p"]),
                         (0.0, [0.0, 0.0], None, None))

    def test_no_common_seeds(self):
        r = st.paired_test({1: 1.0}, {2: 1.0})
        self.assertEqual((r["n"], r["mean"], r["ci95"]), (0, None, None))


class HolmTest(unittest.TestCase):

    def test_worked_example(self):
        adj = st.holm({"a": 0.01, "b": 0.04, "c": 0.03, "none": None})
        self.assertAlmostEqual(adj["a"], 0.03)  # 3 x 0.01
        self.assertAlmostEqual(adj["c"], 0.06)  # 2 x 0.03
        self.assertAlmostEqual(adj["b"], 0.06)  # 1 x 0.04, raised to stay monotone
        self.assertIsNone(adj["none"])

    def test_monotone_and_capped_at_one(self):
        p = {"a": 0.2, "b": 0.001, "c": 0.6, "d": 0.19}
        adj = st.holm(p)
        self.assertAlmostEqual(adj["b"], 0.004)
        self.assertAlmostEqual(adj["d"], 0.57)
        self.assertAlmostEqual(adj["a"], 0.57)  # 2 x 0.2, raised to stay monotone
        self.assertAlmostEqual(adj["c"], 0.6)
        order = sorted(p, key=p.get)
        self.assertEqual([adj[k] for k in order], sorted(adj.values()))
        # 2 x 0.6 is capped at 1, and 0.7 raised to it.
        self.assertEqual(st.holm({"x": 0.6, "y": 0.7}), {"x": 1.0, "y": 1.0})
        self.assertEqual(st.holm({}), {})


class AaValidTest(unittest.TestCase):

    def test_an_interval_excluding_zero_invalidates(self):
        v = st.aa_valid({"n": 5, "ci95": [0.5, 2.0]})
        self.assertIs(v["valid"], False)
        self.assertIn("excludes 0", v["reason"])
        self.assertIs(st.aa_valid({"n": 5, "ci95": [-3.0, -0.1]})["valid"], False)

    def test_an_interval_including_zero_is_valid(self):
        self.assertIs(st.aa_valid({"n": 5, "ci95": [-0.5, 2.0]})["valid"], True)
        self.assertIs(st.aa_valid({"n": 5, "ci95": [0.0, 0.0]})["valid"], True)

    def test_without_an_interval_validity_is_unknown(self):
        r = st.paired_test({s: 1.0 for s in range(3)}, {s: 0.0 for s in range(3)})
        self.assertEqual(st.aa_valid(r), {"valid": None, "reason": "fewer than 5 paired seeds"})


class RunFiguresTest(unittest.TestCase):

    def write(self, path, records):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")

    def test_windows_are_wall_clock_halves_and_curves_join_by_index(self):
        run = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        progress = [
            {"type": "progress", "wall_s": 2.5, "env_steps": 1000, "loss": 9.0,
             "transferred": 100, "transferred_priority": 9.0, "probe_loss": 9.0},
            {"type": "progress", "wall_s": 5.0, "env_steps": 3000, "loss": 1.0,
             "transferred": 100, "transferred_priority": 1.0, "probe_loss": 2.0},
            {"type": "progress", "wall_s": 10.0, "env_steps": 8000, "loss": 3.0,
             "transferred": 300, "transferred_priority": 3.0, "probe_loss": 4.0},
        ]
        summary = {"type": "summary", "env_steps": 8000, "link_bytes_total": 500,
                   "distinct_transitions_fetched_total": 2000, "train_steps": 70,
                   "samples_per_insert": 1.5, "data_age_mean_s": 0.25}
        self.write(os.path.join(run, "metrics.jsonl"), progress + [summary])
        self.write(os.path.join(run, "snap", "snapshots.jsonl"), [
            {"index": 0, "wall_s": 0.0, "link_bytes_total": 0, "train_steps": 0},
            {"index": 1, "wall_s": 5.0, "link_bytes_total": 200, "train_steps": 30},
            {"index": 2, "wall_s": 10.0, "link_bytes_total": 500, "train_steps": 70}])
        self.write(os.path.join(run, "evals.jsonl"), [
            {"index": 0, "eval_return_mean": 10.0}, {"index": 1, "eval_return_mean": 480.0},
            {"index": 2, "eval_return_mean": 500.0}])
        f = st.run_figures(run, 10.0, 475.0, slot_bytes=100)
        self.assertEqual(f["curve"], [(0.0, 0, 0, 10.0), (5.0, 200, 30, 480.0),
                                      (10.0, 500, 70, 500.0)])
        self.assertEqual((f["time_to_solve_s"], f["solved"]), (5.0, True))
        # Second half: wall_s >= 5 (records 2 and 3), priorities weighted
        # by the transitions that crossed.
        self.assertAlmostEqual(f["loss"], 2.0)
        self.assertAlmostEqual(f["probe_loss"], 3.0)
        self.assertAlmostEqual(f["transferred_priority"], (1.0 * 100 + 3.0 * 300) / 400)
        self.assertAlmostEqual(f["generation_per_s"], 1000.0)
        self.assertAlmostEqual(f["generation_bytes_per_s"], 100000.0)
        self.assertAlmostEqual(f["coverage"], 0.25)
        # Trapezoids: (5 s x (10 + 480) / 2 + 5 s x (480 + 500) / 2) / 10 s.
        self.assertAlmostEqual(f["auc"], 367.5)
        # No buffer-node log: no drop figure.
        self.assertIsNone(f["buffer_node_drops"])

    def test_the_crossing_percentile_is_only_of_what_the_node_staged_to_cross(self):
        self.assertEqual(st.crossing_figure({"replay_placement": "hybrid",
                                             "crossing_percentile": 61.5}), 61.5)
        self.assertEqual(st.crossing_figure({"replay_placement": "buffer",
                                             "crossing_percentile": 70.0}), 70.0)
        self.assertIsNone(st.crossing_figure({"replay_placement": "buffer"}))
        # The learner placement READs the ring: its node's batches never cross.
        self.assertIsNone(st.crossing_figure({"replay_placement": "learner",
                                              "crossing_percentile": 52.0}))

    def test_buffer_node_drops_come_from_the_last_stats_line(self):
        run = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        with open(os.path.join(run, "server.log"), "w") as f:
            f.write("I1130 server.cc:460] stats: epoch=1 inserts/s=10.5 drops: abandoned=1 "
                    "overrun=2 torn=3 copy_rejects=9 stale_updates=40\n")
            f.write("I1130 server.cc:396] dropped actor 3: the connection was closed\n")
            f.write("I1130 server.cc:460] stats: epoch=1 inserts/s=11.5 drops: abandoned=2 "
                    "overrun=20 torn=5 copy_rejects=9 stale_updates=41\n")
        self.assertEqual(st.buffer_node_drops(run), 27)


if __name__ == "__main__":
    unittest.main()
