#!/usr/bin/env python3
"""The MinAtar benchmark: does a short run of the whole system (replay server,
C++ actors, C++ learner, buffer placement, native observations) beat the
random policy's mean return by at least 3x?

    bazel build //replay_server:replay_server //actor_client:actor \\
        //learner_client:learner //python:dreplay
    tools/bench/minatar_bench.py                       # MinAtar/Breakout, 600 s
    tools/bench/minatar_bench.py --duration_s 60 --json

It measures, in order:
  1. the random policy: --episodes episodes of the C++ environment, episode i
     from reset(seed=EVAL_SEED + i), uniform actions over all 6;
  2. a run of tools/launch/run_local.py for --duration_s (MinAtar's defaults, see
     docs/minatar.md), the learner writing parameter snapshots;
  3. the greedy policy of the last snapshot over the same episodes (the
     network loaded by the Python package, which builds the C++ one).
It prints both means with 95 % intervals (mean +- 1.96 standard errors),
their ratio, the environment steps, and the actor, learner and link rates
of the run (from the learner's summary record). Exit status: 0 when the
ratio is at least --target_ratio (3), 1 when not, 2 on failure.
"""

import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVAL_SEED = 1000003  # as the learner's evaluation
SNAPSHOT_INTERVAL_S = 30.0


def log(msg):
    print("minatar_bench: " + msg, file=sys.stderr, flush=True)


def interval(values):
    """(mean, half-width of the 95 % normal interval) of a list."""
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, 1.96 * math.sqrt(var / n)


def play(dreplay, env_name, episodes, choose):
    """Returns of `episodes` lock-stepped episodes; choose(observations) ->
    actions for the active ones."""
    import numpy as np
    envs = [dreplay.make_environment(env_name) for _ in range(episodes)]
    obs = np.stack([env.reset(seed=EVAL_SEED + i) for i, env in enumerate(envs)])
    returns = np.zeros(episodes)
    active = np.ones(episodes, bool)
    while active.any():
        idx = np.flatnonzero(active)
        for i, a in zip(idx, choose(obs[idx])):
            obs[i], reward, terminated, truncated = envs[i].step(int(a))
            returns[i] += reward
            if terminated or truncated:
                active[i] = False
    return [float(r) for r in returns]


def greedy_returns(dreplay, params, env_name, snapshot, episodes):
    import torch
    net = params.network_for(dreplay.make_environment(env_name))
    with open(snapshot, "rb") as f:
        params.load_state_dict(net, f.read())

    def choose(obs):
        with torch.no_grad():
            return net(torch.from_numpy(obs)).argmax(1).numpy()
    return play(dreplay, env_name, episodes, choose)


def random_returns(dreplay, env_name, episodes, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    actions = dreplay.make_environment(env_name).action_count
    return play(dreplay, env_name, episodes, lambda obs: rng.integers(0, actions, len(obs)))


def run(args, out_dir):
    metrics = os.path.join(out_dir, "metrics.jsonl")
    snap = os.path.join(out_dir, "snap")
    argv = [sys.executable, os.path.join(ROOT, "tools", "launch", "run_local.py"),
            "--replay_placement", "buffer", "--env", args.env, "--observation", "native",
            "--actors", str(args.actors), "--seed", str(args.seed),
            "--duration_s", repr(float(args.duration_s)), "--eval_interval_s", "60",
            "--eval_episodes", "20", "--metrics_out", metrics, "--out_dir", out_dir,
            "--bin_dir", args.bin_dir,
            "--learner_flag=--snapshot_dir=" + snap,
            "--learner_flag=--snapshot_interval_s=%r" % SNAPSHOT_INTERVAL_S] + args.run_flag
    log("running %.0f s: %s" % (args.duration_s, " ".join(argv[1:])))
    # run_local's progress goes to stderr, so that --json's stdout is one line.
    rc = subprocess.call(argv, cwd=ROOT, stdout=sys.stderr)
    if rc != 0:
        raise RuntimeError("run_local.py exited with code %d; logs in %s" % (rc, out_dir))
    with open(metrics) as f:
        records = [json.loads(line) for line in f if line.strip()]
    summary = [r for r in records if r.get("type") == "summary"]
    snapshots = sorted(glob.glob(os.path.join(snap, "snapshot-*.params")))
    if not summary or not snapshots:
        raise RuntimeError("the run left no summary or no snapshot in %s" % out_dir)
    return summary[-1], snapshots[-1]


def add_run_arguments(p):
    """The options of a whole-system run (shared with minatar_curves.py)."""
    p.add_argument("--bin_dir", default=os.environ.get("DREPLAY_BIN_DIR", ""),
                   help="the built binaries (default: bazel-out/k8-opt/bin, else bazel-bin)")
    p.add_argument("--run_flag", action="append", default=[], metavar="FLAG",
                   help="extra flag for tools/launch/run_local.py (repeatable)")


def import_package(args):
    """Fills in --bin_dir's default and makes its Python package importable."""
    if not args.bin_dir:
        opt = os.path.join(ROOT, "bazel-out", "k8-opt", "bin")
        args.bin_dir = opt if os.path.isdir(opt) else os.path.join(ROOT, "bazel-bin")
    sys.path.insert(0, os.path.join(args.bin_dir, "python", "lib"))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--env", default="MinAtar/Breakout")
    p.add_argument("--duration_s", type=float, default=600.0, help="the run's length")
    p.add_argument("--actors", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--episodes", type=int, default=100, help="evaluation episodes per policy")
    p.add_argument("--target_ratio", type=float, default=3.0)
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.add_argument("--out_dir", default="", help="the run's logs (default: a new /tmp directory)")
    add_run_arguments(p)
    args = p.parse_args(argv)
    if not args.env.startswith("MinAtar/"):
        p.error("--env must be a MinAtar environment")
    import_package(args)
    import dreplay
    from dreplay import params
    out_dir = args.out_dir or tempfile.mkdtemp(prefix="dreplay-minatar-")
    try:
        rand = random_returns(dreplay, args.env, args.episodes, args.seed)
        summary, snapshot = run(args, out_dir)
        greedy = greedy_returns(dreplay, params, args.env, snapshot, args.episodes)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        log("error: %s" % e)
        return 2
    r_mean, r_half = interval(rand)
    g_mean, g_half = interval(greedy)
    wall = summary["wall_s"]
    figures = {
        "env": args.env, "observation": "native", "placement": "buffer",
        "duration_s": args.duration_s, "actors": args.actors, "seed": args.seed,
        "episodes": args.episodes,
        "random_return_mean": r_mean, "random_return_ci95": [r_mean - r_half, r_mean + r_half],
        "greedy_return_mean": g_mean, "greedy_return_ci95": [g_mean - g_half, g_mean + g_half],
        "ratio": g_mean / r_mean if r_mean > 0 else None,
        "env_steps": summary["env_steps"], "train_steps": summary["train_steps"],
        "wall_s": wall,
        "actor_env_steps_per_s": summary["env_steps"] / wall,
        "learner_train_steps_per_s": summary["train_steps"] / wall,
        "link_bytes_per_s": summary["link_bytes_total"] / wall,
        "link_transitions_per_s": summary["link_transitions_total"] / wall,
        "snapshot": snapshot, "out_dir": out_dir,
    }
    passed = figures["ratio"] is not None and figures["ratio"] >= args.target_ratio
    figures["passed"] = passed
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    else:
        print("random policy:  mean return %.3f (95%% CI %.3f to %.3f), %d episodes" % (
            r_mean, r_mean - r_half, r_mean + r_half, args.episodes))
        print("greedy policy:  mean return %.3f (95%% CI %.3f to %.3f) after %.0f s" % (
            g_mean, g_mean - g_half, g_mean + g_half, wall))
        print("ratio %.2f (target %.1f): %s" % (figures["ratio"] or 0, args.target_ratio,
                                               "PASSED" if passed else "NOT PASSED"))
        print("env steps %d (%.0f/s), train steps %d (%.1f/s), link %.3f MB/s" % (
            summary["env_steps"], figures["actor_env_steps_per_s"], summary["train_steps"],
            figures["learner_train_steps_per_s"], figures["link_bytes_per_s"] / 1e6))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
