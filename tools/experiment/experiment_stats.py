#!/usr/bin/env python3
"""The statistics of tools/experiment/experiment.py: per-run figures from a run's files,
and their aggregates over seeds (means with bootstrap intervals, paired
differences with paired tests and Holm's correction, Kaplan-Meier survival of
time to solve).

The paired tests use SciPy and NumPy (Debian's python3-scipy); the rest uses
only the standard library. Every random draw comes from a generator with a
fixed seed (random.Random, numpy.random.default_rng), so a summary is
reproducible from the runs.
"""

import json
import math
import os
import random
import re
import statistics
import warnings

import numpy
import scipy.stats

import metrics_lines

BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20261130
# Paired intervals and p-values need this many seeds; with fewer a "95 %
# interval" is little more than the values' range, so none is claimed.
MIN_PAIRED_SEEDS = 5


def read_jsonl(path):
    records = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by a killed process
    return records


def return_curve(run_dir):
    """[(wall_s, link_bytes_total, train_steps, greedy return)] of a run's
    snapshots (snapshots.jsonl joined with evals.jsonl by index)."""
    snaps = {r["index"]: r for r in read_jsonl(os.path.join(run_dir, "snap", "snapshots.jsonl"))}
    evals = {r["index"]: r for r in read_jsonl(os.path.join(run_dir, "evals.jsonl"))}
    points = []
    for index in sorted(snaps):
        if index in evals:
            s = snaps[index]
            points.append((s["wall_s"], s["link_bytes_total"], s["train_steps"],
                           evals[index]["eval_return_mean"]))
    return points


def mean_return_over(points, x_index, end):
    """The mean greedy return over x in [0, end], x being point[x_index]
    (0: time, 2: train steps): the trapezoidal area under the return curve
    divided by end, the last return held to the end when the last snapshot
    came short of it. None without points or with end <= 0."""
    if not points or end <= 0:
        return None
    xs = [p[x_index] for p in points]
    ys = [p[3] for p in points]
    if xs[-1] < end:
        xs.append(end)
        ys.append(ys[-1])
    area = 0.0
    for i in range(1, len(xs)):
        lo, hi = max(xs[i - 1], 0.0), min(xs[i], end)
        if hi > lo:
            area += (hi - lo) * (ys[i - 1] + ys[i]) / 2.0
    return area / end


def area_under_curve(points, duration_s):
    """The mean greedy return over the run's [0, duration_s]."""
    return mean_return_over(points, 0, duration_s)


def area_under_updates(points, max_updates):
    """The mean greedy return over updates [0, max_updates]."""
    return mean_return_over(points, 2, max_updates)


def return_at_updates(points, updates):
    """The greedy return of the last snapshot with train_steps <= updates,
    or None if there is none."""
    out = None
    for _, _, steps, r in points:
        if steps <= updates:
            out = r
    return out


def time_to_solve(points, solve_return, duration_s):
    """(time, solved): the first snapshot time whose greedy return reaches
    solve_return, or (duration_s, False): censored at the run's end."""
    for t, _, _, r in points:
        if r >= solve_return:
            return t, True
    return duration_s, False


def window_mean(progress, key, start_s, weight_key=None):
    """Mean of `key` over the progress records with wall_s >= start_s (the
    same wall-clock window in every arm), weighted by `weight_key` if given."""
    total, weight = 0.0, 0.0
    for r in progress:
        if r.get("wall_s", 0) < start_s or not metrics_lines.is_figure(r.get(key)):
            continue
        w = 1.0 if weight_key is None else float(r.get(weight_key) or 0)
        total += r[key] * w
        weight += w
    return total / weight if weight > 0 else None


def generation_rate(progress, start_s):
    """Transitions generated per second from start_s to the end (the actors'
    env steps; each makes one n-step transition), once every actor runs."""
    window = [r for r in progress if r.get("wall_s", 0) >= start_s and r.get("env_steps")]
    if len(window) < 2 or window[-1]["wall_s"] <= window[0]["wall_s"]:
        return None
    return ((window[-1]["env_steps"] - window[0]["env_steps"]) /
            (window[-1]["wall_s"] - window[0]["wall_s"]))


def buffer_node_drops(run_dir):
    """Transitions the buffer node dropped (abandoned + overrun + torn), from
    the last "stats:" line of its log (server.log), or None without one."""
    last = None
    try:
        with open(os.path.join(run_dir, "server.log"), errors="replace") as f:
            for line in f:
                if " stats: " in line:
                    last = line
    except OSError:
        return None
    if last is None:
        return None
    fields = dict(re.findall(r"(\w+)=([0-9]+)\b", last))
    return sum(int(fields.get(k, 0)) for k in ("abandoned", "overrun", "torn"))


# Link byte classes by direction: buffer node to learner, learner to buffer
# node (control, the session's own messages, goes both ways).
DOWN_CLASSES = ("experience", "metadata", "polling")
UP_CLASSES = ("priorities", "params")


def crossing_figure(summary):
    """The run's crossing percentile, or None where nothing the buffer node
    staged crossed: the learner placement's reader READs the slot ring, and
    its buffer node stages batches for no one (a learner placement learner
    of the first layout 14 build reported their measure; dropped here)."""
    if summary.get("replay_placement") == "learner":
        return None
    return summary.get("crossing_percentile")


def run_figures(run_dir, duration_s, solve_return, slot_bytes, updates=None):
    """One run's figures, defined identically for every arm; `updates`: the
    run's target train steps, if it has one."""
    progress, summary = metrics_lines.read(os.path.join(run_dir, "metrics.jsonl"))
    summary = summary or {}
    points = return_curve(run_dir)
    by_class = metrics_lines.link_bytes_by_class(summary)
    tts, solved = time_to_solve(points, solve_return, duration_s)
    half = duration_s / 2.0
    env_steps = summary.get("env_steps") or 0
    distinct = summary.get("distinct_transitions_fetched_total")
    # Coverage's denominator: the server's ingest cursor, read with the
    # fetched counts (so coverage <= 1); older records only have the
    # actors' env_steps, which lag.
    generated = summary.get("server_ingested_total") or env_steps
    return {
        "curve": points,
        "auc": area_under_curve(points, duration_s),
        "final_return": points[-1][3] if points else None,
        "time_to_solve_s": tts,
        "solved": solved,
        "link_bytes": summary.get("link_bytes_total"),
        "link_bytes_by_class": by_class,
        "transferred_priority": window_mean(progress, "transferred_priority", half,
                                            weight_key="transferred"),
        # Where what crossed sat in the buffer node's priority distribution
        # (0 to 100; see crossing_figure).
        "crossing_percentile": crossing_figure(summary),
        "loss": window_mean(progress, "loss", half),
        "probe_loss": window_mean(progress, "probe_loss", half),
        "data_age_s": summary.get("data_age_mean_s"),
        "samples_per_insert": summary.get("samples_per_insert"),
        "train_steps": summary.get("train_steps"),
        "env_steps": env_steps,
        "generation_per_s": generation_rate(progress, half),
        "generation_bytes_per_s": (generation_rate(progress, half) or 0) * slot_bytes or None,
        "coverage": (distinct / generated) if distinct is not None and generated else None,
        "buffer_node_drops": buffer_node_drops(run_dir),
        "link_bytes_down": sum(by_class.get(c) or 0 for c in DOWN_CLASSES),
        "link_bytes_up": sum(by_class.get(c) or 0 for c in UP_CLASSES),
        "auc_updates": area_under_updates(points, updates) if updates else None,
        "updates_reached": (summary.get("train_steps") or 0) / updates if updates else None,
    }


def bootstrap_ci(values, statistic=statistics.fmean, seed=BOOTSTRAP_SEED):
    """95 % percentile bootstrap interval of `statistic` over `values`."""
    values = [v for v in values if metrics_lines.is_figure(v)]
    if len(values) < 2:
        return None
    rng = random.Random(seed)
    stats = sorted(statistic([rng.choice(values) for _ in values])
                   for _ in range(BOOTSTRAP_RESAMPLES))
    return [stats[int(0.025 * len(stats))], stats[int(0.975 * len(stats)) - 1]]


def mean_ci(values):
    """{"mean", "ci95", "n"} of the figures among `values`."""
    figures = [v for v in values if metrics_lines.is_figure(v)]
    return {
        "mean": statistics.fmean(figures) if figures else None,
        "ci95": bootstrap_ci(figures),
        "n": len(figures),
    }


def paired_difference(a_by_seed, b_by_seed):
    """Mean and 95 % interval of a - b over the seeds both have."""
    seeds = sorted(set(a_by_seed) & set(b_by_seed))
    diffs = [a_by_seed[s] - b_by_seed[s] for s in seeds
             if metrics_lines.is_figure(a_by_seed[s]) and metrics_lines.is_figure(b_by_seed[s])]
    out = mean_ci(diffs)
    out["wins"] = sum(1 for d in diffs if d > 0)
    return out


def _paired_interval(d, seed):
    """BCa 95 % bootstrap interval of the mean of d, or None if it fails."""
    try:
        res = scipy.stats.bootstrap((d,), numpy.mean, confidence_level=0.95,
                                    n_resamples=BOOTSTRAP_RESAMPLES, method="BCa",
                                    random_state=numpy.random.default_rng(seed))
    except (ValueError, FloatingPointError):
        return None
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return [lo, hi] if math.isfinite(lo) and math.isfinite(hi) else None


def _finite_p(p):
    p = float(p)
    return p if math.isfinite(p) else None


def paired_test(a_by_seed, b_by_seed, seed=BOOTSTRAP_SEED):
    """Paired comparison of a - b over the seeds where both are figures:
    {"n", "mean", "ci95" (BCa bootstrap), "t_p" (paired t), "wilcoxon_p"
    (signed rank), "wins", "losses"}. Intervals and p-values need
    MIN_PAIRED_SEEDS seeds; p-values are two-sided."""
    seeds = sorted(s for s in set(a_by_seed) & set(b_by_seed)
                   if metrics_lines.is_figure(a_by_seed[s])
                   and metrics_lines.is_figure(b_by_seed[s]))
    d = [float(a_by_seed[s]) - float(b_by_seed[s]) for s in seeds]
    out = {
        "n": len(d),
        "mean": statistics.fmean(d) if d else None,
        "ci95": None,
        "t_p": None,
        "wilcoxon_p": None,
        "wins": sum(1 for x in d if x > 0),
        "losses": sum(1 for x in d if x < 0),
    }
    if len(d) < MIN_PAIRED_SEEDS:
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if min(d) == max(d):
            out["ci95"] = [out["mean"], out["mean"]]
        else:
            out["ci95"] = _paired_interval(numpy.array(d), seed)
            out["t_p"] = _finite_p(scipy.stats.ttest_1samp(d, 0.0).pvalue)
        try:
            out["wilcoxon_p"] = _finite_p(scipy.stats.wilcoxon(d).pvalue)
        except ValueError:
            pass  # every difference is 0
    return out


def holm(p_by_name):
    """Holm's step-down adjustment of {name: p}; a None p stays None."""
    named = sorted(((p, name) for name, p in p_by_name.items() if p is not None),
                   key=lambda pn: pn[0])
    m = len(named)
    out = {name: None for name in p_by_name}
    running = 0.0
    for j, (p, name) in enumerate(named):
        running = max(running, min(1.0, (m - j) * p))
        out[name] = running
    return out


def aa_valid(test):
    """{"valid", "reason"} of an A/A contrast's paired_test: invalid when its
    interval excludes 0, unknown (None) without an interval."""
    ci = test.get("ci95")
    if ci is None:
        if (test.get("n") or 0) < MIN_PAIRED_SEEDS:
            return {"valid": None, "reason": "fewer than %d paired seeds" % MIN_PAIRED_SEEDS}
        return {"valid": None, "reason": "no bootstrap interval"}
    lo, hi = ci
    if lo > 0 or hi < 0:
        return {"valid": False, "reason": "the A/A interval [%.4g, %.4g] excludes 0: "
                "the experiment is invalid" % (lo, hi)}
    return {"valid": True, "reason": "the A/A interval [%.4g, %.4g] includes 0" % (lo, hi)}


def kaplan_meier(times_solved):
    """[(t, fraction still unsolved)] from [(time, solved)], unsolved runs
    censored at their time; starts at (0, 1)."""
    curve = [(0.0, 1.0)]
    at_risk = len(times_solved)
    surviving = 1.0
    for t in sorted(set(t for t, _ in times_solved)):
        events = sum(1 for u, s in times_solved if u == t and s)
        censored = sum(1 for u, s in times_solved if u == t and not s)
        if events and at_risk:
            surviving *= 1.0 - events / at_risk
            curve.append((t, surviving))
        at_risk -= events + censored
    return curve


def median_time_to_solve(curve):
    """The first time the survival curve falls to 0.5 or below, else None."""
    for t, s in curve:
        if s <= 0.5:
            return t
    return None


def mean_curve(curves, index):
    """Per snapshot index k: (mean of x, mean y, ci95 of y, n) over the runs
    that have snapshot k; x is point[index] (0: time, 1: link bytes)."""
    out = []
    k = 0
    while True:
        at_k = [c[k] for c in curves if len(c) > k]
        if len(at_k) < max(1, (len(curves) + 1) // 2):
            break
        ys = [p[3] for p in at_k]
        out.append((statistics.fmean(p[index] for p in at_k), statistics.fmean(ys),
                    bootstrap_ci(ys), len(at_k)))
        k += 1
    return out


def finite_or_none(x):
    return x if metrics_lines.is_figure(x) else None


def round_figures(obj, digits=6):
    """A copy of obj with floats rounded (for a readable summary.json)."""
    if isinstance(obj, float):
        return float("%.*g" % (digits, obj)) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: round_figures(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [round_figures(v, digits) for v in obj]
    return obj
