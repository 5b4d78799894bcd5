#!/usr/bin/env python3
"""Tests of tools/experiment/experiment.py: its schedule and what it keeps
runs of different designs from mixing."""

import contextlib
import io
import json
import os
import tempfile
import unittest

from tools.experiment import experiment as ex


class ScheduleTest(unittest.TestCase):

    def test_interleaves_the_arms_within_each_seed_in_a_drawn_order(self):
        plan = [("rho2-u0.25", ["a", "b", "c"], 2), ("rho8-u8", ["a", "b"], 1)]
        runs = ex.schedule(plan, order_seed=1)
        self.assertEqual(len(runs), 3 + 3 + 2)
        # Seed 1 of every cell before seed 2 of any.
        self.assertEqual([seed for _, _, seed in runs], [1] * 5 + [2] * 3)
        for cell, arms, seeds in plan:
            for seed in range(1, seeds + 1):
                self.assertEqual(sorted(a for c, a, s in runs if c == cell and s == seed),
                                 sorted(arms))
        self.assertEqual(runs, ex.schedule(plan, order_seed=1))


    def test_arms_keeps_only_the_wanted_arms_of_each_cell(self):
        plan = [("rho2-u0.25", ["a", "b", "c"], 2), ("rho8-u8", ["a", "b"], 1)]
        self.assertEqual(ex.restrict_arms(plan, ["c", "b"]),
                         [("rho2-u0.25", ["b", "c"], 2), ("rho8-u8", ["b"], 1)])
        self.assertEqual(ex.restrict_arms(plan, ["c"]), [("rho2-u0.25", ["c"], 2)])
        with self.assertRaisesRegex(ValueError, "d not in the chosen cells"):
            ex.restrict_arms(plan, ["a", "d"])

    def test_main_refuses_an_unknown_arm(self):
        with tempfile.TemporaryDirectory() as out:
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit):
                ex.main(["--out", out, "--arms", "hybrid,nonesuch"])
            self.assertIn("nonesuch not in the chosen cells", stderr.getvalue())
            self.assertFalse(os.path.exists(os.path.join(out, "runs")))


class DesignTest(unittest.TestCase):

    def test_an_out_directory_keeps_one_design(self):
        with tempfile.TemporaryDirectory() as out:
            design = {"env": "CartPole-v1", "observation": "native", "updates": 16000,
                      "governed": True}
            ex.check_design(out, design)
            with open(os.path.join(out, "design.json")) as f:
                self.assertEqual(json.load(f), design)
            ex.check_design(out, dict(design))  # the same: accepted
            with self.assertRaisesRegex(ValueError, "Acrobot-v1.*another --out"):
                ex.check_design(out, dict(design, env="Acrobot-v1"))

    def test_main_refuses_a_resume_into_another_design(self):
        with tempfile.TemporaryDirectory() as out:
            ex.check_design(out, {"env": "Acrobot-v1", "observation": "native",
                                  "updates": 16000, "governed": True})
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr):
                rc = ex.main(["--out", out, "--resume", "--cells", "rho8-u0.25"])
            self.assertEqual(rc, 1)
            self.assertIn("choose another --out", stderr.getvalue())
            self.assertFalse(os.path.exists(os.path.join(out, "runs")))

    def test_the_low_kappa_set_runs_its_cell_at_its_own_rate(self):
        chosen = ex.SETS["low_kappa"]
        rates = ex.set_rates(chosen)
        self.assertEqual(rates, (50.0, 250))
        real = ex.slot_bytes
        ex.slot_bytes = lambda pad: 1120  # the actor's layout, without the binary
        try:
            (name, _, _), = chosen["plan"]
            c = ex.cell(name, chosen["updates"], *rates)
            argv = ex.run_argv(c, "buffer", 1, "/tmp/run", governed=True)
        finally:
            ex.slot_bytes = real
        # Every sample the learner consumes fits the link; not every
        # transition generated does.
        self.assertLess(c["kappa"], 1.0)
        self.assertGreater(c["rho"], 1.0)
        self.assertAlmostEqual(c["generation_per_s"], 12500.0)
        self.assertEqual(argv[argv.index("--max_updates_per_s") + 1], "50.0")
        self.assertIn("--learner_flag=--snapshot_interval_s=5.0", argv)
        args = ex.argparse.Namespace(ungoverned=False)
        self.assertEqual(ex.run_design(args, 3000, rates)["updates_per_s"], 50.0)
        # The default set's design is as recorded before sets had rates.
        self.assertNotIn("updates_per_s", ex.run_design(args, 16000, ex.set_rates(ex.SETS[
            "default"])))

    def test_seeds_must_be_positive(self):
        with tempfile.TemporaryDirectory() as out:
            with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
                ex.main(["--out", out, "--seeds", "-1"])


if __name__ == "__main__":
    unittest.main()
