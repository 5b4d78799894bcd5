#!/usr/bin/env python3
"""The launch plan of one dreplay run: the replay server's, the learner's and
the actors' command lines, and the sizes derived for them, computed here and
nowhere else.

    tools/launch/launch_plan.py --bin_dir bazel-out/k8-opt/bin --write DIR \\
        [--env MinAtar/Breakout --actors 8 --capacity 65536 ...]

Every launcher uses it: tools/launch/run_local.py and tools/chaos/chaos.py
import it; tools/launch/netns_cluster.sh and tools/launch/slurm/dreplay.sbatch
run it with --write and read what it writes into DIR:
  layout.json    what the actors need of the server (`actor --print_layout`:
                 transition spec, observation size, actions, slot and
                 parameter sizes; actor_client/actor_layout.h)
  server.args    the replay server's flags, one per line
  learner.args   the learner's flags, one per line
  actor.args     every actor's flags, one per line (without --actor_index
                 and --num_actors, which the launcher adds per task)
The flags are the run's hyper-parameters and sizes. What only the launcher
knows is not in them: binary paths, addresses, port files, token and
credential files, --metrics_out, pinning. A launcher appends those (and its
pass-through flags last, so that they win).

The sizes derived here, once:
  - the server's slot size, transition spec, observation size and actions
    are the actor binary's own numbers (nothing here repeats its constants);
  - the server's --param_bytes is the learner's parameter bytes rounded up
    to PARAM_BYTES_MULTIPLE;
  - hyper-parameters left unset take the environment's defaults
    (ENV_DEFAULTS: MinAtar's published DQN settings, else the classic-
    control ones; PIXELS84_DEFAULTS for 84x84 frame stacks);
  - the rate limiter's slack defaults to 4 batches when a samples-per-insert
    target is set, and goes to whichever process enforces it: the server in
    the buffer placement, the learner in the learner placement.
Only the Python standard library is used.
"""

import argparse
import json
import os
import re
import subprocess
import sys

# The environments the binaries know (for --env's choices); their sizes come
# from `actor --print_layout`.
ENVIRONMENTS = ("Acrobot-v1", "CartPole-v1", "MountainCar-v0", "MinAtar/Asterix",
                "MinAtar/Breakout", "MinAtar/Freeway", "MinAtar/Seaquest", "MinAtar/SpaceInvaders")
PLACEMENTS = ("buffer", "learner", "hybrid")
# What the server forwards first in the hybrid placement (replay_server
# --forward), and the order of the learner placement's forwarding.
HYBRID_FORWARD = ("priority", "uniform", "fifo")
LEARNER_FORWARD = ("in_order", "freshest")
DEFAULT_FORWARD_QUEUE = 4096  # the fifo forwarder's queue, cut to the capacity
# Defaults that depend on the environment: MinAtar's published DQN settings
# (batch 32, replay 100,000 rounded up to a power of two, 5,000 transitions
# before training, step size 0.00025, a target update every 1,000 steps;
# the learner binary adds MinAtar's RMSprop), else the classic-control ones.
ENV_DEFAULTS = {
    "classic": {"batch_size": 64, "capacity": 65536, "min_replay": 1000, "lr": 1e-3,
                "target_update": 500, "probe_size": 1024},
    "minatar": {"batch_size": 32, "capacity": 131072, "min_replay": 5000, "lr": 0.00025,
                "target_update": 1000, "probe_size": 1024},
}
# pixels84 transitions weigh 56 KB: a replay of 16,384 (0.9 GB at the
# server) and a probe set of 128 keep a run within a 24 GiB machine.
PIXELS84_DEFAULTS = {"capacity": 16384, "probe_size": 128}
# The server's --param_bytes: the learner's parameters, rounded up to this.
PARAM_BYTES_MULTIPLE = 1024
# The rate limiter's default slack, in batches.
SPI_SLACK_BATCHES = 4.0
LAYOUT_KEYS = ("transition_spec", "observation_size", "num_actions", "payload_bytes",
               "slot_size", "params_bytes")
ACTOR_BINARY = os.path.join("actor_client", "actor")


class PlanError(Exception):
    pass


def round_up(n, multiple):
    return (n + multiple - 1) // multiple * multiple


def add_arguments(p):
    """The plan's options, on an argparse parser. Options left None take
    the environment's default in finish()."""
    p.add_argument("--replay_placement", choices=PLACEMENTS, default="buffer",
                   help="where the replay memory is: buffer (sampled at the buffer node), "
                   "learner (at the learner, fed every transition in order) or hybrid (at the "
                   "learner, fed what the buffer node forwards once each: --forward_policy) "
                   "(default buffer)")
    p.add_argument("--link", default="10km-25g",
                   help="emulated learner link (none, 10km-25g, DELAY_US:GBPS; default 10km-25g)")
    p.add_argument("--provider", default="soft", help="RDMA provider (default soft)")
    p.add_argument("--learner_soft_transport", choices=("tcp", "auto"), default="tcp",
                   help="soft provider: the learner's transport across the emulated link. tcp "
                   "(default) carries both placements' long-link traffic the same way: the "
                   "same-host shared mapping (auto) serves the buffer placement's staging READs "
                   "but never the learner placement's slot READs (slots stay writable by "
                   "actors), so auto would compare unlike transports")
    p.add_argument("--env", default="CartPole-v1", choices=ENVIRONMENTS)
    p.add_argument("--observation", choices=("native", "pixels84"), default="native",
                   help="pixels84: MinAtar only, 4 stacked 84x84 frames (the Nature CNN)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--actors", type=int, default=4)
    p.add_argument("--envs_per_actor", type=int, default=1)
    p.add_argument("--actor_rate", type=float, default=150.0,
                   help="environment steps per second per actor (0: unlimited; default 150)")
    p.add_argument("--duration_s", type=float, default=0, help="learner run time (0: no limit)")
    p.add_argument("--train_steps", type=int, default=0, help="learner train steps (0: no limit)")
    p.add_argument("--max_updates_per_s", type=float, default=0,
                   help="learner train steps per second at most, for runs compared at equal "
                   "updates (0: as fast as data allows)")
    p.add_argument("--stop_when_solved", action="store_true")
    # Shared hyper-parameters.
    p.add_argument("--n_step", type=int, default=3)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--hidden", default="",
                   help="hidden sizes (default: the environment's: 64,64; MinAtar 128; "
                   "pixels84 512)")
    p.add_argument("--lr", type=float, default=None, help="default 1e-3; MinAtar 0.00025")
    p.add_argument("--target_update", type=int, default=None, help="default 500; MinAtar 1000")
    p.add_argument("--batch_size", type=int, default=None, help="default 64; MinAtar 32")
    p.add_argument("--capacity", type=int, default=None,
                   help="replay slots, a power of two (default 65536; MinAtar 131072; "
                   "pixels84 16384)")
    p.add_argument("--staging_depth", type=int, default=8)
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--beta", type=float, default=0.4)
    p.add_argument("--beta_final", type=float, default=1.0)
    p.add_argument("--beta_steps", type=int, default=20000)
    p.add_argument("--min_replay", type=int, default=None,
                   help="transitions before training starts (default 1000; MinAtar 5000)")
    p.add_argument("--publish_every", type=int, default=100)
    p.add_argument("--flush_batch", type=int, default=32)
    p.add_argument("--param_refresh_steps", type=int, default=200)
    p.add_argument("--epsilon_base", type=float, default=0.4)
    p.add_argument("--epsilon_alpha", type=float, default=7.0)
    p.add_argument("--eval_interval_s", type=float, default=5.0)
    p.add_argument("--eval_episodes", type=int, default=100)
    p.add_argument("--solve_return", type=float, default=475.0)
    p.add_argument("--progress_interval_s", type=float, default=5.0)
    # Replay ratio, link and data size.
    p.add_argument("--samples_per_insert", type=float, default=0,
                   help="target transitions trained on per transition inserted, enforced by the "
                   "replay memory's rate limiter: the server's (buffer) or the learner's "
                   "(learner); 0: no limit (default)")
    p.add_argument("--spi_error_buffer", type=float, default=0,
                   help="the rate limiter's slack in transitions (>= --batch_size with a limit; "
                   "default: 4 batches when --samples_per_insert is set)")
    p.add_argument("--learner_cache", dest="learner_cache", action="store_true", default=True,
                   help="buffer placement: the learner keeps what it received and READs each "
                   "transition once (transfer-once; the default)")
    p.add_argument("--nolearner_cache", dest="learner_cache", action="store_false",
                   help="buffer placement: the learner READs every batch entry")
    p.add_argument("--forward_policy", choices=LEARNER_FORWARD + HYBRID_FORWARD, default=None,
                   help="learner placement: in_order (default) or freshest, the order the "
                   "server's transitions are READ in; hybrid placement: priority (default), "
                   "uniform or fifo, what the server forwards first (fifo: oldest first from a "
                   "drop-oldest queue of --forward_queue)")
    p.add_argument("--forward_queue", type=int, default=None,
                   help="hybrid placement, --forward_policy fifo: transitions the server's "
                   "queue keeps (default 4096, or --capacity if smaller)")
    p.add_argument("--payload_pad_bytes", type=int, default=0,
                   help="bytes every actor appends to each transition, stored and moved but not "
                   "trained on (a model of rich observations such as camera frames)")
    p.add_argument("--frame_stack", type=int, default=0,
                   help="pixels84, buffer or learner placement: store each frame once (4, the "
                   "stack's frames): actors write frame records, each frame crosses the link "
                   "about once and the learner assembles the stacks; 0: whole transitions")
    p.add_argument("--link_codec", default="raw",
                   help="the server compresses staged batches on the link: raw (off), "
                   "lz4[:ACCELERATION], lz4hc[:LEVEL] or zstd[:LEVEL] (replay_server --link_codec; "
                   "learners follow the server)")
    p.add_argument("--probe_size", type=int, default=None,
                   help="transitions in the learner's probe set (0: no probe loss; default "
                   "1024, pixels84 128)")
    p.add_argument("--probe_seed", type=int, default=12345)


def finish(args):
    """Fills the environment's defaults into `args` and checks the plan.
    Raises PlanError naming the bad option."""
    minatar = args.env.startswith("MinAtar/")
    defaults = dict(ENV_DEFAULTS["minatar" if minatar else "classic"])
    if args.observation == "pixels84":
        defaults.update(PIXELS84_DEFAULTS)
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.observation != "native" and not minatar:
        raise PlanError("--observation=%s is for MinAtar environments only" % args.observation)
    for name, low in (("actors", 1), ("envs_per_actor", 1), ("batch_size", 1), ("n_step", 1)):
        if getattr(args, name) < low:
            raise PlanError("--%s must be >= %d, got %r" % (name, low, getattr(args, name)))
    if args.samples_per_insert < 0:
        raise PlanError("--samples_per_insert must be >= 0")
    check_forward_policy(args)
    if not 0 <= args.max_updates_per_s < float("inf"):
        raise PlanError("--max_updates_per_s must be finite and >= 0, got %r"
                        % args.max_updates_per_s)
    if args.samples_per_insert > 0 and args.spi_error_buffer == 0:
        args.spi_error_buffer = SPI_SLACK_BATCHES * args.batch_size
    if args.payload_pad_bytes < 0:
        raise PlanError("--payload_pad_bytes must be >= 0")
    if not re.fullmatch(r"(raw|lz4|lz4hc|zstd)(:-?[0-9]+)?", args.link_codec):
        raise PlanError("--link_codec must be raw, lz4[:N], lz4hc[:N] or zstd[:N], got %r"
                        % args.link_codec)
    if args.frame_stack not in (0, 4):
        raise PlanError("--frame_stack must be 0 or 4 (pixels84's stack), got %d"
                        % args.frame_stack)
    if args.frame_stack and (args.observation != "pixels84" or args.payload_pad_bytes):
        raise PlanError("--frame_stack needs --observation=pixels84 and no --payload_pad_bytes")
    if args.capacity < 2 or args.capacity & (args.capacity - 1):
        raise PlanError("--capacity must be a power of two, got %d" % args.capacity)
    try:
        [int(h) for h in args.hidden.split(",") if h]
    except ValueError:
        raise PlanError("--hidden must be a comma-separated list of sizes, got %r" % args.hidden)
    return args


def check_forward_policy(args):
    """Fills the placement's default --forward_policy and checks it fits."""
    allowed = {"learner": LEARNER_FORWARD, "hybrid": HYBRID_FORWARD}.get(args.replay_placement)
    if allowed is None:
        if args.forward_policy is not None:
            raise PlanError("--forward_policy is for the learner and hybrid placements, not %s"
                            % args.replay_placement)
        if args.forward_queue is not None:
            raise PlanError("--forward_queue is for --forward_policy fifo")
        return
    if args.forward_policy is None:
        args.forward_policy = allowed[0]
    if args.forward_policy not in allowed:
        raise PlanError("--forward_policy=%s: the %s placement takes %s" % (
            args.forward_policy, args.replay_placement, ", ".join(allowed)))
    if args.forward_policy != "fifo":
        if args.forward_queue is not None:
            raise PlanError("--forward_queue is for --forward_policy fifo")
        return
    if args.forward_queue is None:
        args.forward_queue = min(DEFAULT_FORWARD_QUEUE, args.capacity)
    if not 1 <= args.forward_queue <= args.capacity:
        raise PlanError("--forward_queue must be in [1, --capacity], got %d" % args.forward_queue)


def options(**overrides):
    """The plan's defaults with `overrides` (option names as attributes),
    finished: for launchers that choose values in code (tools/chaos/chaos.py)."""
    p = argparse.ArgumentParser(add_help=False)
    add_arguments(p)
    args = p.parse_args([])
    for name, value in overrides.items():
        if not hasattr(args, name):
            raise PlanError("no plan option %r" % name)
        setattr(args, name, value)
    return finish(args)


def actor_layout(bin_dir, args):
    """What the run's actors need of the server, from `actor --print_layout`:
    a dict with LAYOUT_KEYS (see actor_client/actor_layout.h)."""
    argv = [os.path.join(bin_dir, ACTOR_BINARY), "--print_layout", "--env=" + args.env,
            "--observation=" + args.observation, "--n_step=%d" % args.n_step,
            "--gamma=%r" % args.gamma, "--hidden=" + args.hidden,
            "--payload_pad_bytes=%d" % args.payload_pad_bytes,
            "--frame_stack=%d" % args.frame_stack]
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    except OSError as e:
        raise PlanError("cannot run %s: %s" % (argv[0], e))
    if proc.returncode != 0:
        raise PlanError("%s failed (code %d): %s" % (
            " ".join(argv), proc.returncode, proc.stderr.decode(errors="replace").strip()))
    try:
        layout = json.loads(proc.stdout.decode())
        missing = [k for k in LAYOUT_KEYS if k not in layout]
    except (ValueError, TypeError) as e:
        raise PlanError("%s printed no JSON object: %s" % (" ".join(argv), e))
    if missing:
        raise PlanError("%s printed no %s" % (" ".join(argv), ", ".join(missing)))
    return layout


def spi_flags(args):
    return ["--samples_per_insert=%r" % args.samples_per_insert,
            "--spi_error_buffer=%r" % args.spi_error_buffer]


def server_flags(args, layout):
    """The replay server's flags: sizes from the layout, the plan's replay
    hyper-parameters, and the rate limit in the buffer placement."""
    flags = [
        "--provider=" + args.provider,
        "--capacity=%d" % args.capacity,
        "--slot_size=%d" % layout["slot_size"],
        "--batch_size=%d" % args.batch_size,
        "--staging_depth=%d" % args.staging_depth,
        "--param_bytes=%d" % round_up(layout["params_bytes"], PARAM_BYTES_MULTIPLE),
        "--transition_spec=" + layout["transition_spec"],
        "--observation_size=%d" % layout["observation_size"],
        "--num_actions=%d" % layout["num_actions"],
        "--leases=%d" % args.actors,
        "--alpha=%r" % args.alpha,
        "--beta=%r" % args.beta,
        "--beta_final=%r" % args.beta_final,
        "--beta_steps=%d" % args.beta_steps,
        "--min_size_to_sample=%d" % args.min_replay,
        "--seed=%d" % args.seed,
    ]
    if args.replay_placement == "buffer" and args.samples_per_insert > 0:
        flags += spi_flags(args)
    if args.frame_stack:
        # Records stay referenced for about envs x (stack + n) sequences
        # behind the newest: an actor half a lease ahead of ingest leaves
        # them held (protocol/frame_record.h).
        flags += ["--frame_stack=%d" % args.frame_stack,
                  "--actor_window=%d" % max(1, args.capacity // args.actors // 2)]
    if args.link_codec != "raw":
        flags.append("--link_codec=" + args.link_codec)
    if args.replay_placement == "hybrid":
        flags.append("--forward=" + args.forward_policy)
        if args.forward_policy == "fifo":
            flags.append("--forward_queue=%d" % args.forward_queue)
    return flags


def learner_flags(args):
    """The learner's flags: placement, link, model, schedule and budget."""
    flags = [
        "--provider=" + args.provider,
        "--link=" + args.link,
        "--soft_transport=" + args.learner_soft_transport,
        "--replay_placement=" + args.replay_placement,
        "--env=" + args.env,
        "--observation=" + args.observation,
        "--n_step=%d" % args.n_step,
        "--gamma=%r" % args.gamma,
        "--hidden=" + args.hidden,
        "--lr=%r" % args.lr,
        "--target_update=%d" % args.target_update,
        "--seed=%d" % args.seed,
        "--alpha=%r" % args.alpha,
        "--beta=%r" % args.beta,
        "--beta_final=%r" % args.beta_final,
        "--beta_steps=%d" % args.beta_steps,
        "--min_replay_size=%d" % args.min_replay,
        "--publish_every=%d" % args.publish_every,
        "--eval_interval_s=%r" % args.eval_interval_s,
        "--eval_episodes=%d" % args.eval_episodes,
        "--solve_return=%r" % args.solve_return,
        "--progress_interval_s=%r" % args.progress_interval_s,
        "--probe_size=%d" % args.probe_size,
        "--probe_seed=%d" % args.probe_seed,
    ]
    if args.replay_placement == "learner":
        # The learner placement's rate limit is enforced by the learner.
        flags += spi_flags(args) + ["--forward_policy=" + args.forward_policy]
    elif args.replay_placement == "hybrid":
        # So is the hybrid placement's; what crosses is the server's choice.
        flags += spi_flags(args)
    else:
        flags.append("--learner_cache" if args.learner_cache else "--nolearner_cache")
    if args.duration_s > 0:
        flags.append("--duration_s=%r" % args.duration_s)
    if args.train_steps > 0:
        flags.append("--train_steps=%d" % args.train_steps)
    if args.max_updates_per_s > 0:
        flags.append("--max_updates_per_s=%r" % args.max_updates_per_s)
    if args.stop_when_solved:
        flags.append("--stop_when_solved")
    return flags


def actor_flags(args, index=None):
    """An actor's flags; with `index`, also its --actor_index and
    --num_actors (a launcher that starts actors as tasks adds those)."""
    flags = ["--provider=" + args.provider]
    if index is not None:
        flags += ["--actor_index=%d" % index, "--num_actors=%d" % args.actors]
    return flags + [
        "--num_envs=%d" % args.envs_per_actor,
        "--env=" + args.env,
        "--observation=" + args.observation,
        "--n_step=%d" % args.n_step,
        "--gamma=%r" % args.gamma,
        "--hidden=" + args.hidden,
        "--seed=%d" % args.seed,
        "--flush_batch=%d" % args.flush_batch,
        "--param_refresh_steps=%d" % args.param_refresh_steps,
        "--max_steps_per_s=%r" % args.actor_rate,
        "--epsilon_base=%r" % args.epsilon_base,
        "--epsilon_alpha=%r" % args.epsilon_alpha,
        "--payload_pad_bytes=%d" % args.payload_pad_bytes,
        "--frame_stack=%d" % args.frame_stack,
    ]


def write_plan(out_dir, args, layout):
    """Writes layout.json and the three argument files into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    files = {"layout.json": json.dumps(layout, sort_keys=True) + "\n",
             "server.args": server_flags(args, layout),
             "learner.args": learner_flags(args),
             "actor.args": actor_flags(args)}
    for name, content in files.items():
        if isinstance(content, list):
            if any("\n" in flag for flag in content):
                raise PlanError("a %s flag holds a newline: %r" % (name, content))
            content = "".join(flag + "\n" for flag in content)
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(content)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--bin_dir", required=True, help="the built binaries (actor_client/actor)")
    p.add_argument("--write", required=True, metavar="DIR",
                   help="write layout.json, server.args, learner.args and actor.args here")
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        finish(args)
        write_plan(args.write, args, actor_layout(args.bin_dir, args))
    except (PlanError, OSError) as e:
        print("launch_plan: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
