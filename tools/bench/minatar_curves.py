#!/usr/bin/env python3
"""MinAtar learning curves through the whole system: DQN on each game for
--duration_s per seed (replay server, 4 C++ actors, C++ learner, buffer
placement, native observations, MinAtar's defaults as tools/bench/minatar_bench.py
runs them), the greedy return of parameter snapshots against environment
steps and against wall time.

    bazel build //replay_server:replay_server //actor_client:actor \\
        //learner_client:learner //tools/experiment:evaluate_snapshots //python:dreplay
    tools/bench/minatar_curves.py --run_flag=--pin_cpus=0:1            # 2 games x 3 seeds x 1 h
    tools/bench/minatar_curves.py --games MinAtar/Breakout --seeds 1 --duration_s 120 \\
        --results_dir /tmp/curves                                 # a short look
    tools/bench/minatar_curves.py --plot_only                           # redraw from results

For each game and seed it:
  1. runs tools/launch/run_local.py for --duration_s, the learner writing a parameter
     snapshot every --snapshot_interval_s (and evaluating nothing itself, so
     that evaluation never takes the learner's CPU);
  2. evaluates every snapshot offline with tools/experiment/evaluate_snapshots
     (--episodes greedy episodes, episode i from reset(seed=1000003 + i));
  3. writes RESULTS_DIR/<game>-seed<S>.json: one point per snapshot (wall
     time, environment steps, train steps, mean return and its 95 % interval)
     and the run's actor, learner and link rates.
A result that is already there is kept (delete it to rerun). Then it draws
RESULTS_DIR/curves.png (return against environment steps and against wall
time, one line per seed, the random policy's mean, and MinAtar's published
DQN figure at 5 M frames) and RESULTS_DIR/summary.md. MinAtar has no frame
skip, so a frame is an environment step. Raw runs go to --runs_dir (default
a new /tmp directory) and are not meant for git.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import minatar_bench

ROOT = minatar_bench.ROOT
DEFAULT_RESULTS = os.path.join(ROOT, "docs", "minatar", "curves")
EVAL_SEED = minatar_bench.EVAL_SEED
# MinAtar's published DQN (Young & Tian 2019, the repository's learning-curves
# figure): the approximate average return at 5 M frames, read off the figure.
PUBLISHED_5M = {"MinAtar/Breakout": 10.0, "MinAtar/SpaceInvaders": 43.0}
PUBLISHED_FRAMES = 5e6


def log(msg):
    print("minatar_curves: " + msg, file=sys.stderr, flush=True)


def slug(env):
    return env.split("/", 1)[1]


def train(args, env, seed, run_dir):
    """One run_local run; returns its summary record."""
    metrics = os.path.join(run_dir, "metrics.jsonl")
    argv = [sys.executable, os.path.join(ROOT, "tools", "launch", "run_local.py"),
            "--replay_placement", "buffer", "--env", env, "--observation", "native",
            "--actors", str(args.actors), "--seed", str(seed),
            "--duration_s", repr(float(args.duration_s)), "--eval_interval_s", "0",
            "--progress_interval_s", "60", "--metrics_out", metrics, "--out_dir", run_dir,
            "--bin_dir", args.bin_dir,
            "--learner_flag=--snapshot_dir=" + os.path.join(run_dir, "snap"),
            "--learner_flag=--snapshot_interval_s=%r" % args.snapshot_interval_s] + args.run_flag
    log("%s seed %d: training %.0f s (%s)" % (env, seed, args.duration_s, run_dir))
    rc = subprocess.call(argv, cwd=ROOT, stdout=sys.stderr)
    if rc != 0:
        raise RuntimeError("run_local.py exited with code %d; logs in %s" % (rc, run_dir))
    with open(metrics) as f:
        summary = [json.loads(l) for l in f if l.strip() and '"summary"' in l]
    if not summary:
        raise RuntimeError("no summary record in " + metrics)
    return summary[-1]


def evaluate(args, env, run_dir):
    """The snapshots' clock and counters joined with their greedy returns."""
    snap = os.path.join(run_dir, "snap")
    argv = [os.path.join(args.bin_dir, "tools", "experiment", "evaluate_snapshots"),
            "--snapshot_dir=" + snap, "--env=" + env, "--episodes=%d" % args.episodes,
            "--seed=%d" % EVAL_SEED]
    log("evaluating the snapshots in %s, %d episodes each" % (snap, args.episodes))
    out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True).stdout
    evals = {e["index"]: e for e in map(json.loads, out.splitlines())}
    points = []
    with open(os.path.join(snap, "snapshots.jsonl")) as f:
        for line in f:
            s = json.loads(line)
            e = evals.get(s["index"])
            if e is None:
                continue
            half = 1.96 * e["eval_return_std"] / args.episodes ** 0.5
            points.append({"index": s["index"], "wall_s": s["wall_s"], "env_steps": s["env_steps"],
                           "train_steps": s["train_steps"], "return_mean": e["eval_return_mean"],
                           "return_ci95": [e["eval_return_mean"] - half,
                                           e["eval_return_mean"] + half]})
    if not points:
        raise RuntimeError("no snapshot evaluated in " + snap)
    return points


def one_run(args, env, seed, dreplay):
    path = os.path.join(args.results_dir, "%s-seed%d.json" % (slug(env), seed))
    if os.path.exists(path):
        log("%s exists, kept" % path)
        return
    run_dir = os.path.join(args.runs_dir, "%s-seed%d" % (slug(env), seed))
    os.makedirs(run_dir, exist_ok=True)
    summary = train(args, env, seed, run_dir)
    points = evaluate(args, env, run_dir)
    rand = minatar_bench.random_returns(dreplay, env, args.episodes, seed)
    r_mean, r_half = minatar_bench.interval(rand)
    wall = summary["wall_s"]
    result = {
        "env": env, "seed": seed, "observation": "native", "placement": "buffer",
        "actors": args.actors, "duration_s": args.duration_s, "episodes": args.episodes,
        "run_flags": args.run_flag, "points": points,
        "frames": summary["env_steps"], "train_steps": summary["train_steps"], "wall_s": wall,
        "actor_env_steps_per_s": summary["env_steps"] / wall,
        "learner_train_steps_per_s": summary["train_steps"] / wall,
        "link_bytes_per_s": summary["link_bytes_total"] / wall,
        "link_transitions_per_s": summary["link_transitions_total"] / wall,
        "random_return_mean": r_mean, "random_return_ci95": [r_mean - r_half, r_mean + r_half],
    }
    os.makedirs(args.results_dir, exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)
    last = points[-1]
    log("%s seed %d: return %.2f at %d frames (%.0f s); wrote %s" % (
        env, seed, last["return_mean"], last["env_steps"], last["wall_s"], path))


def load_results(results_dir):
    results = []
    for name in sorted(os.listdir(results_dir)):
        if name.endswith(".json") and "-seed" in name:
            with open(os.path.join(results_dir, name)) as f:
                results.append(json.load(f))
    return results


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    games = sorted({r["env"] for r in results})
    fig, axes = plt.subplots(len(games), 2, figsize=(11, 3.6 * len(games)), squeeze=False)
    for row, env in zip(axes, games):
        runs = [r for r in results if r["env"] == env]
        for r in runs:
            ys = [p["return_mean"] for p in r["points"]]
            lo = [p["return_ci95"][0] for p in r["points"]]
            hi = [p["return_ci95"][1] for p in r["points"]]
            for ax, key, scale in ((row[0], "env_steps", 1e6), (row[1], "wall_s", 60.0)):
                xs = [p[key] / scale for p in r["points"]]
                line, = ax.plot(xs, ys, label="seed %d" % r["seed"])
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15)
        rand = sum(r["random_return_mean"] for r in runs) / len(runs)
        for ax in row:
            ax.axhline(rand, color="gray", linestyle=":", label="random policy")
            ax.set_ylabel("greedy return")
            ax.set_title(env)
        if env in PUBLISHED_5M:
            # A point where the published figure stands, so that the frames
            # a run reached and the published 5 M are on one axis.
            row[0].plot([PUBLISHED_FRAMES / 1e6], [PUBLISHED_5M[env]], marker="*", markersize=12,
                        color="black", linestyle="none",
                        label="MinAtar DQN at %d M frames (published, approx.)" %
                        (PUBLISHED_FRAMES / 1e6))
            row[0].set_xlim(left=0, right=PUBLISHED_FRAMES / 1e6 * 1.05)
        row[0].set_xlabel("frames (environment steps), millions")
        row[1].set_xlabel("wall time, minutes")
        row[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def summary_md(results):
    lines = ["| game | seed | frames | train steps | final greedy return (95 % CI) | "
             "best snapshot | random | actor steps/s | learner steps/s | link MB/s |",
             "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        last = r["points"][-1]
        best = max(p["return_mean"] for p in r["points"])
        row = "| %s | %d | %s | %s | %.2f (%.2f to %.2f) | %.2f | %.2f | %.0f | %.1f | %.3f |"
        lines.append(row % (
            r["env"], r["seed"], format(r["frames"], ","), format(r["train_steps"], ","),
            last["return_mean"], last["return_ci95"][0], last["return_ci95"][1], best,
            r["random_return_mean"], r["actor_env_steps_per_s"], r["learner_train_steps_per_s"],
            r["link_bytes_per_s"] / 1e6))
    return "\n".join(lines) + "\n"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--games", default="MinAtar/Breakout,MinAtar/SpaceInvaders",
                   help="comma-separated MinAtar environments")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    p.add_argument("--duration_s", type=float, default=3600.0, help="each run's length")
    p.add_argument("--snapshot_interval_s", type=float, default=120.0)
    p.add_argument("--episodes", type=int, default=100, help="evaluation episodes per snapshot")
    p.add_argument("--actors", type=int, default=4)
    p.add_argument("--results_dir", default=DEFAULT_RESULTS,
                   help="per-run results, curves.png and summary.md")
    p.add_argument("--runs_dir", default="", help="raw runs (default: a new /tmp directory)")
    p.add_argument("--plot_only", action="store_true", help="redraw from --results_dir")
    minatar_bench.add_run_arguments(p)
    args = p.parse_args(argv)
    games = [g for g in args.games.split(",") if g]
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        p.error("--seeds must be comma-separated integers, got %r" % args.seeds)
    if not games or any(not g.startswith("MinAtar/") for g in games):
        p.error("--games must name MinAtar environments, got %r" % args.games)
    if not seeds or args.duration_s <= 0 or args.snapshot_interval_s <= 0 or args.episodes < 2:
        p.error("need seeds, --duration_s > 0, --snapshot_interval_s > 0 and --episodes >= 2")
    if not args.plot_only:
        minatar_bench.import_package(args)
        import dreplay
        args.runs_dir = args.runs_dir or tempfile.mkdtemp(prefix="dreplay-curves-")
        total = len(games) * len(seeds)
        for k, (env, seed) in enumerate([(g, s) for s in seeds for g in games]):
            log("run %d of %d" % (k + 1, total))
            try:
                one_run(args, env, seed, dreplay)
            except (RuntimeError, OSError, subprocess.SubprocessError, KeyError) as e:
                log("error: %s" % e)
                return 2
    results = [r for r in load_results(args.results_dir) if r["env"] in games]
    if not results:
        log("no results in %s" % args.results_dir)
        return 2
    plot(results, os.path.join(args.results_dir, "curves.png"))
    with open(os.path.join(args.results_dir, "summary.md"), "w") as f:
        f.write(summary_md(results))
    log("wrote curves.png and summary.md in %s" % args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
