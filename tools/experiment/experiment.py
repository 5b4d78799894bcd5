#!/usr/bin/python3
"""The placement experiment: where should the prioritized replay memory
live when a long link separates actors from the learner? At the buffer node
(the buffer placement, the paper's "proposal"), at the learner (the learner
placement, the paper's "existing approach"), or at both (hybrid: the buffer
node forwards by priority into a learner-side replay)? Every arm is run at
the same governed update rate, over the same seconds of data, with paired
seeds.

Arms (each a placement and its data path):
  learner-fifo      replay at the learner; the buffer node pushes the newest
                    transitions, oldest first, through a drop-oldest queue
  learner-freshest  replay at the learner; it pulls the ring, jumping to the
                    newest transitions when it falls behind
  learner-uniform   replay at the learner; the buffer node forwards a uniform
                    draw without replacement (subsampling without priority)
  hybrid            replay at the learner; the buffer node forwards by
                    priority, without replacement
  buffer            replay at the buffer node; the learner READs pre-sampled
                    prioritized batches
  buffer-cache      the same with the transfer-once cache
  hybrid-aa         hybrid again, as a separate arm: the A/A check (the
                    experiment is invalid if its interval against hybrid
                    excludes 0)

Cells. Each is a link load rho = G s / B (G transitions generated per
second, s bytes per slot, B the link's bytes per second: the load if every
generated transition crossed) and a replay ratio u, updates per generated
transition. The learner trains at R = UPDATES_PER_S updates/s in every
cell (learner --max_updates_per_s, the governor), so G = R / u; B follows
from rho. kappa = C s / B = rho u batch is the load if every sample the
learner consumes crossed: the buffer placement's. The primary cells are
rho 2 and 8 at u = 0.25 (DQN's one update per four environment steps),
where forwarding everything does not fit the link. The low-kappa set
(--low_kappa) runs the one regime where every sample the learner
consumes fits the link but not every transition generated (kappa 0.51 <
1 < rho 2, a quarter of a sample per generated transition, as in Ape-X):
at R = 50 updates/s, since G = R / u is 12,500 transitions/s, about what
one core of actors generates.

Controls, the same in every arm: the governor; the learner pinned to CPU 0,
the buffer node and actors to the rest; replay memories sized to the same
seconds of data (CAPACITY_S: the buffer node's at G, a learner-side one at
the rate that can arrive, min(G, B / s)); greedy evaluation offline from
snapshots every SNAPSHOT_UPDATES updates' worth of time (100 episodes
each); every arm's window the same; the arms' order shuffled per seed;
seeds paired (seed k gives every arm the same initial network, actors and
environments).

Outputs under --out:
  design.json                  what every run under --out shares
  runs/<cell>/<arm>-seed<k>/   run_local's logs, metrics.jsonl, snap/ and evals.jsonl
  summary.json, summary.md     the figures (shape: see experiment_report.py)
  return_vs_updates.png, return_vs_time.png, return_vs_bytes.png, placement_map.png

Usage:
  tools/experiment/experiment.sh           # the default set (210 runs, about 2.5 h on 2 cores)
  tools/experiment/experiment.sh --quick   # a smoke run of the seven arms (about 2 min)
  tools/experiment/experiment.sh --full    # 40k updates, 10 seeds in every cell (300 runs, about 8 h)
  tools/experiment/experiment.py --low_kappa --out out/experiment-low-kappa   # 30 runs, about 31 min
  tools/experiment/experiment.py --summarize_only --out DIR   # re-summarize finished runs
  tools/experiment/experiment.py --quick --env Acrobot-v1
  tools/experiment/experiment.py --cells rho8-u0.25 --seeds 20 --resume   # 10 more seeds
  tools/experiment/experiment.py --cells rho8-u0.25 --arms hybrid,hybrid-aa --seeds 20 \
      --out out/experiment-aa   # an A/A check of its own (40 runs, about 30 min)

Every run under one --out shares its environment, observation, updates and
governor (out/design.json records them; another --out is needed to change
one).

The environment is CartPole-v1 unless --env names another (Acrobot-v1,
MinAtar's); time-to-solve figures use CartPole-v1's threshold.
"""

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

# experiment_stats reads the metrics with tools/launch/metrics_lines.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launch"))
import experiment_report  # noqa: E402
import experiment_stats  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ARMS = {
    "learner-fifo": {"replay_placement": "hybrid", "forward_policy": "fifo"},
    "learner-freshest": {"replay_placement": "learner", "forward_policy": "freshest"},
    "learner-uniform": {"replay_placement": "hybrid", "forward_policy": "uniform"},
    "hybrid": {"replay_placement": "hybrid", "forward_policy": "priority"},
    "buffer": {"replay_placement": "buffer", "learner_cache": False},
    "buffer-cache": {"replay_placement": "buffer", "learner_cache": True},
    "hybrid-aa": {"replay_placement": "hybrid", "forward_policy": "priority"},
}
ARM_TITLES = {
    "learner-fifo": "learner placement, FIFO push (drop-oldest)",
    "learner-freshest": "learner placement, freshest pull",
    "learner-uniform": "learner placement, uniform forwarding",
    "hybrid": "hybrid: prioritized forwarding + learner replay",
    "buffer": "buffer placement (proposal)",
    "buffer-cache": "buffer placement + transfer-once cache",
    "hybrid-aa": "hybrid, A/A duplicate",
}
# The contrasts named in advance (a minus b), Holm-corrected together over
# the primary cells; the A/A contrast checks the experiment itself.
CONTRASTS = (("hybrid", "learner-freshest"), ("buffer", "hybrid"), ("buffer-cache", "hybrid"))
AA_CONTRAST = ("hybrid-aa", "hybrid")

UPDATES_PER_S = 500.0  # R: the governed update rate of every arm
BATCH_SIZE = 64
DELAY_US = 5000  # one way: a 1000 km WAN
CAPACITY_S = 20.0  # every replay memory holds about this many seconds of data
# The rate limiter's samples per insert, as a multiple of u x batch: a guard
# against an arm whose actors fall behind, not the bound (the governor is).
SPI_SLACK = 2.0
START_MARGIN_S = 6.0
SNAPSHOT_UPDATES = 1000  # a snapshot every this many updates' worth of time
EVAL_EPISODES = 100
SOLVE_RETURN = 475.0
# Each cell: rho, u, the padding that sets the slot size s (so that B stays
# above what polling and parameters need), the actors, and the transitions
# stored before training starts (the same in every arm).
CELLS = {
    "rho0.5-u8": {"rho": 0.5, "u": 8.0, "pad": 16384, "actors": 2, "envs_per_actor": 1,
                  "min_replay": 64},
    "rho2-u0.25": {"rho": 2.0, "u": 0.25, "pad": 1024, "actors": 2, "envs_per_actor": 4,
                   "min_replay": 1000},
    "rho8-u0.25": {"rho": 8.0, "u": 0.25, "pad": 1024, "actors": 2, "envs_per_actor": 4,
                   "min_replay": 1000},
    "rho8-u8": {"rho": 8.0, "u": 8.0, "pad": 16384, "actors": 2, "envs_per_actor": 1,
                "min_replay": 64},
    # kappa = 2 x 0.004 x 64 = 0.512: the low-kappa set's cell (at its R).
    "rho2-u0.004": {"rho": 2.0, "u": 0.004, "pad": 1024, "actors": 2, "envs_per_actor": 4,
                    "min_replay": 1000},
}
PRIMARY = ("rho2-u0.25", "rho8-u0.25")
# "<cell>-alpha0": the cell with uniform sampling at the buffer node, for
# the buffer placement's arms: the control of the transferred-priority ratio.
CONTROL_SUFFIX = "-alpha0"
CONTROL_ARMS = ["buffer", "buffer-cache"]
ALL_ARMS = list(ARMS)
NO_AA = [a for a in ARMS if a != "hybrid-aa"]
SETS = {
    "default": {"updates": 16000, "plan": [
        ("rho2-u0.25", ALL_ARMS, 10), ("rho8-u0.25", ALL_ARMS, 10),
        ("rho0.5-u8", NO_AA, 5), ("rho8-u8", NO_AA, 5),
        ("rho2-u0.25" + CONTROL_SUFFIX, CONTROL_ARMS, 5)]},
    "quick": {"updates": 1000, "plan": [("rho2-u0.25", ALL_ARMS, 1)]},
    "low_kappa": {"updates": 3000, "updates_per_s": 50.0, "snapshot_updates": 250,
                  "plan": [("rho2-u0.004", NO_AA, 5)]},
    "full": {"updates": 40000, "plan": [
        ("rho2-u0.25", ALL_ARMS, 10), ("rho8-u0.25", ALL_ARMS, 10),
        ("rho0.5-u8", ALL_ARMS, 10), ("rho8-u8", ALL_ARMS, 10),
        ("rho2-u0.25" + CONTROL_SUFFIX, CONTROL_ARMS, 10)]},
}


def log(msg):
    print("experiment: " + msg, file=sys.stderr, flush=True)


def default_bin_dir():
    opt = os.path.join(ROOT, "bazel-out", "k8-opt", "bin")
    return opt if os.path.isdir(opt) else os.path.join(ROOT, "bazel-bin")


BIN_DIR = [default_bin_dir()]  # --bin_dir
# The environment of every run (--env, --observation).
ENV = {"env": "CartPole-v1", "observation": "native"}


def slot_bytes(pad):
    """The slot size of transitions padded by `pad`, from `actor --print_layout`."""
    out = subprocess.run([os.path.join(BIN_DIR[0], "actor_client", "actor"), "--print_layout",
                          "--env=" + ENV["env"], "--observation=" + ENV["observation"],
                          "--payload_pad_bytes=%d" % pad],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    return json.loads(out.stdout.decode())["slot_size"]


def power_of_two(x, floor):
    """The power of two nearest x (in log), at least floor."""
    return max(floor, 1 << max(0, round(math.log2(max(x, 1.0)))))


def cell(name, updates, rate=UPDATES_PER_S, snapshot_updates=SNAPSHOT_UPDATES):
    """A cell's every number, derived from rho, u and the governed rate."""
    base = name[:-len(CONTROL_SUFFIX)] if name.endswith(CONTROL_SUFFIX) else name
    c = dict(CELLS[base])
    s = slot_bytes(c["pad"])
    g = rate / c["u"]
    link_bytes_per_s = g * s / c["rho"]
    arrival = min(g, link_bytes_per_s / s)
    floor = max(2 * BATCH_SIZE, 2 * c["min_replay"])
    c.update(
        name=name, slot_bytes=s, generation_per_s=g, link_bytes_per_s=link_bytes_per_s,
        link="%d:%.6g" % (DELAY_US, link_bytes_per_s * 8 / 1e9),
        kappa=c["rho"] * c["u"] * BATCH_SIZE,
        samples_per_insert=SPI_SLACK * c["u"] * BATCH_SIZE,
        alpha=0.0 if name != base else 0.6, actor_rate=g / c["actors"],
        capacity=power_of_two(g * CAPACITY_S, floor),
        local_capacity=power_of_two(arrival * CAPACITY_S, floor),
        updates=updates, updates_per_s=rate, snapshot_updates=snapshot_updates,
        schedule_s=updates / rate,
        # The governed schedule, the fill before training (at the rate that
        # can arrive) and a margin for the processes' start; an arm that
        # keeps the rate stops at `updates`, before the window's end.
        duration_s=updates / rate + c["min_replay"] / arrival + START_MARGIN_S,
        title="rho %g, u %g (kappa %g)%s" % (c["rho"], c["u"], c["rho"] * c["u"] * BATCH_SIZE,
                                             ", alpha 0 (control)" if name != base else ""))
    c["capacity_s"] = c["capacity"] / g
    c["local_capacity_s"] = c["local_capacity"] / arrival
    return c


def pin_cpus():
    n = os.cpu_count() or 1
    return "0:1-%d" % (n - 1) if n > 2 else ("0:1" if n == 2 else "")


def run_argv(c, arm, seed, run_dir, governed):
    a = ARMS[arm]
    argv = [
        sys.executable, os.path.join(ROOT, "tools", "launch", "run_local.py"),
        "--env", ENV["env"], "--observation", ENV["observation"],
        "--replay_placement", a["replay_placement"], "--link", c["link"], "--seed", str(seed),
        "--actors", str(c["actors"]), "--envs_per_actor", str(c["envs_per_actor"]),
        "--actor_rate", repr(c["actor_rate"]), "--payload_pad_bytes", str(c["pad"]),
        "--batch_size", str(BATCH_SIZE), "--capacity", str(c["capacity"]),
        "--min_replay", str(c["min_replay"]),
        "--samples_per_insert", repr(c["samples_per_insert"]), "--alpha", repr(c["alpha"]),
        "--train_steps", str(c["updates"]), "--staging_depth", "8",
        "--duration_s", repr(c["duration_s"]), "--eval_interval_s", "0",
        "--progress_interval_s", "2.5",
        "--metrics_out", os.path.join(run_dir, "metrics.jsonl"), "--out_dir", run_dir,
        "--bin_dir", BIN_DIR[0],
        "--learner_flag=--snapshot_dir=" + os.path.join(run_dir, "snap"),
        "--learner_flag=--snapshot_interval_s=%r" % (c["snapshot_updates"] / c["updates_per_s"]),
    ]
    if governed:
        argv += ["--max_updates_per_s", repr(c["updates_per_s"])]
    if pin_cpus():
        argv += ["--pin_cpus", pin_cpus()]
    placement = a["replay_placement"]
    if placement != "buffer":
        argv += ["--forward_policy", a["forward_policy"],
                 "--learner_flag=--local_capacity=%d" % c["local_capacity"]]
    if a.get("forward_policy") == "fifo":
        argv += ["--forward_queue", str(min(4096, c["capacity"]))]
    if placement == "learner":
        # About 2x the bandwidth-delay product in flight, in chunks of a few
        # milliseconds of the link.
        chunk = max(1, min(32, int(c["link_bytes_per_s"] * 0.004 / c["slot_bytes"])))
        argv += ["--learner_flag=--forward_chunk_slots=%d" % chunk,
                 "--learner_flag=--forward_chunks_in_flight=4",
                 "--learner_flag=--forward_window=%d" % min(2048, c["capacity"] // 2)]
    if placement != "learner":
        # Staged batches (read or forwarded): two in flight in every such
        # arm, which keeps each cell's link busy (a batch outlasts the
        # round trip) with the same bytes queued.
        argv.append("--learner_flag=--batch_depth=2")
    if placement == "buffer":
        # Explicit either way: run_local.py's default is the cache.
        argv.append("--learner_cache" if a["learner_cache"] else "--nolearner_cache")
    return argv


def evaluate(run_dir):
    argv = [os.path.join(BIN_DIR[0], "tools", "experiment", "evaluate_snapshots"),
            "--snapshot_dir=" + os.path.join(run_dir, "snap"),
            "--episodes=%d" % EVAL_EPISODES, "--out=" + os.path.join(run_dir, "evals.jsonl"),
            "--env=" + ENV["env"], "--observation=" + ENV["observation"]]
    if subprocess.call(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
        raise RuntimeError("evaluation failed: " + " ".join(argv))


def complete(run_dir):
    metrics = os.path.join(run_dir, "metrics.jsonl")
    evals = os.path.join(run_dir, "evals.jsonl")
    return (os.path.exists(metrics) and os.path.exists(evals)
            and experiment_stats.read_jsonl(evals)
            and any(r.get("type") == "summary" for r in experiment_stats.read_jsonl(metrics)))


def schedule(plan, order_seed):
    """[(cell, arm, seed)]: seed by seed, cell by cell, the arms of each
    (cell, seed) in an order drawn for it (arms interleaved within a seed)."""
    runs = []
    for seed in range(1, max(seeds for _, _, seeds in plan) + 1):
        for name, arms, seeds in plan:
            if seed > seeds:
                continue
            order = list(arms)
            random.Random("%d/%s/%d" % (order_seed, name, seed)).shuffle(order)
            runs += [(name, arm, seed) for arm in order]
    return runs


def restrict_arms(plan, wanted):
    """The plan with only the wanted arms in each cell (cells left with none
    are dropped); ValueError names an arm that no chosen cell has."""
    known = {arm for _, arms, _ in plan for arm in arms}
    unknown = [a for a in wanted if a not in known]
    if unknown:
        raise ValueError("%s not in the chosen cells (%s)" % (",".join(unknown),
                                                              ",".join(sorted(known))))
    restricted = [(name, [a for a in arms if a in wanted], seeds) for name, arms, seeds in plan]
    return [entry for entry in restricted if entry[1]]


def set_rates(chosen):
    """(R, snapshot updates) of a set: its own, else the defaults."""
    return (chosen.get("updates_per_s", UPDATES_PER_S),
            chosen.get("snapshot_updates", SNAPSHOT_UPDATES))


def run_all(args, plan, updates, rates):
    runs = schedule(plan, args.order_seed)
    cells = {name: cell(name, updates, *rates) for name, _, _ in plan}
    started = time.monotonic()
    for i, (name, arm, seed) in enumerate(runs):
        run_dir = os.path.join(args.out, "runs", name, "%s-seed%d" % (arm, seed))
        if args.resume and complete(run_dir):
            log("[%d/%d] reusing %s" % (i + 1, len(runs), run_dir))
            continue
        os.makedirs(run_dir, exist_ok=True)
        argv = run_argv(cells[name], arm, seed, run_dir, not args.ungoverned)
        elapsed = time.monotonic() - started
        log("[%d/%d] %s %s seed %d (%.0f min elapsed)" % (i + 1, len(runs), name, arm, seed,
                                                         elapsed / 60))
        with open(os.path.join(run_dir, "run_local.log"), "w") as out:
            rc = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        if rc != 0:
            raise RuntimeError("run failed (exit %d); see %s" % (rc, run_dir))
        evaluate(run_dir)


def run_design(args, updates, rates):
    """What every run under one --out must share."""
    design = {"env": ENV["env"], "observation": ENV["observation"], "updates": updates,
              "governed": not args.ungoverned}
    if rates != (UPDATES_PER_S, SNAPSHOT_UPDATES):
        design.update(updates_per_s=rates[0], snapshot_updates=rates[1])
    return design


def check_design(out, design):
    """Records `design` in out/design.json, or refuses an --out whose runs
    were made with another (so --resume never mixes them)."""
    path = os.path.join(out, "design.json")
    if os.path.exists(path):
        with open(path) as f:
            recorded = json.load(f)
        if recorded != design:
            raise ValueError("%s holds runs of %s, not %s: choose another --out" % (
                out, json.dumps(recorded, sort_keys=True), json.dumps(design, sort_keys=True)))
        return
    with open(path, "w") as f:
        json.dump(design, f, sort_keys=True)
        f.write("\n")


def summarize(args, plan, updates, rates):
    cells = []
    for name, arms, _ in plan:
        c = cell(name, updates, *rates)
        figures = {}
        for arm in arms:
            base = os.path.join(args.out, "runs", name)
            by_seed = {}
            for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
                prefix = arm + "-seed"
                if entry.startswith(prefix) and complete(os.path.join(base, entry)):
                    by_seed[int(entry[len(prefix):])] = experiment_stats.run_figures(
                        os.path.join(base, entry), c["duration_s"], SOLVE_RETURN,
                        c["slot_bytes"], updates)
            figures[arm] = by_seed
        cells.append(experiment_report.cell_summary(c, figures))
    if not any(a["seeds"] for c in cells for a in c["arms"]):
        raise RuntimeError("no complete run under %s" % os.path.join(args.out, "runs"))
    return experiment_report.assemble(
        cells, design={"updates_per_s": rates[0], "governed": not args.ungoverned,
                       "updates": updates, "batch_size": BATCH_SIZE, "delay_us": DELAY_US,
                       "capacity_s": CAPACITY_S, "eval_episodes": EVAL_EPISODES,
                       "snapshot_updates": rates[1], "env": ENV["env"],
                       "observation": ENV["observation"]},
        primary=PRIMARY, contrasts=CONTRASTS, aa=AA_CONTRAST, control_suffix=CONTROL_SUFFIX)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(ROOT, "out", "experiment"),
                   help="output directory (default out/experiment)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true",
                       help="the smoke set: one seed of every arm in one cell (about 2 min)")
    group.add_argument("--full", action="store_true",
                       help="40k updates, 10 seeds in every cell (about 8 h)")
    group.add_argument("--low_kappa", action="store_true",
                       help="the kappa < 1 < rho cell, rho2-u0.004: 3k updates at 50 updates/s, "
                       "5 seeds of every arm but the A/A duplicate (about 31 min)")
    p.add_argument("--ungoverned", action="store_true",
                   help="no update governor: every arm at its own maximum rate (stopping at "
                   "the set's updates or its window's end)")
    p.add_argument("--cells", default="",
                   help="comma-separated cells of the set to run and summarize (default: all; "
                   "e.g. the primary ones, %s)" % ",".join(PRIMARY))
    p.add_argument("--arms", default="",
                   help="comma-separated arms to run and summarize in each chosen cell "
                   "(default: the set's; e.g. hybrid,hybrid-aa for an A/A check of its own "
                   "under another --out)")
    p.add_argument("--order_seed", type=int, default=1,
                   help="seed of the arms' run order (default 1)")
    p.add_argument("--seeds", type=int, default=0,
                   help="run seeds 1..N in every chosen cell instead of the set's count (e.g. "
                   "more seeds where a check needs them; the summary takes every complete "
                   "seed under --out)")
    p.add_argument("--resume", action="store_true", help="keep the runs already complete")
    p.add_argument("--summarize_only", action="store_true",
                   help="only summarize the runs under --out")
    p.add_argument("--report_only", action="store_true",
                   help="only redraw summary.md and the plots from --out's summary.json "
                   "(which holds every figure and curve; the raw runs are not needed)")
    p.add_argument("--bin_dir", default=os.environ.get("DREPLAY_BIN_DIR", ""),
                   help="where the built binaries are (default: bazel-out/k8-opt/bin, else "
                   "bazel-bin)")
    p.add_argument("--env", default="CartPole-v1",
                   help="the environment (default CartPole-v1; Acrobot-v1, MinAtar/...)")
    p.add_argument("--observation", choices=("native", "pixels84"), default="native",
                   help="pixels84: MinAtar only")
    args = p.parse_args(argv)
    if args.bin_dir:
        BIN_DIR[0] = args.bin_dir
    ENV.update(env=args.env, observation=args.observation)
    chosen = SETS["quick" if args.quick else "full" if args.full
                  else "low_kappa" if args.low_kappa else "default"]
    plan, updates, rates = chosen["plan"], chosen["updates"], set_rates(chosen)
    if args.cells:
        wanted = args.cells.split(",")
        unknown = [c for c in wanted if c not in [name for name, _, _ in plan]]
        if unknown:
            p.error("--cells: %s not in this set (%s)" % (
                ",".join(unknown), ",".join(name for name, _, _ in plan)))
        plan = [entry for entry in plan if entry[0] in wanted]
    if args.arms:
        try:
            plan = restrict_arms(plan, args.arms.split(","))
        except ValueError as e:
            p.error("--arms: %s" % e)
    if args.seeds < 0:
        p.error("--seeds=%d must be >= 1 (0: the set's)" % args.seeds)
    if args.seeds:
        plan = [(name, arms, args.seeds) for name, arms, _ in plan]
    os.makedirs(args.out, exist_ok=True)
    try:
        if not args.report_only:
            check_design(args.out, run_design(args, updates, rates))
        if args.report_only:
            experiment_report.redraw(args.out, ARM_TITLES)
            log("redrew %s" % ", ".join(os.path.join(args.out, f)
                                        for f in experiment_report.OUTPUTS))
            return 0
        if not args.summarize_only:
            run_all(args, plan, updates, rates)
        summary = summarize(args, plan, updates, rates)
    except (RuntimeError, ValueError, subprocess.CalledProcessError, OSError) as e:
        log("error: %s" % e)
        return 1
    experiment_report.write(args.out, summary, ARM_TITLES)
    log("wrote %s" % ", ".join(os.path.join(args.out, f) for f in experiment_report.OUTPUTS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
