#!/usr/bin/env python3
"""gpu_check: can dreplay feed a GPU learner as fast as the GPU trains?

Two arms, one after the other, with the same learner: the Nature-CNN double
DQN on MinAtar/Breakout's pixels84 stacks (4 frames of 84x84), batch
--batch_size, bf16 autocast on CUDA (--bf16), Adam:

  local    batches gathered on the device from a device-resident ring of
           frames (a recorded trace, uniform sampling): what the GPU does
           with no replay service at all, the ceiling;
  dreplay  batches from a replay server and C++ actors on this host (soft
           provider, pixels84 with frames stored once, buffer placement,
           prioritized), read ahead by a thread (BatchReader.prefetched),
           the frames kept on the device by a dreplay.FrameCache and the
           stacks gathered there.

It prints each arm's updates a second and their ratio (the goal is at
least 0.9), the bytes the dreplay arm copies from host to device a second
and an update, and the CPU cores the learner process and the service
(server and actors) use. --smoke runs a few updates of each arm on the CPU
device, to check the tool itself on a machine without a GPU; its figures
say nothing about a GPU.

    tools/gpu_check.sh                      # builds, then runs this
    tools/gpu_check.sh --smoke --json
"""

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "launch"))

import run_local  # noqa: E402

ENV = "MinAtar/Breakout"
DEPTH = 4
FRAME = 84 * 84
GAMMA = 0.99


def log(msg):
    print("gpu_check: " + msg, file=sys.stderr, flush=True)


class Learner:
    """Double DQN on the Nature CNN: one gradient step per batch of uint8
    stacks on the device."""

    def __init__(self, env, device, bf16, seed):
        import torch
        from dreplay import params
        torch.manual_seed(seed)
        self.torch = torch
        self.device = device
        self.bf16 = bf16
        self.online = params.network_for(env).to(device)
        self.target = params.network_for(env).to(device)
        self.target.load_state_dict(self.online.state_dict())
        self.optimizer = torch.optim.Adam(self.online.parameters(), lr=1e-4, eps=1.5e-4)
        self.steps = 0

    def step(self, t):
        """One update on t's tensors; returns |TD errors| (float32)."""
        torch = self.torch
        obs = t["observations"].float()
        nxt = t["next_observations"].float()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            q = self.online(obs).gather(1, t["actions"].unsqueeze(1)).squeeze(1)
            with torch.no_grad():
                best = self.online(nxt).argmax(1, keepdim=True)
                next_q = self.target(nxt).gather(1, best).squeeze(1)
        q = q.float()
        target = t["rewards"] + t["discounts"] * next_q.float() * (1.0 - t["dones"])
        loss = (t["weights"] * torch.nn.functional.huber_loss(q, target, reduction="none")).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.online.parameters(), 10.0)
        self.optimizer.step()
        self.steps += 1
        if self.steps % 1000 == 0:
            self.target.load_state_dict(self.online.state_dict())
        return (q - target).detach().abs()


def record_ring(steps, seed, device):
    """A random policy's trace as device tensors: frames [F, 84*84] uint8 and,
    per 1-step transition, its two stacks' frame rows [M, 4] and columns."""
    import torch
    import dreplay
    env = dreplay.make_environment(ENV, "pixels84")
    rng = np.random.default_rng(seed)
    frames, obs_rows, next_rows, actions, rewards, dones = [], [], [], [], [], []
    stack = None
    observation = env.reset(seed)
    while len(actions) < steps:
        if stack is None:
            frames.append(np.asarray(observation[-FRAME:], np.uint8))
            stack = [len(frames) - 1] * DEPTH
        action = int(rng.integers(env.action_count))
        observation, reward, terminated, truncated = env.step(action)
        frames.append(np.asarray(observation[-FRAME:], np.uint8))
        next_stack = stack[1:] + [len(frames) - 1]
        obs_rows.append(stack)
        next_rows.append(next_stack)
        actions.append(action)
        rewards.append(reward)
        dones.append(1.0 if terminated else 0.0)
        stack = next_stack
        if terminated or truncated:
            stack = None
            observation = env.reset()
    as_device = lambda a, dtype: torch.as_tensor(np.asarray(a), dtype=dtype, device=device)
    return dict(frames=as_device(np.stack(frames), torch.uint8),
                obs_rows=as_device(obs_rows, torch.int64),
                next_rows=as_device(next_rows, torch.int64),
                actions=as_device(actions, torch.int64),
                rewards=as_device(rewards, torch.float32),
                dones=as_device(dones, torch.float32)), env


def run_local_arm(learner, ring, batch_size, warmup, seconds, max_updates):
    """Updates/s with batches gathered from the device ring."""
    torch = learner.torch
    count = ring["obs_rows"].shape[0]
    discounts = torch.full((batch_size,), GAMMA, device=learner.device)
    weights = torch.ones(batch_size, device=learner.device)

    def batch():
        rows = torch.randint(count, (batch_size,), device=learner.device)
        return dict(observations=ring["frames"][ring["obs_rows"][rows]].reshape(batch_size, -1),
                    next_observations=ring["frames"][ring["next_rows"][rows]].reshape(
                        batch_size, -1),
                    actions=ring["actions"][rows], rewards=ring["rewards"][rows],
                    discounts=discounts, dones=ring["dones"][rows], weights=weights)

    return measure(learner, lambda: learner.step(batch()), warmup, seconds, max_updates)


def measure(learner, one_update, warmup, seconds, max_updates):
    """(updates, seconds, learner CPU seconds) over the window after warmup."""
    torch = learner.torch
    for _ in range(warmup):
        one_update()
    sync(torch, learner.device)
    start, cpu = time.monotonic(), process_cpu_s()
    updates = 0
    while updates < max_updates and time.monotonic() - start < seconds:
        one_update()
        updates += 1
    sync(torch, learner.device)
    return updates, time.monotonic() - start, process_cpu_s() - cpu


def sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def process_cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def children_cpu_s(processes):
    """CPU seconds the processes have used (from /proc)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for p in processes:
        try:
            with open("/proc/%d/stat" % p.popen.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def start_service(args, out_dir):
    """The server and C++ actors, as run_local starts them; returns
    (address, token file, [actors, [server]])."""
    argv = ["--env", ENV, "--observation", "pixels84", "--frame_stack", "4",
            "--actors", str(args.actors), "--batch_size", str(args.batch_size),
            "--min_replay", str(args.min_replay), "--capacity", str(args.capacity),
            "--actor_rate", str(args.actor_rate), "--seed", str(args.seed), "--out_dir", out_dir]
    if args.bin_dir:
        argv += ["--bin_dir", args.bin_dir]
    run_args = run_local.parse_args(argv)
    layout = run_local.actor_layout(run_args)
    port_file = os.path.join(out_dir, "server.port")
    token_file, credentials = run_local.make_credentials(out_dir, args.actors)
    server = run_local.Process("server",
                               run_local.server_argv(run_args, port_file, layout, token_file),
                               os.path.join(out_dir, "server.log"))
    groups = [[], [server]]
    try:
        port = run_local.wait_for_port(server, port_file, run_local.SERVER_START_TIMEOUT_S)
        address = "127.0.0.1:%d" % port
        groups[0] = [run_local.Process("actor-%d" % i,
                                       run_local.actor_argv(run_args, address, i, credentials[i]),
                                       os.path.join(out_dir, "actor-%d.log" % i))
                     for i in range(args.actors)]
    except BaseException:
        run_local.stop_all(groups)
        raise
    return address, token_file, groups


def run_dreplay_arm(learner, args, out_dir):
    """Updates/s with batches from dreplay through a device FrameCache, and
    the host-to-device bytes and the service's CPU."""
    import dreplay
    address, token_file, groups = start_service(args, out_dir)
    try:
        session = dreplay.connect(address, role="learner", token_file=token_file,
                                  provider="soft", link="none", connect_timeout_s=30.0)
        cache = dreplay.FrameCache(session.config, learner.device)
        reader = session.batch_reader(decode=False)
        # A thread reads (and copies) the next batches while the GPU trains.
        batches = reader.prefetched(timeout_s=60.0, ahead=2)
        priorities = session.priority_writer()
        moved = [0]

        def one_update():
            batch = next(batches)
            cache.add(batch)
            t = cache.stacks(batch)
            moved[0] += sum(getattr(batch, name).nbytes for name in (
                "frame_indices", "frame_sequences", "frames", "observation_slots",
                "observation_sequences", "next_observation_slots", "next_observation_sequences",
                "actions", "rewards", "discounts", "dones", "weights"))
            valid = t.pop("valid")
            td = learner.step(t)
            if not bool(valid.all()):
                td = td.masked_fill(~valid, float(td.mean()))
            priorities.write(batch, td)

        service = [p for group in groups for p in group]
        service_cpu = children_cpu_s(service)
        moved_before = 0
        for _ in range(args.warmup):
            one_update()
        moved_before, service_cpu = moved[0], children_cpu_s(service)
        updates, seconds, cpu = measure(learner, one_update, 0, args.seconds, args.max_updates)
        batches.close()
        return dict(updates=updates, seconds=seconds, learner_cpu_s=cpu,
                    service_cpu_s=children_cpu_s(service) - service_cpu,
                    h2d_bytes=moved[0] - moved_before,
                    frames_added=cache.frames_added, reader=reader.stats())
    finally:
        run_local.stop_all(groups)


def parse_args(argv):
    import torch
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--smoke", action="store_true",
                   help="a few updates of each arm on the CPU device (checks the tool only)")
    p.add_argument("--device", default=None,
                   help="torch device (default: cuda when present; --smoke: cpu)")
    p.add_argument("--batch_size", type=int, default=None, help="default 512; --smoke 32")
    p.add_argument("--bf16", default="auto", choices=("auto", "on", "off"),
                   help="bf16 autocast (auto: on CUDA)")
    p.add_argument("--seconds", type=float, default=None,
                   help="each arm's measured window (default 60; --smoke 30, or its updates)")
    p.add_argument("--max_updates", type=int, default=None,
                   help="stop each window after this many updates (default: none; --smoke 8)")
    p.add_argument("--warmup", type=int, default=None, help="updates before the window (20; 2)")
    p.add_argument("--actors", type=int, default=None, help="C++ actors (default 8; --smoke 1)")
    p.add_argument("--actor_rate", type=float, default=1e6, help="steps/s per actor")
    p.add_argument("--capacity", type=int, default=None, help="replay slots (65536; 4096)")
    p.add_argument("--min_replay", type=int, default=None, help="(default 8192; --smoke 256)")
    p.add_argument("--trace_steps", type=int, default=None,
                   help="the local arm's ring (default 20000; --smoke 500)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bin_dir", default="", help="the binaries (default: Bazel's output)")
    p.add_argument("--out_dir", default="", help="the service's logs (default: a new /tmp dir)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = p.parse_args(argv)
    smoke = args.smoke
    defaults = dict(batch_size=(32, 512), seconds=(30.0, 60.0), max_updates=(8, 10 ** 9),
                    warmup=(2, 20), actors=(1, 8), capacity=(4096, 65536),
                    min_replay=(256, 8192), trace_steps=(500, 20000))
    for name, (small, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, small if smoke else full)
    if args.device is None:
        args.device = "cpu" if smoke or not torch.cuda.is_available() else "cuda"
    for name in ("batch_size", "actors", "capacity", "min_replay", "trace_steps"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1" % name)
    if args.capacity & (args.capacity - 1):
        p.error("--capacity must be a power of two")
    return args


def main(argv):
    args = parse_args(argv)
    import tempfile
    import torch
    device = torch.device(args.device)
    bf16 = args.bf16 == "on" or (args.bf16 == "auto" and device.type == "cuda")
    out_dir = args.out_dir or tempfile.mkdtemp(prefix="dreplay-gpu-check-")
    os.makedirs(out_dir, exist_ok=True)
    log("device %s (%s), batch %d, bf16 %s; logs in %s" % (
        device, torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU",
        args.batch_size, bf16, out_dir))
    ring, env = record_ring(args.trace_steps, args.seed, device)
    learner = Learner(env, device, bf16, args.seed)
    local = run_local_arm(learner, ring, args.batch_size, args.warmup, args.seconds,
                          args.max_updates)
    log("local: %d updates in %.1f s" % (local[0], local[1]))
    learner = Learner(env, device, bf16, args.seed)
    fed = run_dreplay_arm(learner, args, out_dir)
    log("dreplay: %d updates in %.1f s" % (fed["updates"], fed["seconds"]))
    local_rate = local[0] / local[1]
    fed_rate = fed["updates"] / fed["seconds"]
    report = dict(
        device=str(device), smoke=args.smoke, batch_size=args.batch_size, bf16=bf16,
        actors=args.actors, local_updates=local[0], local_updates_per_s=local_rate,
        dreplay_updates=fed["updates"], dreplay_updates_per_s=fed_rate,
        ratio=fed_rate / local_rate,
        dreplay_transitions_per_s=fed_rate * args.batch_size,
        h2d_bytes_per_s=fed["h2d_bytes"] / fed["seconds"],
        h2d_bytes_per_update=fed["h2d_bytes"] / max(1, fed["updates"]),
        raw_stacks_bytes_per_update=2 * DEPTH * FRAME * args.batch_size,
        learner_cpu_cores_local=local[2] / local[1],
        learner_cpu_cores_dreplay=fed["learner_cpu_s"] / fed["seconds"],
        service_cpu_cores=fed["service_cpu_s"] / fed["seconds"],
        cache_hits=fed["reader"]["cache_hits"], cache_misses=fed["reader"]["cache_misses"])
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print("local    %8.1f updates/s (batch %d on %s, bf16 %s)" % (
            local_rate, args.batch_size, device, bf16))
        print("dreplay  %8.1f updates/s = %.0f transitions/s; ratio %.3f (goal >= 0.9)" % (
            fed_rate, fed_rate * args.batch_size, report["ratio"]))
        print("host to device %.1f MB/s, %.0f B an update (raw stacks: %d B); CPU cores: "
              "learner %.2f (local %.2f), server and actors %.2f" % (
                  report["h2d_bytes_per_s"] / 1e6, report["h2d_bytes_per_update"],
                  report["raw_stacks_bytes_per_update"], report["learner_cpu_cores_dreplay"],
                  report["learner_cpu_cores_local"], report["service_cpu_cores"]))
        if args.smoke:
            print("smoke run on %s: these figures check the tool, not a GPU" % device)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
