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

    def test_seeds_must_be_positive(self):
        with tempfile.TemporaryDirectory() as out:
            with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
                ex.main(["--out", out, "--seeds", "-1"])


if __name__ == "__main__":
    unittest.main()
