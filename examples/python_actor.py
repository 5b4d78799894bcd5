#!/usr/bin/env python3
"""A Python actor: steps dreplay's C++ environments through the bindings,
acts epsilon-greedily with the parameters the learner publishes, and inserts
n-step transitions into the replay server.

    PYTHONPATH=bazel-bin/python/lib /usr/bin/python3 examples/python_actor.py \\
        --server 127.0.0.1:18515 --actor_id 0 --token_file actor-0.credential --steps 10000

It takes the environment, n and gamma from the server's transition spec (the
server says what its payloads are), so it inserts what the C++ learner and
the Python learner (examples/python_learner.py) train on, next to C++ actors.
Transitions follow rl/transition.h: from an observation, an action; the
discounted sum of up to n rewards; discount gamma^steps; done only when the
episode terminated within them (a time-limit cut bootstraps). They go to the
server in chunks of --flush_batch, with the server's maximum priority.

Until the learner publishes parameters the actor acts with its own freshly
initialised network (seeded by --seed); it fetches newer ones every
--param_refresh_steps steps. A summary line closes the run.
"""

import argparse
import collections
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


def log(msg):
    print("python_actor: " + msg, flush=True)


class NStep:
    """n-step transitions of one environment, as rows for append_transitions."""

    def __init__(self, n, gamma):
        self.n, self.gamma = n, gamma
        self.window = collections.deque()  # (observation, action, reward)
        self.rows = []

    def _emit(self, next_observation, done):
        obs, action, _ = self.window[0]
        rewards = [r for _, _, r in self.window]
        ret = sum(r * self.gamma ** i for i, r in enumerate(rewards))
        self.rows.append((obs, action, ret, next_observation, done,
                          self.gamma ** len(rewards), len(rewards)))
        self.window.popleft()

    def step(self, observation, action, reward, next_observation, terminated, truncated):
        self.window.append((observation, action, reward))
        if terminated or truncated:
            while self.window:
                self._emit(next_observation, terminated)
        elif len(self.window) == self.n:
            self._emit(next_observation, False)

    def take(self):
        rows, self.rows = self.rows, []
        return rows


def append_rows(writer, rows):
    obs, actions, rewards, next_obs, dones, discounts, steps = zip(*rows)
    writer.append_transitions(np.stack(obs), actions, rewards, np.stack(next_obs), dones,
                              discounts=discounts, steps=steps)


def run(args):
    session = dreplay.connect(args.server, role="actor", actor_id=args.actor_id,
                              token_file=args.token_file, provider=args.provider)
    spec = dreplay.parse_transition_spec(session.config["transition_spec"])
    env = dreplay.make_environment(spec["env"])
    if env.observation_size != spec["observation_size"]:  # MinAtar rendered to frames
        env = dreplay.make_environment(spec["env"], "pixels84")
    torch.manual_seed(args.seed)
    net = params.network_for(env, [int(h) for h in args.hidden.split(",") if h] or None)
    writer = session.experience_writer(max_batch=args.flush_batch)
    fetcher = session.param_fetcher()
    nstep = NStep(spec["n_step"], spec["gamma"])
    rng = np.random.default_rng(args.seed + args.actor_id)
    log("actor %d on %s: %s, n=%d, gamma=%g, epsilon %g" % (
        args.actor_id, args.server, spec["env"], spec["n_step"], spec["gamma"], args.epsilon))

    start = time.monotonic()
    obs = env.reset(seed=args.seed * 1000 + args.actor_id)
    episode_return, returns, steps, loaded = 0.0, [], 0, 0
    pending = []
    while steps < args.steps and time.monotonic() - start < args.duration_s:
        if steps % args.param_refresh_steps == 0:
            data = fetcher.fetch_if_newer()
            if data is not None:
                params.load_state_dict(net, data)
                loaded += 1
        if rng.random() < args.epsilon:
            action = int(rng.integers(env.action_count))
        else:
            with torch.no_grad():
                action = int(net(torch.from_numpy(obs).unsqueeze(0)).argmax(1))
        next_obs, reward, terminated, truncated = env.step(action)
        nstep.step(obs, action, reward, next_obs, terminated, truncated)
        episode_return += reward
        steps += 1
        pending += nstep.take()
        if len(pending) >= args.flush_batch:
            append_rows(writer, pending)
            pending = []
        if terminated or truncated:
            returns.append(episode_return)
            episode_return = 0.0
            obs = env.reset()
        else:
            obs = next_obs
    if pending:
        append_rows(writer, pending)
    writer.flush()
    recent = returns[-10:]
    log("summary: env_steps=%d episodes=%d mean_return_last10=%.1f committed=%d "
        "params_loaded=%d params_version=%d" % (
            steps, len(returns), float(np.mean(recent)) if recent else 0.0,
            writer.stats()["committed"], loaded, fetcher.version))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--server", required=True, help="HOST:PORT of the replay server")
    p.add_argument("--actor_id", type=int, default=0, help="below the server's --actor_ids (default: its --leases)")
    p.add_argument("--token_file", default=None,
                   help="this actor's own credential (actor_credentials writes it)")
    p.add_argument("--provider", default="soft")
    p.add_argument("--hidden", default="",
                   help="the learner's network (default: the environment's)")
    p.add_argument("--epsilon", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=10000, help="environment steps")
    p.add_argument("--duration_s", type=float, default=float("inf"))
    p.add_argument("--flush_batch", type=int, default=32)
    p.add_argument("--param_refresh_steps", type=int, default=200)
    return p.parse_args(argv)


if __name__ == "__main__":
    run(parse_args(sys.argv[1:]))
