#!/usr/bin/env python3
"""The statistics of tools/experiment/experiment.py: per-run figures from a run's files,
and their aggregates over seeds (means with bootstrap intervals, paired
differences, Kaplan-Meier survival of time to solve).

Only the Python standard library is used; every random draw comes from a
random.Random with a fixed seed, so a summary is reproducible from the runs.
"""

import json
import math
import os
import random
import re
import statistics

import metrics_lines

BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20261130


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


def area_under_curve(points, duration_s):
    """The mean greedy return over [0, duration_s]: the trapezoidal area under
    the return-vs-time curve divided by duration_s (the last return is held
    to the end when the last snapshot came a little early)."""
    if not points:
        return None
    xs = [p[0] for p in points]
    ys = [p[3] for p in points]
    if xs[-1] < duration_s:
        xs.append(duration_s)
        ys.append(ys[-1])
    area = 0.0
    for i in range(1, len(xs)):
        lo, hi = max(xs[i - 1], 0.0), min(xs[i], duration_s)
        if hi > lo:
            area += (hi - lo) * (ys[i - 1] + ys[i]) / 2.0
    return area / duration_s


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


def run_figures(run_dir, duration_s, solve_return, slot_bytes):
    """One run's figures, defined identically for every arm."""
    progress, summary = metrics_lines.read(os.path.join(run_dir, "metrics.jsonl"))
    summary = summary or {}
    points = return_curve(run_dir)
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
        "link_bytes_by_class": metrics_lines.link_bytes_by_class(summary),
        "transferred_priority": window_mean(progress, "transferred_priority", half,
                                            weight_key="transferred"),
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
