#!/usr/bin/env python3
"""The report of tools/experiment/experiment.py: summary.json, summary.md and the plots.

summary.json:
  {"duration_s", "primary", "regimes": [{"name", "title", "link", "link_bound",
    "samples_per_insert", "alpha", "transition_bytes", "generation_per_s",
    "generation_bytes_per_s", "link_bytes_per_s", "load_over_link",
    "arms": [{"name", "seeds", "auc": {"mean", "ci95", "n"},
              "time_to_solve": {"solved", "runs", "median_s", "survival"},
              "link_bytes": {...}, "transferred_priority": {...},
              "probe_loss": {...}, "data_age_s": {...}, ...}],
    "auc_minus_learner_freshest": {arm: {"mean", "ci95", "n", "wins"}}}],
   "auc_minus_learner_freshest_at_equal_steps": {arm: {"mean", "ci95", "n", "wins"}},
   "paper_metrics": {regime: {"<buffer arm>/<learner arm>": {"loss_ratio",
     "probe_loss_ratio", "transferred_priority_ratio",
     "transferred_priority_ratio_alpha0"}}}}
Every {"mean", "ci95", "n"} is over seeds; ci95 is a 95 % percentile
bootstrap interval (null with fewer than 2 seeds).
"""

import json
import os
import statistics

import experiment_stats as st

OUTPUTS = ("summary.json", "summary.md", "return_vs_time.png", "return_vs_bytes.png",
           "survival.png", "regime_map.png")
FIGURES = ("final_return", "link_bytes", "transferred_priority", "loss", "probe_loss",
           "data_age_s", "samples_per_insert", "train_steps", "coverage", "generation_per_s",
           "buffer_node_drops")
BASELINE = "learner-freshest"
PAPER_RATIOS = ("loss_ratio", "probe_loss_ratio", "transferred_priority_ratio",
                "transferred_priority_ratio_alpha0")
COLORS = {"learner-in_order": "tab:blue", "learner-freshest": "tab:cyan",
          "buffer": "tab:red", "buffer-cache": "tab:orange"}


def arm_summary(name, by_seed):
    runs = [by_seed[s] for s in sorted(by_seed)]
    km = st.kaplan_meier([(f["time_to_solve_s"], f["solved"]) for f in runs])
    out = {
        "name": name,
        "seeds": sorted(by_seed),
        "auc": st.mean_ci([f["auc"] for f in runs]),
        "time_to_solve": {"solved": sum(1 for f in runs if f["solved"]), "runs": len(runs),
                          "median_s": st.median_time_to_solve(km), "survival": km},
        "link_bytes_by_class": {c: statistics.fmean(f["link_bytes_by_class"][c] for f in runs)
                                for c in runs[0]["link_bytes_by_class"]} if runs else {},
        "curve_time": st.mean_curve([f["curve"] for f in runs], 0),
        "curve_bytes": st.mean_curve([f["curve"] for f in runs], 1),
    }
    for key in FIGURES:
        out[key] = st.mean_ci([f[key] for f in runs])
    return out


def regime_summary(name, r, slot_bytes, figures, duration_s):
    arms = [arm_summary(arm, by_seed) for arm, by_seed in figures.items() if by_seed]
    gen = [f["generation_per_s"] for by_seed in figures.values() for f in by_seed.values()
           if f["generation_per_s"]]
    gen_rate = statistics.fmean(gen) if gen else None
    link_bps = r["gbps"] * 1e9 / 8
    gen_bps = gen_rate * slot_bytes if gen_rate else None
    auc = {arm: {s: f["auc"] for s, f in by_seed.items()} for arm, by_seed in figures.items()}
    return {
        "name": name, "title": r["title"], "link": r["link"], "delay_us": r["delay_us"],
        "link_gbps": r["gbps"], "samples_per_insert": r["samples_per_insert"],
        "alpha": r["alpha"], "transition_bytes": slot_bytes,
        "generation_per_s_target": r["actors"] * r["actor_rate"],
        "generation_per_s": gen_rate, "generation_bytes_per_s": gen_bps,
        "link_bytes_per_s": link_bps,
        "load_over_link": gen_bps / link_bps if gen_bps else None,
        "link_bound": bool(gen_bps and gen_bps > link_bps),
        "duration_s": duration_s,
        "arms": arms,
        "auc_minus_learner_freshest": {
            arm: st.paired_difference(auc[arm], auc[BASELINE])
            for arm in auc if arm != BASELINE and BASELINE in auc},
    }


def arm_of(regime, name):
    return next((a for a in regime["arms"] if a["name"] == name), None)


def ratio(a, b):
    if a is None or b is None or not a.get("mean") or not b.get("mean"):
        return None
    return a["mean"] / b["mean"]


def paper_metrics(by_name, name, control_suffix):
    """The paper's two metrics in regime `name`: the buffer placement's arms over
    each learner arm (loss, its unweighted probe counterpart, transferred
    priority), with the transferred priority of the alpha = 0 control."""
    r = by_name[name]
    control = by_name.get(name + control_suffix)
    out = {}
    for arm in ("buffer", "buffer-cache"):
        a = arm_of(r, arm)
        if a is None:
            continue
        c = arm_of(control, arm) if control else None
        for base_name in ("learner-in_order", "learner-freshest"):
            base = arm_of(r, base_name)
            if base is None:
                continue
            out["%s/%s" % (arm, base_name)] = {
                "loss_ratio": ratio(a["loss"], base["loss"]),
                "probe_loss_ratio": ratio(a["probe_loss"], base["probe_loss"]),
                "transferred_priority_ratio": ratio(a["transferred_priority"],
                                                    base["transferred_priority"]),
                "transferred_priority_ratio_alpha0":
                    ratio(c["transferred_priority"], base["transferred_priority"])
                    if c else None,
            }
    return out


def equal_steps(by_name, primary, suffix, auc_by_seed):
    """The buffer placement's arms in `primary` minus the learner placement
    (freshest) of the equal-train-steps control, paired by seed."""
    control = by_name.get(primary + suffix)
    base = auc_by_seed.get((primary + suffix, BASELINE))
    if control is None or base is None:
        return {}
    return {arm: st.paired_difference(auc_by_seed[(primary, arm)], base)
            for arm in ("buffer", "buffer-cache") if (primary, arm) in auc_by_seed}


def assemble(regimes, primary, paper_regimes, control_suffix, equal_steps_suffix, duration_s,
             auc_by_seed):
    """auc_by_seed: {(regime, arm): {seed: AUC}}."""
    by_name = {r["name"]: r for r in regimes}
    return {"duration_s": duration_s, "primary": primary, "regimes": regimes,
            "paper_metrics": {name: paper_metrics(by_name, name, control_suffix)
                              for name in paper_regimes if name in by_name},
            "auc_minus_learner_freshest_at_equal_steps": equal_steps(
                by_name, primary, equal_steps_suffix, auc_by_seed)}


def cell(f, scale=1.0, digits=3):
    if f is None or f.get("mean") is None:
        return "n/a"
    text = "%.*g" % (digits, f["mean"] / scale)
    if f.get("ci95"):
        text += " [%.*g, %.*g]" % (digits, f["ci95"][0] / scale, digits, f["ci95"][1] / scale)
    return text


def regime_markdown(r, titles):
    lines = ["### %s (`%s`)" % (r["title"], r["name"]), ""]
    lines.append(
        "Link %s (one-way delay %d us, %.4g Gb/s = %.3g MB/s); transitions of %d B; "
        "generation %.0f transitions/s (target %d) = %.3g MB/s, **%.2fx the link** (%s); "
        "target samples per insert %g; alpha %g; %g s runs." % (
            r["link"], r["delay_us"], r["link_gbps"], r["link_bytes_per_s"] / 1e6,
            r["transition_bytes"], r["generation_per_s"] or 0, r["generation_per_s_target"],
            (r["generation_bytes_per_s"] or 0) / 1e6, r["load_over_link"] or 0,
            "link-bound" if r["link_bound"] else "link not binding",
            r["samples_per_insert"], r["alpha"], r["duration_s"]))
    lines += ["", "| arm | seeds | AUC: mean greedy return over the run | final return | "
              "solved (KM median s) | link MB | transferred priority | loss (IS-weighted) | "
              "probe loss | data age s | achieved SPI | train steps | coverage | "
              "buffer-node drops |",
              "|" + " --- |" * 14]
    for a in r["arms"]:
        tts = a["time_to_solve"]
        row = "| %s | %d | %s | %s | %d/%d (%s) |" + " %s |" * 9
        lines.append(row % (
            titles.get(a["name"], a["name"]), len(a["seeds"]), cell(a["auc"]),
            cell(a["final_return"]), tts["solved"], tts["runs"],
            "%.0f" % tts["median_s"] if tts["median_s"] is not None else "-",
            cell(a["link_bytes"], 1e6), cell(a["transferred_priority"]), cell(a["loss"]),
            cell(a["probe_loss"]), cell(a["data_age_s"]), cell(a["samples_per_insert"]),
            cell(a["train_steps"]), cell(a["coverage"]), cell(a["buffer_node_drops"])))
    diffs = r["auc_minus_learner_freshest"]
    if diffs:
        lines += ["", "AUC minus the learner placement (freshest), paired by seed:", ""]
        for arm, d in diffs.items():
            lines.append("- %s: %s (higher in %d of %d seeds)" % (
                titles.get(arm, arm), cell(d), d["wins"], d["n"]))
    lines += ["", "Link bytes by class (mean MB per run):", ""]
    for a in r["arms"]:
        lines.append("- %s: %s" % (titles.get(a["name"], a["name"]), ", ".join(
            "%s %.2f" % (c, v / 1e6) for c, v in a["link_bytes_by_class"].items())))
    return "\n".join(lines)


def markdown(summary, titles):
    out = ["# The long-haul experiment: results", "",
           "Generated by `tools/experiment/experiment.py` from the runs under `runs/` (raw runs "
           "are not kept in git: `tools/experiment/experiment.sh` makes them again). "
           "Intervals are 95 %% "
           "bootstrap intervals over seeds. AUC is the area under the greedy-return curve "
           "(offline evaluation of snapshots every 2 s, 100 episodes each) divided by the run "
           "length: the mean greedy return over the run, the primary measure. Loss, "
           "transferred priority and probe loss are means over the second half of each run "
           "(the same wall-clock window in every arm). Coverage: distinct transitions that "
           "crossed the link per transition generated (for the learner placement, 1 - coverage "
           "is what its forwarding lost). Buffer-node drops: transitions the buffer node "
           "abandoned, lost to overrun or found torn (its log's last stats line). Primary "
           "comparison: `%s`." %
           summary["primary"], ""]
    for r in summary["regimes"]:
        out += [regime_markdown(r, titles), ""]
    eq = summary.get("auc_minus_learner_freshest_at_equal_steps")
    if eq:
        out += ["### `%s`: the buffer placement against the learner placement at equal train steps" %
                summary["primary"], "",
                "AUC of the buffer placement's arms minus that of the learner placement (freshest) "
                "run at the replay ratio that gives it the buffer placement's train steps, paired by "
                "seed:", ""]
        for arm, d in eq.items():
            out.append("- %s: %s (higher in %d of %d seeds)" % (titles.get(arm, arm), cell(d),
                                                               d["wins"], d["n"]))
        out.append("")
    for name, pm in summary["paper_metrics"].items():
        out += ["### The paper's two metrics in `%s` (ratios of means)" % name, "",
                "| buffer arm / learner arm | loss (IS-weighted) | probe loss | "
                "transferred priority, alpha 0.6 | transferred priority, alpha 0 (control) |",
                "| --- | --- | --- | --- | --- |"]
        for pair, m in pm.items():
            arm, base = pair.split("/")
            cells = ["%.2fx" % m[k] if m.get(k) else "n/a" for k in PAPER_RATIOS]
            out.append("| %s / %s | %s |" % (titles.get(arm, arm), titles.get(base, base),
                                            " | ".join(cells)))
        out.append("")
    return "\n".join(out) + "\n"


def plots(out_dir, summary, titles):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("experiment: matplotlib missing (tools/install_deps.sh installs it): no plots")
        return
    regimes = summary["regimes"]
    for key, xlabel, scale, name in (("curve_time", "training time (s)", 1.0, "return_vs_time.png"),
                                     ("curve_bytes", "bytes across the link (MB)", 1e6,
                                      "return_vs_bytes.png")):
        fig, axes = plt.subplots(1, len(regimes), figsize=(5 * len(regimes), 4), squeeze=False)
        for ax, r in zip(axes[0], regimes):
            for a in r["arms"]:
                pts = a[key]
                xs = [p[0] / scale for p in pts]
                ax.plot(xs, [p[1] for p in pts], color=COLORS[a["name"]],
                        label=titles.get(a["name"], a["name"]))
                band = [(x, p[2]) for x, p in zip(xs, pts) if p[2]]
                if band:
                    ax.fill_between([b[0] for b in band], [b[1][0] for b in band],
                                    [b[1][1] for b in band], color=COLORS[a["name"]], alpha=0.15)
            ax.set_title(r["name"], fontsize=9)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("greedy return (mean, 95 % CI)")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, name), dpi=110)
        plt.close(fig)
    fig, axes = plt.subplots(1, len(regimes), figsize=(5 * len(regimes), 4), squeeze=False)
    for ax, r in zip(axes[0], regimes):
        for a in r["arms"]:
            km = a["time_to_solve"]["survival"] + [(r["duration_s"], None)]
            xs = [p[0] for p in km]
            ys = [p[1] if p[1] is not None else km[-2][1] for p in km]
            ax.step(xs, ys, where="post", color=COLORS[a["name"]],
                    label=titles.get(a["name"], a["name"]))
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(r["name"], fontsize=9)
        ax.set_xlabel("training time (s)")
        ax.set_ylabel("fraction of runs not yet solved")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "survival.png"), dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(2.2 * len(regimes) + 3, 4))
    arms = list(COLORS)
    width = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        for j, r in enumerate(regimes):
            a = arm_of(r, arm)
            if a is None or a["auc"]["mean"] is None:
                continue
            ci = a["auc"]["ci95"] or [a["auc"]["mean"]] * 2
            ax.bar(j + i * width, a["auc"]["mean"], width, color=COLORS[arm],
                   yerr=[[a["auc"]["mean"] - ci[0]], [ci[1] - a["auc"]["mean"]]],
                   label=titles.get(arm, arm) if j == 0 else None)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(regimes))])
    ax.set_xticklabels([r["name"] for r in regimes], fontsize=8)
    ax.set_ylabel("AUC: mean greedy return over the run")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "regime_map.png"), dpi=110)
    plt.close(fig)


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
