"""Unit tests of tools/launch/metrics_lines.py on a small metrics file
(tools/launch/testdata/metrics_sample.jsonl: three progress records, a blank line,
a summary, and a last line cut short as by a killed learner)."""

import contextlib
import io
import os
import tempfile
import unittest

from tools.launch import metrics_lines

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata",
                      "metrics_sample.jsonl")
# Records with the probe loss, samples per insert, data age, fetched counts
# and link bytes by class.
SAMPLE_LINK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata",
                           "metrics_sample_link.jsonl")


class MetricsLinesTest(unittest.TestCase):

    def test_load_skips_blank_and_cut_lines(self):
        records = metrics_lines.load(SAMPLE)
        self.assertEqual([r["type"] for r in records],
                         ["progress", "progress", "progress", "summary"])

    def test_strict_load_names_the_cut_line(self):
        with self.assertRaisesRegex(ValueError, r"metrics_sample\.jsonl:6: not a metrics record"):
            metrics_lines.load(SAMPLE, strict=True)

    def test_read_splits_progress_and_summary(self):
        progress, summary = metrics_lines.read(SAMPLE)
        self.assertEqual([r["train_steps"] for r in progress], [100, 200, 400])
        self.assertTrue(summary["solved"])
        self.assertIsNone(metrics_lines.last_of_kind(progress, metrics_lines.SUMMARY))

    def test_series_leaves_out_null_figures(self):
        progress, _ = metrics_lines.read(SAMPLE)
        self.assertEqual(metrics_lines.series(progress, "loss"), ([100, 400], [0.5, 0.25]))

    def test_after_convergence_keeps_the_second_half_of_training(self):
        progress, _ = metrics_lines.read(SAMPLE)
        tail = metrics_lines.after_convergence(progress)
        self.assertEqual([r["train_steps"] for r in tail], [200, 400])
        self.assertEqual(metrics_lines.after_convergence([]), [])

    def test_run_figures_weigh_priority_by_transitions(self):
        figures = metrics_lines.run_figures(*metrics_lines.read(SAMPLE))
        self.assertEqual(figures["loss_after_convergence"], 0.25)  # the null loss is left out
        self.assertEqual(figures["transferred_priority_after_convergence"], 1.0)
        self.assertEqual(figures["link_bytes_total"], 4000000)
        self.assertEqual(figures["eval_return_last"], 480)
        self.assertEqual(figures["wall_s"], 15.0)
        self.assertTrue(figures["solved"])
        self.assertEqual(figures["env_steps_to_solve"], 1550)

    def test_run_figures_without_a_summary_fall_back_to_the_last_progress(self):
        progress, _ = metrics_lines.read(SAMPLE)
        figures = metrics_lines.run_figures(progress, None)
        self.assertEqual(figures["train_steps"], 400)
        self.assertFalse(figures["solved"])
        self.assertIsNone(figures["time_to_solve_s"])

    def test_demo_summary_reports_a_solved_run(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = metrics_lines.main(["metrics_lines.py", "demo_summary", SAMPLE, "1", "21", "0"])
        self.assertEqual(code, 0)
        self.assertIn("SOLVED CartPole-v1", out.getvalue())
        self.assertIn("14.9 s of training (demo wall time 20.0 s)", out.getvalue())
        self.assertIn("4000 transitions, 4.0 MB (buffer placement)", out.getvalue())

    def test_run_figures_read_the_replay_ratio_age_probe_and_link_classes(self):
        figures = metrics_lines.run_figures(*metrics_lines.read(SAMPLE_LINK))
        self.assertEqual(figures["probe_loss_after_convergence"], 0.625)  # both records
        self.assertEqual(figures["probe_loss_last"], 0.5)
        self.assertEqual(figures["trained_abs_td_error_after_convergence"], 1.0)
        self.assertEqual(figures["samples_per_insert"], 2.0)
        self.assertEqual(figures["data_age_mean_s"], 0.055)
        self.assertEqual(figures["transitions_fetched_total"], 1600)
        self.assertEqual(figures["distinct_transitions_fetched_total"], 1600)
        by_class = figures["link_bytes_by_class"]
        self.assertEqual(by_class, {"experience": 2000000, "metadata": 200000, "polling": 20000,
                                    "priorities": 0, "params": 2000, "control": 0})
        self.assertEqual(sum(by_class.values()), figures["link_bytes_total"])

    def test_files_without_link_classes_read_as_zero_bytes_per_class(self):
        figures = metrics_lines.run_figures(*metrics_lines.read(SAMPLE))
        self.assertEqual(set(figures["link_bytes_by_class"].values()), {0})
        self.assertIsNone(figures["probe_loss_last"])
        self.assertIsNone(figures["samples_per_insert"])

    def test_demo_summary_prints_the_link_bytes_by_class(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = metrics_lines.main(["metrics_lines.py", "demo_summary", SAMPLE_LINK, "0", "11",
                                       "0"])
        self.assertEqual(code, 1)  # not solved
        text = out.getvalue()
        self.assertIn("experience 2.00 MB, metadata 0.20 MB, polling 0.02 MB, priorities 0.00 MB, "
                      "params 0.00 MB, control 0.00 MB", text)
        self.assertIn("transitions fetched:      1600 (1600 distinct)", text)
        self.assertIn("experience per distinct:  1250.0 B across the link per distinct transition "
                      "trained on (1.00x the 1250.0 B of one transfer)", text)
        self.assertIn("samples per insert:", text)
        self.assertIn("probe loss (last):", text)

    def test_a_minatar_demo_summary_says_what_was_trained_and_passes(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = metrics_lines.main(["metrics_lines.py", "demo_summary", SAMPLE_LINK, "0", "11",
                                       "0", "MinAtar/Breakout"])
        self.assertEqual(code, 0)  # no solve threshold: a finished run passes
        self.assertIn("TRAINED MinAtar/Breakout for the budget (no solve threshold", out.getvalue())
        self.assertNotIn("NOT SOLVED", out.getvalue())

    def test_experience_per_distinct_counts_each_transfer_of_a_transition(self):
        summary = {"transitions_fetched_total": 120, "distinct_transitions_fetched_total": 100,
                   "link_bytes_experience": 120 * 96}
        self.assertEqual(metrics_lines.experience_per_distinct(summary), (115.2, 1.2, 96.0))
        summary["distinct_transitions_fetched_total"] = 0  # not counted by this learner
        self.assertIsNone(metrics_lines.experience_per_distinct(summary))

    def test_demo_summary_fails_without_a_summary(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = metrics_lines.demo_summary(os.path.join(d, "missing.jsonl"), 0, 1, 3)
        self.assertEqual(code, 1)
        self.assertIn("wrote no summary (exit code 3)", out.getvalue())


if __name__ == "__main__":
    unittest.main()
