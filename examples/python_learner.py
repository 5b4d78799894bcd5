#!/usr/bin/env python3
"""A double-DQN learner in PyTorch that trains CartPole-v1 (or another
environment, e.g. --env=MinAtar/Breakout) against dreplay's C++ replay server
and C++ actors.

    bazel build //python:dreplay //replay_server:replay_server //actor_client:actor
    PYTHONPATH=bazel-bin/python/lib /usr/bin/python3 examples/python_learner.py
    ... examples/python_learner.py --device=cuda --budget_s 600
    ... examples/python_learner.py --env=MinAtar/Breakout [--observation=pixels84]
    ... examples/python_learner.py --env=MinAtar/Breakout --observation=pixels84 --frame_stack=4

By default it starts what the demo starts (tools/run_demo.sh), with
tools/launch/run_local.py's functions and defaults: a replay server (buffer
placement: the server samples, prioritized) and 4 C++ actors, over the soft
RDMA provider; the learner's own connection emulates --link (10 km of fibre
at 25 GbE). With --server HOST:PORT it joins a server that is already
running (and its actors) instead.

The learner is the C++ learner's algorithm (rl/dqn.h) in PyTorch: an online
and a target network of the C++ Q-network's architecture
(dreplay.params.network_for: an MLP, MinAtar's DQN network, or the Nature
CNN with --observation=pixels84), double-DQN n-step targets
(reward + discount * Q_target(s', argmax Q_online(s')) * (1 - done)), the
Huber loss weighted by the batch's importance-sampling weights, Adam (MinAtar:
MinAtar's centered RMSprop, step size 0.00025, as the C++ learner), the
gradient norm clipped to 10, a hard target update every --target_update
steps (MinAtar: 1000). Each batch's |TD errors| go back as its new priorities. Every
--publish_every steps it publishes the online network in the params format,
which the C++ actors load to act (epsilon-greedy, their Ape-X ladder).

With --frame_stack=4 (pixels84) the server and actors store each frame
once, and the learner keeps the frames on its device (dreplay.FrameCache)
and gathers each batch's stacks there.

Every --eval_interval_s it evaluates the greedy policy over --eval_episodes
episodes of the C++ environment (the bound rl/ environments, stepped in
lock-step, one batched forward per step) and stops when the mean return
reaches --solve_return (475, CartPole-v1's threshold; none for MinAtar) or
--budget_s passes.
The last line is a summary: solved or not, seconds, train steps, batches,
the actors' environment steps.

Exit status: 0 when solved (or, with --train_steps, when that many steps
ran), 1 otherwise.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

try:
    import dreplay
except ImportError:  # not on PYTHONPATH: take the package from this checkout's build
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "bazel-bin", "python", "lib"))
    import dreplay
from dreplay import params

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVAL_SEED = 1000003  # evaluation episodes are seeded EVAL_SEED + i
NEXT_TIMEOUT_S = 30.0


def log(msg):
    print("python_learner: " + msg, flush=True)


class DoubleDqn:
    """rl/dqn.h's learner, in PyTorch."""

    def __init__(self, args, env, device):
        torch.manual_seed(args.seed)
        self.online = params.network_for(env, args.hidden_sizes).to(device)
        self.target = params.network_for(env, args.hidden_sizes).to(device)
        self.target.load_state_dict(self.online.state_dict())
        if args.optimizer == "rmsprop":  # MinAtar's: centered, alpha 0.95, eps 0.01
            self.optimizer = torch.optim.RMSprop(self.online.parameters(), lr=args.lr, alpha=0.95,
                                                 eps=0.01, centered=True)
        else:
            self.optimizer = torch.optim.Adam(self.online.parameters(), lr=args.lr, eps=1e-8)
        self.target_update = args.target_update
        self.max_grad_norm = args.max_grad_norm
        self.device = device
        self.steps = 0

    def train_step(self, t):
        """One gradient step on a batch's tensors; returns (loss, |TD errors|)."""
        q = self.online(t["observations"]).gather(1, t["actions"].unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_actions = self.online(t["next_observations"]).argmax(1, keepdim=True)
            next_q = self.target(t["next_observations"]).gather(1, next_actions).squeeze(1)
            target = t["rewards"] + t["discounts"] * next_q * (1.0 - t["dones"])
        td = q - target
        loss = (t["weights"] * torch.nn.functional.huber_loss(q, target, reduction="none",
                                                              delta=1.0)).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.online.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.steps += 1
        if self.steps % self.target_update == 0:
            self.target.load_state_dict(self.online.state_dict())
        return loss.item(), td.detach().abs()


def evaluate(network, env_name, observation, episodes, device):
    """Mean return of the greedy policy over `episodes` seeded episodes."""
    envs = [dreplay.make_environment(env_name, observation) for _ in range(episodes)]
    obs = np.stack([env.reset(seed=EVAL_SEED + i) for i, env in enumerate(envs)])
    returns = np.zeros(episodes)
    active = np.ones(episodes, bool)
    with torch.no_grad():
        while active.any():
            idx = np.flatnonzero(active)
            actions = network(torch.from_numpy(obs[idx]).to(device)).argmax(1).cpu().numpy()
            for i, a in zip(idx, actions):
                obs[i], reward, terminated, truncated = envs[i].step(int(a))
                returns[i] += reward
                if terminated or truncated:
                    active[i] = False
    return float(returns.mean())


def start_service(args):
    """The replay server and C++ actors, as tools/launch/run_local.py starts them,
    with a fresh token (each actor gets its own credential); returns
    (address, processes, run_local module, the learner's token file)."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "launch"))
    import run_local
    argv = ["--actors", str(args.actors), "--seed", str(args.seed),
            "--hidden", ",".join(str(h) for h in args.hidden_sizes),
            "--batch_size", str(args.batch_size), "--min_replay", str(args.min_replay),
            "--actor_rate", str(args.actor_rate), "--env", args.env,
            "--observation", args.observation, "--frame_stack", str(args.frame_stack)]
    if args.bin_dir:
        argv += ["--bin_dir", args.bin_dir]
    if args.out_dir:
        argv += ["--out_dir", args.out_dir]
    run_args = run_local.parse_args(argv)
    os.makedirs(run_args.out_dir, exist_ok=True)
    layout = run_local.actor_layout(run_args)
    port_file = os.path.join(run_args.out_dir, "server.port")
    token_file, credential_files = run_local.make_credentials(run_args.out_dir, args.actors)
    server = run_local.Process("server",
                               run_local.server_argv(run_args, port_file, layout, token_file),
                               os.path.join(run_args.out_dir, "server.log"))
    try:
        port = run_local.wait_for_port(server, port_file, run_local.SERVER_START_TIMEOUT_S)
    except run_local.RunError:
        run_local.stop_all([[server]])
        raise
    address = "127.0.0.1:%d" % port
    actors = [run_local.Process("actor-%d" % i,
                                run_local.actor_argv(run_args, address, i, credential_files[i]),
                                os.path.join(run_args.out_dir, "actor-%d.log" % i))
              for i in range(args.actors)]
    log("replay server on %s and %d C++ actors; logs in %s" % (address, args.actors,
                                                              run_args.out_dir))
    return address, [actors, [server]], run_local, token_file


def check_alive(groups):
    for group in groups:
        for p in group:
            if p.poll() is not None:
                raise RuntimeError("%s exited with code %d:\n%s" % (p.name, p.poll(), p.tail()))


def train(args, address, groups):
    device = torch.device(args.device)
    torch.set_num_threads(1)  # small networks; the actors need the other cores
    learner = dreplay.connect(address, role="learner", token_file=args.token_file,
                              provider=args.provider, link=args.link)
    config = learner.config
    env = dreplay.make_environment(args.env, args.observation)
    if (env.observation_size, env.action_count) != (config["observation_size"],
                                                    config["num_actions"]):
        raise RuntimeError("the server's transitions (%s) are not %s's with --observation=%s" % (
            config["transition_spec"], args.env, args.observation))
    dqn = DoubleDqn(args, env, device)
    eval_net = params.network_for(env, args.hidden_sizes)
    frames = config["frame_stack"] > 0
    # With frames stored once, the stacks are gathered on the device.
    cache = dreplay.FrameCache(config, device) if frames else None
    reader = learner.batch_reader(decode=not frames)
    priorities = learner.priority_writer()
    publisher = learner.param_publisher()
    publisher.publish_state_dict(dqn.online.state_dict())
    log("training on %s, batches of %d from %s (link %s)" % (device, config["batch_size"],
                                                             address, args.link))
    start = time.monotonic()
    next_eval = start + args.eval_interval_s
    solved, last_return, loss = False, None, float("nan")
    while True:
        now = time.monotonic()
        if args.train_steps and dqn.steps >= args.train_steps:
            break
        if now - start > args.budget_s:
            break
        if groups:
            check_alive(groups)
        batch = reader.next(timeout_s=NEXT_TIMEOUT_S)
        if cache is None:
            loss, td = dqn.train_step(batch.torch(device))
        else:
            loss, td = train_on_frames(dqn, cache, batch)
        priorities.write(batch, td)
        if dqn.steps % args.publish_every == 0:
            # Encoding from the CPU copy; never waits for the link.
            publisher.publish_if_idle(params.encode_state_dict(dqn.online.state_dict(),
                                                               publisher.version + 1))
        if args.eval_episodes > 0 and time.monotonic() >= next_eval:
            eval_net.load_state_dict(dqn.online.state_dict())
            last_return = evaluate(eval_net, args.env, args.observation, args.eval_episodes,
                                   torch.device("cpu"))
            log("progress: %.1f s, %d train steps, loss %.4f, greedy return %.1f" % (
                time.monotonic() - start, dqn.steps, loss, last_return))
            if last_return >= args.solve_return:
                solved = True
                break
            next_eval = time.monotonic() + args.eval_interval_s
    elapsed = time.monotonic() - start
    publisher.publish_state_dict(dqn.online.state_dict())  # the final network, for the actors
    env_steps = sum(a["env_steps"] for a in reader_actor_lines(learner))
    log("summary: solved=%s seconds=%.1f train_steps=%d batches=%d env_steps=%d "
        "greedy_return=%s params_version=%d" % (
            solved, elapsed, dqn.steps, reader.stats()["batches"], env_steps,
            "none" if last_return is None else "%.1f" % last_return, publisher.version))
    return solved


def train_on_frames(dqn, cache, batch):
    """One step on a frame-stack server's batch: its new frames into the
    device cache, the stacks gathered there (uint8, the values the CPU
    decoding gives as floats). A row whose frames the cache lacks (none in
    normal running) is not trained on and keeps the batch's mean priority."""
    cache.add(batch)
    t = cache.stacks(batch)
    valid = t.pop("valid")
    for name in ("observations", "next_observations"):
        t[name] = t[name].float()
    if bool(valid.all()):
        return dqn.train_step(t)
    loss, td_valid = dqn.train_step({name: value[valid] for name, value in t.items()})
    td = torch.full(valid.shape, float(td_valid.mean()) if len(td_valid) else 1.0,
                    device=td_valid.device)
    td[valid] = td_valid
    return loss, td


def reader_actor_lines(learner):
    try:
        return learner.stats_reader().read_actors()
    except dreplay.Error:
        return []


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--server", default="", help="join this server (HOST:PORT); default: start one")
    p.add_argument("--token_file", default=None, help="the server's token file, with --server")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="torch device (default: cuda when present, else cpu)")
    p.add_argument("--provider", default="soft")
    p.add_argument("--link", default="10km-25g", help="emulated learner link (soft provider)")
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--observation", default="native", choices=("native", "pixels84"),
                   help="pixels84: MinAtar only, 4 stacked 84x84 frames, the Nature CNN")
    p.add_argument("--frame_stack", type=int, default=0, choices=(0, 4),
                   help="pixels84: store each frame once (4); the learner gathers the stacks "
                        "on --device from its frame cache")
    p.add_argument("--actors", type=int, default=4)
    p.add_argument("--actor_rate", type=float, default=150.0, help="steps/s per actor")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hidden", default="",
                   help="hidden sizes (default: the environment's: 64,64; MinAtar 128; "
                        "pixels84 512)")
    p.add_argument("--optimizer", default=None, choices=("adam", "rmsprop"),
                   help="default: adam; MinAtar rmsprop")
    p.add_argument("--lr", type=float, default=None, help="default: 1e-3; MinAtar 0.00025")
    p.add_argument("--target_update", type=int, default=None, help="default: 500; MinAtar 1000")
    p.add_argument("--max_grad_norm", type=float, default=10.0)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--min_replay", type=int, default=1000)
    p.add_argument("--publish_every", type=int, default=100)
    p.add_argument("--eval_interval_s", type=float, default=5.0)
    p.add_argument("--eval_episodes", type=int, default=100)
    p.add_argument("--solve_return", type=float, default=None,
                   help="default: 475; none (inf) for MinAtar")
    p.add_argument("--budget_s", type=float, default=600.0)
    p.add_argument("--train_steps", type=int, default=0, help="stop after this many (0: none)")
    p.add_argument("--bin_dir", default="", help="the binaries (default: Bazel's output)")
    p.add_argument("--out_dir", default="", help="logs of the processes started")
    args = p.parse_args(argv)
    minatar = args.env.startswith("MinAtar/")
    for name, plain, for_minatar in (("optimizer", "adam", "rmsprop"), ("lr", 1e-3, 0.00025),
                                     ("target_update", 500, 1000),
                                     ("solve_return", 475.0, float("inf"))):
        if getattr(args, name) is None:
            setattr(args, name, for_minatar if minatar else plain)
    if args.hidden:
        args.hidden_sizes = [int(h) for h in args.hidden.split(",") if h]
    else:
        args.hidden_sizes = params.default_hidden(dreplay.make_environment(args.env,
                                                                           args.observation))
    return args


def main(argv):
    args = parse_args(argv)
    groups, run_local = [], None
    address = args.server
    try:
        if not address:
            address, groups, run_local, args.token_file = start_service(args)
        solved = train(args, address, groups)
    finally:
        if run_local is not None:
            run_local.stop_all(groups)
    if args.train_steps:
        return 0
    return 0 if solved else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
