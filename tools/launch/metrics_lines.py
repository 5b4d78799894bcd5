#!/usr/bin/env python3
"""Reads the learner's metrics file: JSON lines, one record per line, each
with a "type" of "progress" (one per interval) or "summary" (the last).
learner_client/metrics.h defines every figure; this module only reads them.

  records = metrics_lines.load("metrics.jsonl")
  progress = metrics_lines.of_kind(records, metrics_lines.PROGRESS)
  summary = metrics_lines.last_of_kind(records, metrics_lines.SUMMARY)

Used by tools/experiment/experiment.py (per-run figures), tests/e2e_learning_test.py
and tools/run_demo.sh, which calls the command line:

  python3 tools/launch/metrics_lines.py demo_summary METRICS START_S END_S EXIT_CODE [ENV]

prints the demo's closing summary and exits 0 when the run solved its
environment (ENV, default CartPole-v1), 1 when it did not or wrote no
summary. MinAtar's games have no solve threshold: their summary says what
was trained and exits 0 once the run wrote it.
"""

import json
import math
import statistics
import sys

PROGRESS = "progress"
SUMMARY = "summary"

# The link's traffic classes (client/link_bytes.h), as metrics keys
# "link_bytes_<class>"; they add up to link_bytes_total.
LINK_CLASSES = ("experience", "metadata", "polling", "priorities", "params", "control")


def load(path, strict=False):
    """The records of a metrics file, in order.

    Blank lines are skipped. A line that is not a JSON object with a "type"
    (a line cut by a killed process) is skipped too, or, with strict=True,
    raises ValueError naming the file and line.
    """
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict) or "type" not in record:
                if strict:
                    raise ValueError("%s:%d: not a metrics record: %.80s" % (path, number, line))
                continue
            records.append(record)
    return records


def of_kind(records, kind):
    """The records whose type is `kind`, in order."""
    return [r for r in records if r.get("type") == kind]


def last_of_kind(records, kind):
    """The last record whose type is `kind`, or None."""
    matching = of_kind(records, kind)
    return matching[-1] if matching else None


def read(path, strict=False):
    """(progress records, summary record or None) of a metrics file."""
    records = load(path, strict)
    return of_kind(records, PROGRESS), last_of_kind(records, SUMMARY)


def is_figure(value):
    """True for a finite number (metrics write what is not finite as null)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def series(progress, key):
    """(train_steps, values) of the progress records where `key` is a figure."""
    points = [(r["train_steps"], r[key]) for r in progress if is_figure(r.get(key))]
    return [x for x, _ in points], [y for _, y in points]


def link_bytes_by_class(record):
    """{class: bytes} of a record's link_bytes_<class> keys (0 where absent,
    as in files written before the classes were counted)."""
    record = record or {}
    return {c: record.get("link_bytes_" + c, 0) or 0 for c in LINK_CLASSES}


def after_convergence(progress):
    """The progress records of the second half of training: those with
    train_steps >= half of the run's final train_steps."""
    if not progress:
        return []
    final_steps = max(r.get("train_steps", 0) for r in progress)
    return [r for r in progress if r.get("train_steps", 0) >= final_steps / 2.0]


def run_figures(progress, summary):
    """One run's figures, defined identically for both replay placements.

    Loss after convergence is the mean of the per-interval mean loss of the
    records after_convergence() keeps; transferred priority after convergence
    is the mean |TD error| of the transitions that crossed the link in those
    intervals, weighted by how many crossed in each.
    """
    tail = after_convergence(progress)
    losses = [r["loss"] for r in tail if is_figure(r.get("loss"))]
    weighted, count = 0.0, 0
    for r in tail:
        n = r.get("transferred", 0) or 0
        p = r.get("transferred_priority")
        if n > 0 and is_figure(p):
            weighted += p * n
            count += n
    last = progress[-1] if progress else {}
    summary = summary or {}
    final = summary or last
    probe = [r["probe_loss"] for r in tail if is_figure(r.get("probe_loss"))]
    trained = [r["trained_abs_td_error"] for r in tail
               if is_figure(r.get("trained_abs_td_error"))]
    return {
        "probe_loss_after_convergence": statistics.fmean(probe) if probe else None,
        "probe_loss_last": final.get("probe_loss", last.get("probe_loss")),
        "trained_abs_td_error_after_convergence": statistics.fmean(trained) if trained else None,
        "samples_per_insert": final.get("samples_per_insert", last.get("samples_per_insert")),
        "data_age_mean_s": final.get("data_age_mean_s", last.get("data_age_mean_s")),
        "transitions_fetched_total": final.get("transitions_fetched_total"),
        "distinct_transitions_fetched_total": final.get("distinct_transitions_fetched_total"),
        "link_bytes_by_class": link_bytes_by_class(final),
        "loss_after_convergence": statistics.fmean(losses) if losses else None,
        "transferred_priority_after_convergence": weighted / count if count else None,
        "train_steps": summary.get("train_steps", last.get("train_steps")),
        "env_steps": last.get("env_steps"),
        "link_bytes_total": summary.get("link_bytes_total", last.get("link_bytes_total")),
        "link_transitions_total": summary.get(
            "link_transitions_total", last.get("link_transitions_total")),
        "wall_s": last.get("wall_s", 0.0) or 0.0,
        "solved": bool(summary.get("solved", False)),
        "time_to_solve_s": summary.get("time_to_solve_s"),
        "env_steps_to_solve": summary.get("env_steps_to_solve"),
        "eval_return_last": next((r.get("eval_return_mean") for r in reversed(progress)
                                  if r.get("eval_return_mean") is not None), None),
    }


def experience_per_distinct(summary):
    """(experience bytes per distinct transition fetched, that over the
    bytes of one transfer, the bytes of one transfer), or None when nothing
    was fetched or distinct transitions were not counted.

    Experience bytes / transitions fetched is what one transfer took on the
    link on average (a whole slot, less with --link_codec, more with frame
    records), and the ratio is how many times the link carried each
    distinct transition trained on (1.0: each once).
    """
    fetched = summary.get("transitions_fetched_total") or 0
    distinct = summary.get("distinct_transitions_fetched_total") or 0
    experience = summary.get("link_bytes_experience") or 0
    if fetched <= 0 or distinct <= 0 or experience <= 0:
        return None
    per_transfer = experience / fetched
    per_distinct = experience / distinct
    return per_distinct, per_distinct / per_transfer, per_transfer


def has_solve_threshold(env):
    """Whether the demo stops a run of `env` when solved (MinAtar's games
    have no threshold: the demo trains them for its budget)."""
    return not env.startswith("MinAtar/")


def demo_summary_lines(summary, demo_wall_s, env="CartPole-v1"):
    """The closing lines of tools/run_demo.sh for a summary record."""
    lines = []
    if not has_solve_threshold(env):
        last = summary.get("eval_return_mean")
        best = summary.get("eval_return_best")
        lines.append("TRAINED %s for the budget (no solve threshold; greedy mean return: "
                     "last %s, best %s)" % (env, "%.2f" % last if last is not None else "n/a",
                                            "%.2f" % best if best is not None else "n/a"))
        lines.append("  training time:            %.1f s (demo wall time %.1f s)"
                     % (summary["wall_s"], demo_wall_s))
        lines.append("  environment steps:        %d" % summary["env_steps"])
    elif summary["solved"]:
        lines.append("SOLVED %s (greedy mean return >= %s over 100 episodes)"
                     % (env, "475" if env == "CartPole-v1" else "its solve threshold"))
        lines.append("  time to solve:            %.1f s of training (demo wall time %.1f s)"
                     % (summary["time_to_solve_s"], demo_wall_s))
        lines.append("  environment steps:        %d" % summary["env_steps_to_solve"])
    else:
        best = summary.get("eval_return_best")
        lines.append("NOT SOLVED within the budget (best greedy mean return %s)"
                     % ("%.1f" % best if best is not None else "n/a"))
        lines.append("  training time:            %.1f s (demo wall time %.1f s)"
                     % (summary["wall_s"], demo_wall_s))
        lines.append("  environment steps:        %d" % summary["env_steps"])
    lines.append("  train steps:              %d" % summary["train_steps"])
    lines.append("  across the link:          %d transitions, %.1f MB (%s placement)"
                 % (summary["link_transitions_total"], summary["link_bytes_total"] / 1e6,
                    summary["replay_placement"]))
    by_class = link_bytes_by_class(summary)
    lines.append("  link bytes by class:      " + ", ".join(
        "%s %.2f MB" % (c, by_class[c] / 1e6) for c in LINK_CLASSES))
    fetched = summary.get("transitions_fetched_total")
    if fetched is not None:
        distinct = summary.get("distinct_transitions_fetched_total") or 0
        lines.append("  transitions fetched:      %d (%s)" % (
            fetched, "%d distinct" % distinct if distinct or not fetched
            else "distinct ones not counted by this learner"))
        per_distinct = experience_per_distinct(summary)
        if per_distinct is not None:
            lines.append("  experience per distinct:  %.1f B across the link per distinct "
                         "transition trained on (%.2fx the %.1f B of one transfer)" % per_distinct)
    priority = summary.get("transferred_priority_mean_last_half")
    if priority is not None:
        lines.append("  transferred priority:     %.3g (mean |TD error| at first training use, "
                     "last half)" % priority)
    for key, label, fmt in (("probe_loss", "probe loss (last):", "%.4g"),
                            ("samples_per_insert", "samples per insert:", "%.2f"),
                            ("data_age_mean_s", "data age when trained on:", "%.3g s (mean)")):
        value = summary.get(key)
        if is_figure(value):
            lines.append("  %-26s%s" % (label, fmt % value))
    return lines


def demo_summary(path, start_s, end_s, exit_code, env="CartPole-v1"):
    """Prints the demo's closing summary; 0 when solved (or, for an
    environment without a solve threshold, when the run wrote its summary),
    1 otherwise."""
    try:
        summary = last_of_kind(load(path), SUMMARY)
    except OSError:
        summary = None
    print()
    print("=" * 72)
    if summary is None:
        print("run_demo: the learner wrote no summary (exit code %d); see the logs above"
              % exit_code)
        return 1
    print("\n".join(demo_summary_lines(summary, end_s - start_s, env)))
    print("=" * 72)
    return 0 if summary["solved"] or not has_solve_threshold(env) else 1


def main(argv):
    if len(argv) in (6, 7) and argv[1] == "demo_summary":
        return demo_summary(argv[2], float(argv[3]), float(argv[4]), int(argv[5]),
                            *argv[6:])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
