#!/usr/bin/env python3
"""The report of tools/experiment/experiment.py: summary.json, summary.md and the plots.

summary.json:
  {"design": {"updates_per_s", "governed", "updates", "batch_size", "delay_us",
              "capacity_s", "eval_episodes", "snapshot_updates", "env", "observation"},
   "primary": [cell, ...],
   "cells": [{"name", "title", "rho", "u", "kappa", "slot_bytes", "generation_per_s",
              "link", "link_bytes_per_s", "samples_per_insert", "alpha", "capacity",
              "capacity_s", "local_capacity", "local_capacity_s", "duration_s",
              "arms": [{"name", "seeds", "auc": {"mean", "ci95", "n"}, "auc_updates",
                        "final_return", "updates_reached", "link_bytes_down",
                        "link_bytes_up", "transferred_priority", ..., "link_bytes_by_class",
                        "curve_time", "curve_bytes", "curve_updates"}],
              "auc_minus_learner_freshest": {arm: paired test}}],
   "contrasts": [{"cell", "a", "b", "test": paired test, "holm_p"}],
   "aa": [{"cell", "a", "b", "test", "valid", "reason"}],
   "paper_metrics": {cell: {"<buffer arm>/<learner arm>": {ratios}}},
   "map": [{"cell", "best", "ranking": [[arm, AUC mean], ...]}]}
A paired test is experiment_stats.paired_test's {"n", "mean", "ci95" (BCa),
"t_p", "wilcoxon_p", "wins", "losses"} of a minus b over the seeds both
have. Every {"mean", "ci95", "n"} of one arm is over seeds, with a 95 %
percentile bootstrap interval (null with fewer than 2 seeds).
"""

import json
import os
import statistics

import experiment_stats as st

OUTPUTS = ("summary.json", "summary.md", "return_vs_updates.png", "return_vs_time.png",
           "return_vs_bytes.png", "placement_map.png")
FIGURES = ("auc_updates", "final_return", "updates_reached", "link_bytes", "link_bytes_down",
           "link_bytes_up", "transferred_priority", "crossing_percentile", "loss", "probe_loss",
           "data_age_s", "samples_per_insert", "train_steps", "coverage", "generation_per_s",
           "buffer_node_drops")
BASELINE = "learner-freshest"
PAPER_RATIOS = ("loss_ratio", "probe_loss_ratio", "transferred_priority_ratio",
                "transferred_priority_ratio_alpha0")
COLORS = {"learner-fifo": "tab:blue", "learner-freshest": "tab:cyan",
          "learner-uniform": "tab:purple", "hybrid": "tab:green", "buffer": "tab:red",
          "buffer-cache": "tab:orange", "hybrid-aa": "tab:olive"}
CELL_KEYS = ("name", "title", "rho", "u", "kappa", "slot_bytes", "generation_per_s", "link",
             "link_bytes_per_s", "samples_per_insert", "alpha", "capacity", "capacity_s",
             "local_capacity", "local_capacity_s", "duration_s", "min_replay", "updates_per_s")


def arm_summary(name, by_seed):
    runs = [by_seed[s] for s in sorted(by_seed)]
    out = {
        "name": name,
        "seeds": sorted(by_seed),
        "auc": st.mean_ci([f["auc"] for f in runs]),
        "solved": sum(1 for f in runs if f["solved"]),
        "link_bytes_by_class": {c: statistics.fmean(f["link_bytes_by_class"][c] for f in runs)
                                for c in runs[0]["link_bytes_by_class"]} if runs else {},
        "curve_time": st.mean_curve([f["curve"] for f in runs], 0),
        "curve_bytes": st.mean_curve([f["curve"] for f in runs], 1),
        "curve_updates": st.mean_curve([f["curve"] for f in runs], 2),
    }
    for key in FIGURES:
        out[key] = st.mean_ci([f.get(key) for f in runs])
    return out


def cell_summary(c, figures):
    """One cell's numbers, its arms, and every arm against the learner
    placement (freshest), paired by seed. figures: {arm: {seed: run figures}}."""
    out = {k: c[k] for k in CELL_KEYS}
    out["arms"] = [arm_summary(arm, by_seed) for arm, by_seed in figures.items() if by_seed]
    out["auc_by_seed"] = {arm: {str(s): f["auc"] for s, f in by_seed.items()}
                          for arm, by_seed in figures.items()}
    base = figures.get(BASELINE, {})
    out["auc_minus_learner_freshest"] = {
        arm: st.paired_test({s: f["auc"] for s, f in by_seed.items()},
                            {s: f["auc"] for s, f in base.items()})
        for arm, by_seed in figures.items() if arm != BASELINE and base}
    return out


def arm_of(c, name):
    return next((a for a in c["arms"] if a["name"] == name), None)


def ratio(a, b):
    if a is None or b is None or not a.get("mean") or not b.get("mean"):
        return None
    return a["mean"] / b["mean"]


def paper_metrics(by_name, name, control_suffix):
    """The paper's two metrics in cell `name`: the buffer placement's arms over
    each learner-side arm (loss, its unweighted probe counterpart, transferred
    priority), with the transferred priority of the alpha = 0 control."""
    c = by_name[name]
    control = by_name.get(name + control_suffix)
    out = {}
    for arm in ("buffer", "buffer-cache"):
        a = arm_of(c, arm)
        if a is None:
            continue
        ctl = arm_of(control, arm) if control else None
        for base_name in ("learner-fifo", "learner-freshest", "hybrid"):
            base = arm_of(c, base_name)
            if base is None:
                continue
            out["%s/%s" % (arm, base_name)] = {
                "loss_ratio": ratio(a["loss"], base["loss"]),
                "probe_loss_ratio": ratio(a["probe_loss"], base["probe_loss"]),
                "transferred_priority_ratio": ratio(a["transferred_priority"],
                                                    base["transferred_priority"]),
                "transferred_priority_ratio_alpha0":
                    ratio(ctl["transferred_priority"], base["transferred_priority"])
                    if ctl else None,
            }
    return out


def by_seed_of(c, arm):
    return {int(s): v for s, v in c["auc_by_seed"].get(arm, {}).items()}


def assemble(cells, design, primary, contrasts, aa, control_suffix):
    """The summary: the cells, the named contrasts in the primary cells
    (Holm-corrected together, on the paired t-test's p; a contrast whose
    arms were not run, as under --arms, is left out), the A/A check."""
    by_name = {c["name"]: c for c in cells}
    named = []
    for name in primary:
        if name not in by_name:
            continue
        for a, b in contrasts:
            if not (arm_of(by_name[name], a) and arm_of(by_name[name], b)):
                continue
            named.append({"cell": name, "a": a, "b": b, "test": st.paired_test(
                by_seed_of(by_name[name], a), by_seed_of(by_name[name], b))})
    holm = st.holm({i: n["test"]["t_p"] for i, n in enumerate(named)})
    for i, n in enumerate(named):
        n["holm_p"] = holm[i]
    checks = []
    for name in primary:
        if name in by_name and arm_of(by_name[name], aa[0]):
            test = st.paired_test(by_seed_of(by_name[name], aa[0]), by_seed_of(by_name[name], aa[1]))
            checks.append(dict({"cell": name, "a": aa[0], "b": aa[1], "test": test},
                               **st.aa_valid(test)))
    ranking = []
    for c in cells:
        if c["name"].endswith(control_suffix):
            continue
        arms = sorted(((a["name"], a["auc"]["mean"]) for a in c["arms"]
                       if a["auc"]["mean"] is not None and a["name"] != aa[0]),
                      key=lambda x: -x[1])
        ranking.append({"cell": c["name"], "best": arms[0][0] if arms else None,
                        "ranking": [list(x) for x in arms]})
    return {"design": design, "primary": [p for p in primary if p in by_name], "cells": cells,
            "contrasts": named, "aa": checks, "map": ranking,
            "paper_metrics": {c["name"]: paper_metrics(by_name, c["name"], control_suffix)
                              for c in cells if not c["name"].endswith(control_suffix)}}


def fmt(f, scale=1.0, digits=3):
    """"mean [lo, hi]" of a {"mean", "ci95"} figure, "n/a" without a mean."""
    if f is None or f.get("mean") is None:
        return "n/a"
    text = "%.*g" % (digits, f["mean"] / scale)
    if f.get("ci95"):
        text += " [%.*g, %.*g]" % (digits, f["ci95"][0] / scale, digits, f["ci95"][1] / scale)
    return text


def p_text(p):
    return "n/a" if p is None else "%.3g" % p


def cell_markdown(c, design, titles):
    lines = ["### %s (`%s`)" % (c["title"], c["name"]), ""]
    lines.append(
        "rho %g: generation %.4g transitions/s of %d B = %.3g MB/s over a link of %.3g MB/s "
        "(`%s`); u %g updates per generated transition, kappa %g (rate limiter at samples per insert %g); "
        "alpha %g; memories of %d slots at the buffer node (%.1f s of data) and %d at the "
        "learner (%.1f s at the rate that can arrive); %d transitions before training; "
        "window %.1f s." % (
            c["rho"], c["generation_per_s"], c["slot_bytes"],
            c["generation_per_s"] * c["slot_bytes"] / 1e6, c["link_bytes_per_s"] / 1e6,
            c["link"], c["u"], c["kappa"], c["samples_per_insert"], c["alpha"], c["capacity"],
            c["capacity_s"], c["local_capacity"], c["local_capacity_s"], c["min_replay"],
            c["duration_s"]))
    lines += ["", "| arm | seeds | AUC (mean greedy return over the window) | AUC over updates | "
              "final return | updates reached / %d | link MB down | link MB up | "
              "transferred priority | crossing percentile | probe loss | data age s | "
              "coverage |" % design["updates"],
              "|" + " --- |" * 13]
    for a in c["arms"]:
        lines.append(("| %s | %d |" + " %s |" * 11) % (
            titles.get(a["name"], a["name"]), len(a["seeds"]), fmt(a["auc"]),
            fmt(a["auc_updates"]), fmt(a["final_return"]), fmt(a["updates_reached"]),
            fmt(a["link_bytes_down"], 1e6), fmt(a["link_bytes_up"], 1e6),
            fmt(a["transferred_priority"]), fmt(a.get("crossing_percentile")),
            fmt(a["probe_loss"]), fmt(a["data_age_s"]), fmt(a["coverage"])))
    diffs = c["auc_minus_learner_freshest"]
    if diffs:
        lines += ["", "AUC minus the learner placement (freshest), paired by seed (BCa 95 % "
                  "interval; paired t and Wilcoxon p, uncorrected):", ""]
        for arm, d in diffs.items():
            lines.append("- %s: %s; t p %s, Wilcoxon p %s; higher in %d of %d seeds" % (
                titles.get(arm, arm), fmt(d), p_text(d["t_p"]), p_text(d["wilcoxon_p"]),
                d["wins"], d["n"]))
    return "\n".join(lines)


def markdown(summary, titles):
    d = summary["design"]
    out = ["# The placement experiment: results", "",
           "Generated by `tools/experiment/experiment.py` from the runs under `runs/` (raw runs "
           "are not kept in git: `tools/experiment/experiment.sh` makes them again). %s, %s "
           "observations. Every arm %s; each run stops at %d updates or at its window's end. "
           "AUC is the area under the greedy-return curve over the window divided by its "
           "length (offline evaluation of snapshots every %d updates' worth of time, %d "
           "episodes each): with the governor, equal time is equal updates for every arm that "
           "keeps the rate, and an arm that cannot keep it is charged for the updates it "
           "lacks (its column `updates reached`). Intervals over seeds are 95 %% bootstrap "
           "intervals (BCa for paired differences); with fewer than 5 seeds no paired "
           "interval or p-value is claimed." % (
               d["env"], d["observation"],
               "trains at %g updates/s at most (the governor)" % d["updates_per_s"]
               if d["governed"] else "trains at its own maximum rate (no governor)",
               d["updates"], d["snapshot_updates"], d["eval_episodes"]), ""]
    if summary["contrasts"]:
        out += ["## The named contrasts (primary cells, Holm-corrected together)", "",
                "| cell | contrast (AUC, a minus b) | n | mean [BCa 95 %] | t p | Wilcoxon p | "
                "Holm p | a higher |", "|" + " --- |" * 8]
        for n in summary["contrasts"]:
            t = n["test"]
            out.append("| `%s` | %s minus %s | %d | %s | %s | %s | %s | %d of %d |" % (
                n["cell"], titles.get(n["a"], n["a"]), titles.get(n["b"], n["b"]), t["n"],
                fmt(t), p_text(t["t_p"]), p_text(t["wilcoxon_p"]), p_text(n["holm_p"]),
                t["wins"], t["n"]))
        out.append("")
    for check in summary["aa"]:
        out.append("A/A check in `%s` (%s minus %s): %s; %s." % (
            check["cell"], check["a"], check["b"], fmt(check["test"]),
            {True: "valid", False: "**INVALID**", None: "not decided"}[check["valid"]]
            + " (" + check["reason"] + ")"))
    out += ["", "## The map: arms by AUC in each cell", ""]
    for m in summary["map"]:
        out.append("- `%s`: %s" % (m["cell"], ", ".join(
            "%s %.3g" % (titles.get(arm, arm), auc) for arm, auc in m["ranking"])))
    out.append("")
    for c in summary["cells"]:
        out += [cell_markdown(c, d, titles), ""]
    for name, pm in summary["paper_metrics"].items():
        if not pm:
            continue
        out += ["### The paper's two metrics in `%s` (ratios of means)" % name, "",
                "| buffer arm / other arm | loss (IS-weighted) | probe loss | "
                "transferred priority | transferred priority, alpha 0 (control) |",
                "| --- | --- | --- | --- | --- |"]
        for pair, m in pm.items():
            arm, base = pair.split("/")
            cells = ["%.2fx" % m[k] if m.get(k) else "n/a" for k in PAPER_RATIOS]
            out.append("| %s / %s | %s |" % (titles.get(arm, arm), titles.get(base, base),
                                            " | ".join(cells)))
        out.append("")
    return "\n".join(out) + "\n"


def curve_plot(plt, out_dir, cells, titles, key, xlabel, scale, name):
    fig, axes = plt.subplots(1, len(cells), figsize=(5 * len(cells), 4), squeeze=False)
    for ax, c in zip(axes[0], cells):
        for a in c["arms"]:
            pts = a[key]
            xs = [p[0] / scale for p in pts]
            color = COLORS.get(a["name"], "black")
            ax.plot(xs, [p[1] for p in pts], color=color, label=titles.get(a["name"], a["name"]))
            band = [(x, p[2]) for x, p in zip(xs, pts) if p[2]]
            if band:
                ax.fill_between([b[0] for b in band], [b[1][0] for b in band],
                                [b[1][1] for b in band], color=color, alpha=0.15)
        ax.set_title(c["name"], fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("greedy return (mean, 95 % CI)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)


def map_plot(plt, out_dir, cells, titles):
    fig, ax = plt.subplots(figsize=(2.4 * len(cells) + 3, 4))
    arms = [a for a in COLORS if any(arm_of(c, a) for c in cells)]
    width = 0.8 / max(1, len(arms))
    for i, arm in enumerate(arms):
        for j, c in enumerate(cells):
            a = arm_of(c, arm)
            if a is None or a["auc"]["mean"] is None:
                continue
            ci = a["auc"]["ci95"] or [a["auc"]["mean"]] * 2
            ax.bar(j + i * width, a["auc"]["mean"], width, color=COLORS[arm],
                   yerr=[[a["auc"]["mean"] - ci[0]], [ci[1] - a["auc"]["mean"]]],
                   label=titles.get(arm, arm) if j == 0 else None)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cells))])
    ax.set_xticklabels(["%s\nkappa %g" % (c["name"], c["kappa"]) for c in cells], fontsize=8)
    ax.set_ylabel("AUC: mean greedy return over the window")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "placement_map.png"), dpi=110)
    plt.close(fig)


def plots(out_dir, summary, titles):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("experiment: matplotlib missing (tools/install_deps.sh installs it): no plots")
        return
    cells = summary["cells"]
    for key, xlabel, scale, name in (
            ("curve_updates", "updates (train steps)", 1.0, "return_vs_updates.png"),
            ("curve_time", "training time (s)", 1.0, "return_vs_time.png"),
            ("curve_bytes", "bytes across the link (MB)", 1e6, "return_vs_bytes.png")):
        curve_plot(plt, out_dir, cells, titles, key, xlabel, scale, name)
    map_plot(plt, out_dir, cells, titles)


def write(out_dir, summary, titles):
    """Writes summary.json, then summary.md and the plots from exactly what
    it holds, so that the report can be redrawn from summary.json alone."""
    summary = st.round_figures(summary)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(markdown(summary, titles))
    plots(out_dir, summary, titles)


def redraw(out_dir, titles):
    """summary.md and the plots again from out_dir's summary.json. ValueError
    for a summary this report cannot draw (one of the time-window design)."""
    with open(os.path.join(out_dir, "summary.json")) as f:
        summary = json.load(f)
    if "design" not in summary or "cells" not in summary:
        raise ValueError("%s is not a summary of this experiment's design (no \"design\" and "
                         "\"cells\"): run the experiment again" %
                         os.path.join(out_dir, "summary.json"))
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(markdown(summary, titles))
    plots(out_dir, summary, titles)
