#!/usr/bin/env python3
"""Reproduces the long-haul experiment: replay memory at the buffer node
(--replay_placement=buffer, the proposal) against replay memory at the learner
(--replay_placement=learner, the existing approach).

Every run starts a buffer node, the actors and a learner on this machine with
tools/run_local.py; both placements get identical seeds, actor count,
environment, network and emulated link. The set writes, under --out:

  runs/<link>/<mode>-seed<k>/metrics.jsonl   the learner's metrics of each run
  summary.md, summary.json                   the tables below
  loss.png, priority.png                     loss and transferred priority
                                             over training, both modes
  sweep.png                                  the link sweep (when run)

"After convergence" is defined once, in tools/metrics_lines.py (which reads
the metrics files), and applied to both modes alike: the progress records of
the second half of a run's training steps (train_steps >= half of the run's
final train_steps). Loss after convergence is the mean of their per-interval
mean loss; transferred priority after convergence is the mean |TD error| of
the transitions that crossed the link in those intervals, weighted by how
many crossed in each.

Usage:
  tools/experiment.sh                     # the default set (~30 min)
  tools/experiment.sh --quick             # a smoke run of a few minutes
  tools/experiment.py --help
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import metrics_lines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("buffer", "learner")
MODE_TITLES = {
    "buffer": "replay at buffer node (proposal)",
    "learner": "replay at learner (existing)",
}

# Link presets (one-way delay in microseconds, bandwidth in Gb/s): the
# reference prototype and a constrained link. The sweep below varies both.
LINK_PRESETS = {
    "10km-25g": "10km-25g",
    "100km-1g": "500:1",
}
SWEEP_LINKS = [
    # (label, spec "DELAY_US:GBPS"); 10 km / 25 Gb/s and 100 km / 1 Gb/s are
    # in the main set already.
    ("1km-25g", "5:25"),
    ("100km-10g", "500:10"),
    ("1000km-1g", "5000:1"),
    ("1000km-0.1g", "5000:0.1"),
]


def log(msg):
    print("experiment: " + msg, file=sys.stderr, flush=True)


def mean_std(values):
    values = [v for v in values if metrics_lines.is_figure(v)]
    if not values:
        return None, None
    if len(values) == 1:
        return values[0], 0.0
    return statistics.fmean(values), statistics.stdev(values)


def run_one(args, link_label, link_spec, mode, seed, duration_s):
    out_dir = os.path.join(args.out, "runs", link_label, "%s-seed%d" % (mode, seed))
    os.makedirs(out_dir, exist_ok=True)
    metrics = os.path.join(out_dir, "metrics.jsonl")
    if args.resume and os.path.exists(metrics) and metrics_lines.read(metrics)[1] is not None:
        log("reusing %s" % metrics)
        return metrics
    cmd = [
        sys.executable, os.path.join(ROOT, "tools", "run_local.py"),
        "--mode", mode,
        "--link", link_spec,
        "--seed", str(seed),
        "--env", args.env,
        "--actors", str(args.actors),
        "--duration_s", str(duration_s),
        "--metrics_out", metrics,
        "--out_dir", out_dir,
    ]
    log("run %s %s seed %d (%ds): %s" % (link_label, mode, seed, duration_s, " ".join(cmd)))
    started = time.monotonic()
    with open(os.path.join(out_dir, "run_local.log"), "w") as out:
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    log("  finished in %.0f s, exit code %d" % (time.monotonic() - started, rc))
    if rc != 0:
        raise RuntimeError("run failed (exit %d); see %s" % (rc, out_dir))
    return metrics


def fmt(v, digits=4):
    """A figure for a table: 0.2135, 5800, 58 k, 1.19 M, 292 M."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    for threshold, scale, suffix in ((1e9, 1e9, " G"), (1e6, 1e6, " M"), (1e4, 1e3, " k")):
        if abs(v) >= threshold:
            return "%.3g%s" % (v / scale, suffix)
    if isinstance(v, int) or abs(v) >= 100:
        return "%.0f" % v
    return ("%%.%dg" % digits) % v


def summarize_set(runs):
    """runs: {mode: [figures per seed]} -> per-mode aggregates and ratios."""
    agg = {}
    for mode in MODES:
        figs = runs.get(mode, [])
        agg[mode] = {}
        for key in ("loss_after_convergence", "transferred_priority_after_convergence",
                    "link_bytes_total", "link_transitions_total", "train_steps",
                    "env_steps", "time_to_solve_s", "env_steps_to_solve",
                    "eval_return_last", "wall_s"):
            m, s = mean_std([f.get(key) for f in figs])
            agg[mode][key] = {"mean": m, "std": s}
        agg[mode]["solved_runs"] = sum(1 for f in figs if f.get("solved"))
        agg[mode]["runs"] = len(figs)

    def ratio(key):
        a = agg["buffer"][key]["mean"]
        b = agg["learner"][key]["mean"]
        if a is None or b is None or b == 0:
            return None
        return a / b

    return agg, {
        "loss_buffer_over_learner": ratio("loss_after_convergence"),
        "priority_buffer_over_learner": ratio("transferred_priority_after_convergence"),
        "link_bytes_buffer_over_learner": ratio("link_bytes_total"),
        "link_transitions_buffer_over_learner": ratio("link_transitions_total"),
    }


def markdown_table(link_label, agg, ratios):
    rows = [
        ("loss after convergence", "loss_after_convergence"),
        ("transferred priority after convergence", "transferred_priority_after_convergence"),
        ("transitions across the link", "link_transitions_total"),
        ("bytes across the link", "link_bytes_total"),
        ("training steps", "train_steps"),
        ("environment steps", "env_steps"),
        ("greedy eval return (last)", "eval_return_last"),
        ("time to solve (s), solved runs only", "time_to_solve_s"),
        ("environment steps to solve, solved runs only", "env_steps_to_solve"),
    ]
    lines = ["#### Link `%s`" % link_label, "",
             "| figure (mean ± sd over seeds) | %s | %s | ratio |" % (
                 MODE_TITLES["buffer"], MODE_TITLES["learner"]),
             "| --- | --- | --- | --- |"]
    ratio_for = {
        "loss_after_convergence": ratios["loss_buffer_over_learner"],
        "transferred_priority_after_convergence": ratios["priority_buffer_over_learner"],
        "link_bytes_total": ratios["link_bytes_buffer_over_learner"],
        "link_transitions_total": ratios["link_transitions_buffer_over_learner"],
    }
    for title, key in rows:
        cells = []
        for mode in MODES:
            m, s = agg[mode][key]["mean"], agg[mode][key]["std"]
            cells.append("n/a" if m is None else "%s ± %s" % (fmt(m), fmt(s, 2)))
        r = ratio_for.get(key)
        lines.append("| %s | %s | %s | %s |" % (title, cells[0], cells[1],
                                               "" if r is None else "%.2fx" % r))
    lines.append("| solved runs | %d / %d | %d / %d | |" % (
        agg["buffer"]["solved_runs"], agg["buffer"]["runs"],
        agg["learner"]["solved_runs"], agg["learner"]["runs"]))
    return "\n".join(lines)


def plot_curves(out, link_label, metric_files):
    """loss.png and priority.png: per-mode curves over training steps."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing (tools/install_deps.sh installs it): no plots")
        return []
    colors = {"buffer": "tab:red", "learner": "tab:blue"}
    written = []
    for key, ylabel, name in (
            ("loss", "training loss (mean TD loss per step)", "loss.png"),
            ("transferred_priority", "average priority of transferred experiences",
             "priority.png")):
        fig, ax = plt.subplots(figsize=(7, 4))
        for mode in MODES:
            for i, path in enumerate(metric_files.get(mode, [])):
                progress, _ = metrics_lines.read(path)
                xs, ys = metrics_lines.series(progress, key)
                ax.plot(xs, ys, color=colors[mode], alpha=0.8, linewidth=1,
                        label=MODE_TITLES[mode] if i == 0 else None)
        ax.set_xlabel("training steps")
        ax.set_ylabel(ylabel)
        ax.set_title("%s, link %s" % (ylabel.split(" (")[0], link_label))
        if key == "loss":
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = os.path.join(out, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def plot_sweep(out, sweep):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    labels = [s["link"] for s in sweep]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    x = range(len(labels))
    for mode, off, color in (("buffer", -0.2, "tab:red"), ("learner", 0.2, "tab:blue")):
        axes[0].bar([i + off for i in x],
                    [s["agg"][mode]["link_bytes_total"]["mean"] or 0 for s in sweep],
                    width=0.4, color=color, label=MODE_TITLES[mode])
        axes[1].bar([i + off for i in x],
                    [s["agg"][mode]["train_steps"]["mean"] or 0 for s in sweep],
                    width=0.4, color=color, label=MODE_TITLES[mode])
    axes[2].bar(list(x), [s["ratios"]["priority_buffer_over_learner"] or 0 for s in sweep],
                color="tab:purple")
    axes[2].axhline(1.0, color="black", linewidth=0.8)
    for ax, title in zip(axes, ("bytes across the link", "training steps in the run",
                                "transferred priority, proposal / existing")):
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, rotation=20)
        ax.set_title(title)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "sweep.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(ROOT, "out", "experiment"),
                   help="output folder (default: out/experiment)")
    p.add_argument("--seeds", type=int, default=3, help="seeds per mode (>= 1; default 3)")
    p.add_argument("--duration_s", type=int, default=100,
                   help="wall time of each main run, seconds (default 100)")
    p.add_argument("--links", default="10km-25g,100km-1g",
                   help="comma-separated presets for the main set: %s" %
                   ", ".join(LINK_PRESETS))
    p.add_argument("--sweep", choices=("on", "off"), default="on",
                   help="also run the distance/bandwidth sweep, one seed (default on)")
    p.add_argument("--sweep_duration_s", type=int, default=40,
                   help="wall time of each sweep run, seconds (default 40)")
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--actors", type=int, default=4)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 1 seed, 30 s runs, one link, no sweep")
    p.add_argument("--resume", action="store_true",
                   help="reuse runs whose metrics file is complete")
    p.add_argument("--summarize_only", action="store_true",
                   help="only rebuild the tables and plots from existing runs")
    args = p.parse_args()

    if args.quick:
        args.seeds, args.duration_s, args.links, args.sweep = 1, 30, "10km-25g", "off"
    links = [l.strip() for l in args.links.split(",") if l.strip()]
    for l in links:
        if l not in LINK_PRESETS:
            p.error("--links: unknown preset %r (known: %s)" % (l, ", ".join(LINK_PRESETS)))
    if args.seeds < 1:
        p.error("--seeds must be >= 1, got %d" % args.seeds)
    if args.duration_s < 10 or args.sweep_duration_s < 10:
        p.error("run durations must be >= 10 s")
    os.makedirs(args.out, exist_ok=True)

    started = time.monotonic()
    seeds = list(range(1, args.seeds + 1))
    plan = [(l, LINK_PRESETS[l], args.duration_s, seeds) for l in links]
    if args.sweep == "on":
        plan += [("sweep-" + label, spec, args.sweep_duration_s, [1])
                 for label, spec in SWEEP_LINKS]
    total_runs = sum(len(s) * len(MODES) for _, _, _, s in plan)
    est = sum(d * len(s) * len(MODES) for _, _, d, s in plan)
    log("%d runs, about %d min of runs" % (total_runs, math.ceil(est / 60)))

    results = {"definition_after_convergence":
               "progress records with train_steps >= half of the run's final train_steps",
               "env": args.env, "actors": args.actors, "seeds": seeds, "sets": []}
    done = 0
    for label, spec, duration, set_seeds in plan:
        files = {m: [] for m in MODES}
        for seed in set_seeds:
            for mode in MODES:  # the same seed runs both modes back to back
                if args.summarize_only:
                    path = os.path.join(args.out, "runs", label, "%s-seed%d" % (mode, seed),
                                        "metrics.jsonl")
                else:
                    path = run_one(args, label, spec, mode, seed, duration)
                    done += 1
                    log("progress: %d / %d runs, %.0f min elapsed" % (
                        done, total_runs, (time.monotonic() - started) / 60))
                if os.path.exists(path):
                    files[mode].append(path)
        figures = {m: [metrics_lines.run_figures(*metrics_lines.read(f)) for f in files[m]]
                   for m in MODES}
        agg, ratios = summarize_set(figures)
        results["sets"].append({"link": label, "spec": spec, "duration_s": duration,
                                "seeds": set_seeds, "agg": agg, "ratios": ratios,
                                "runs": figures,
                                "metrics_files": files})

    main_sets = [s for s in results["sets"] if not s["link"].startswith("sweep-")]
    sweep_sets = [s for s in results["sets"] if s["link"].startswith("sweep-")]
    md = ["### Long-haul experiment: %s, %d actors, %d seed(s)" % (
        args.env, args.actors, len(seeds)), "",
        "After convergence: %s." % results["definition_after_convergence"], ""]
    for s in main_sets:
        md += [markdown_table(s["link"], s["agg"], s["ratios"]), ""]
    if sweep_sets:
        md += ["#### Sweep over distance and bandwidth (1 seed, %d s per run)" %
               args.sweep_duration_s, "",
               "| link | loss ratio | priority ratio | bytes, proposal | bytes, existing |"
               " train steps, proposal | train steps, existing |",
               "| --- | --- | --- | --- | --- | --- | --- |"]
        for s in sweep_sets:
            a, r = s["agg"], s["ratios"]
            md.append("| %s (`%s`) | %s | %s | %s | %s | %s | %s |" % (
                s["link"][len("sweep-"):], s["spec"],
                fmt(r["loss_buffer_over_learner"], 3), fmt(r["priority_buffer_over_learner"], 3),
                fmt(a["buffer"]["link_bytes_total"]["mean"]),
                fmt(a["learner"]["link_bytes_total"]["mean"]),
                fmt(a["buffer"]["train_steps"]["mean"]),
                fmt(a["learner"]["train_steps"]["mean"])))
        md.append("")
    elapsed = time.monotonic() - started
    previous = os.path.join(args.out, "summary.json")
    if args.summarize_only and os.path.exists(previous):
        with open(previous) as f:  # keep the wall time of the run itself
            elapsed = json.load(f).get("wall_s", elapsed)
    md.append("Wall time of the whole set: %.1f min." % (elapsed / 60))
    results["wall_s"] = elapsed

    plots = []
    if main_sets:
        plots += plot_curves(args.out, main_sets[0]["link"], main_sets[0]["metrics_files"])
    if sweep_sets:
        sp = plot_sweep(args.out, [dict(s, link=s["link"][len("sweep-"):]) for s in sweep_sets])
        if sp:
            plots.append(sp)
    results["plots"] = plots

    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(results, f, indent=2)
    print("\n".join(md))
    log("wrote %s, %s and %d plot(s)" % (os.path.join(args.out, "summary.md"),
                                         os.path.join(args.out, "summary.json"), len(plots)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)
    except RuntimeError as e:
        log(str(e))
        sys.exit(1)
