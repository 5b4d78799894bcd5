#!/usr/bin/env python3
"""Writes a MinAtar trace from the reference implementation, in the format of
`env_trace --env=MinAtar/...` (see rl/minatar/trace.h), so that the two can be
compared line for line.

The reference is not part of this repository: give the folder that holds its
`minatar` package (MinAtar v1.0.15) with --minatar_path. It needs NumPy.

    reference_trace.py --minatar_path=DIR --env=MinAtar/Breakout --seed=3 \
        --sticky_action_prob=0.1 --actions=1,0,3 --continue_after_terminal
    reference_trace.py --minatar_path=DIR --env=MinAtar/Seaquest --seed=3 \
        --steps=3000 --policy_seed=7 --continue_after_terminal

Sequence: Environment(game, sticky_action_prob=P, difficulty_ramping=True),
seed(S), reset(); then act(a) per action, and reset() after each terminal when
--continue_after_terminal is given (otherwise the trace stops there).

Actions come from --actions or, with --steps, from a behaviour policy chosen
for coverage (each game's own way of scoring and ending), seeded by
--policy_seed and reading only the public state; the actions taken are in the
trace, so replaying it needs no policy.
"""

import argparse
import importlib
import random
import sys

GAMES = {
    "MinAtar/Asterix": "asterix",
    "MinAtar/Breakout": "breakout",
    "MinAtar/Freeway": "freeway",
    "MinAtar/Seaquest": "seaquest",
    "MinAtar/SpaceInvaders": "space_invaders",
}

# Action indices of the reference's action map ['n','l','u','r','d','f'].
NOOP, LEFT, UP, RIGHT, DOWN, FIRE = range(6)


def obs_hex(state):
    return state.astype("uint8").tobytes(order="C").hex()


def cells(state, channel):
    """(row, column) of the active cells of one channel."""
    rows, cols = state[:, :, channel].nonzero()
    return list(zip(rows.tolist(), cols.tolist()))


def toward(from_col, to_col):
    if to_col < from_col:
        return LEFT
    if to_col > from_col:
        return RIGHT
    return NOOP


def breakout_policy(state, rng):
    """Moves the paddle to where the ball will come down."""
    paddle, ball, trail = cells(state, 0), cells(state, 1), cells(state, 2)
    if not paddle or not ball or not trail:
        return rng.randrange(6)
    (row, col), (last_row, last_col) = ball[0], trail[0]
    target, step = col, col - last_col
    if row > last_row and step != 0:
        for _ in range(8 - row):
            target += step
            if target < 0 or target > 9:
                target, step = min(max(target, 0), 9), -step
    return toward(paddle[0][1], target)


def space_invaders_policy(state, rng):
    """Keeps out of the columns of falling bullets, fires under aliens, and
    moves under the nearest alien."""
    cannon, aliens = cells(state, 0), cells(state, 1)
    if not cannon or not aliens:
        return FIRE
    col = cannon[0][1]
    danger = {c for r, c in cells(state, 5) if r >= 5}
    if col in danger:
        for move, c in ((LEFT, col - 1), (RIGHT, col + 1)):
            if 0 <= c <= 9 and c not in danger:
                return move
    if any(c == col for _, c in aliens) and rng.random() < 0.7:
        return FIRE
    target = min(aliens, key=lambda c: abs(c[1] - col))[1]
    move = toward(col, target)
    if move != NOOP and col + (1 if move == RIGHT else -1) in danger:
        return FIRE
    return move


def asterix_policy(state, rng):
    """Steps to a cell with no enemy on it or beside it, preferring gold."""
    player = cells(state, 0)
    if not player:
        return rng.randrange(6)
    row, col = player[0]
    enemies, gold = set(cells(state, 1)), set(cells(state, 3))
    moves = [(NOOP, row, col), (LEFT, row, col - 1), (RIGHT, row, col + 1),
             (UP, row - 1, col), (DOWN, row + 1, col)]
    safe = [(a, r, c) for a, r, c in moves if 1 <= r <= 8 and 0 <= c <= 9 and
            not {(r, c - 1), (r, c), (r, c + 1)} & enemies]
    if not safe:
        return rng.randrange(6)
    golden = [m for m in safe if (m[1], m[2]) in gold]
    return rng.choice(golden or safe)[0]


def freeway_policy(state, rng):
    return UP if rng.random() < 0.8 else rng.choice((NOOP, DOWN))


def seaquest_policy(state, rng):
    """Shoots enemies in its row, collects divers, and surfaces when the diver
    bar is full or air is low."""
    front, divers = cells(state, 0), cells(state, 9)
    oxygen, carried = len(cells(state, 7)), len(cells(state, 8))
    if not front:
        return rng.randrange(6)
    row, col = front[0]
    if carried >= 6 or (oxygen <= 2 and carried > 0):
        return UP
    if row == 0:
        return DOWN
    enemies = [c for r, c in cells(state, 5) + cells(state, 6) if r == row]
    if enemies and rng.random() < 0.8:
        target = min(enemies, key=lambda c: abs(c - col))
        facing_right = any(c < col for _, c in cells(state, 1))
        if (target > col) != facing_right:
            return RIGHT if target > col else LEFT
        return FIRE
    if rng.random() < 0.3:
        return FIRE
    if divers:
        target = min(divers, key=lambda c: abs(c[0] - row) + abs(c[1] - col))
        if target[0] != row:
            return UP if target[0] < row and target[0] > 0 else DOWN
        return toward(col, target[1])
    return rng.choice((LEFT, RIGHT, FIRE, DOWN))


POLICIES = {
    "MinAtar/Asterix": asterix_policy,
    "MinAtar/Breakout": breakout_policy,
    "MinAtar/SpaceInvaders": space_invaders_policy,
    "MinAtar/Freeway": freeway_policy,
    "MinAtar/Seaquest": seaquest_policy,
}


def behaviour(env_name, state, rng, epsilon):
    policy = POLICIES.get(env_name)
    if policy is None or rng.random() < epsilon:
        return rng.randrange(6)
    return policy(state, rng)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minatar_path", required=True)
    parser.add_argument("--env", required=True, choices=sorted(GAMES))
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--sticky_action_prob", type=float, default=0.1)
    parser.add_argument("--actions", default=None)
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--policy_seed", type=int, default=0)
    parser.add_argument("--epsilon", type=float, default=0.2)
    parser.add_argument("--continue_after_terminal", action="store_true")
    args = parser.parse_args()

    sys.path.insert(0, args.minatar_path)
    minatar = importlib.import_module("minatar")
    env = minatar.Environment(GAMES[args.env], sticky_action_prob=args.sticky_action_prob,
                              difficulty_ramping=True)
    env.seed(args.seed)
    env.reset()
    out = sys.stdout
    out.write('{"reset":true,"obs_hex":"%s"}\n' % obs_hex(env.state()))

    if args.actions is not None:
        actions = [int(a) for a in args.actions.split(",") if a]
        steps = len(actions)
    else:
        actions, steps = None, args.steps
    rng = random.Random(args.policy_seed)
    for t in range(1, steps + 1):
        if actions is not None:
            action = actions[t - 1]
        else:
            action = behaviour(args.env, env.state(), rng, args.epsilon)
        reward, terminal = env.act(action)
        if reward != int(reward):
            raise ValueError("reward %r is not an integer" % reward)
        out.write('{"t":%d,"action":%d,"reward":%d,"terminated":%s,"obs_hex":"%s"}\n' %
                  (t, action, int(reward), "true" if terminal else "false",
                   obs_hex(env.state())))
        if terminal:
            if not args.continue_after_terminal:
                break
            env.reset()
            out.write('{"reset":true,"obs_hex":"%s"}\n' % obs_hex(env.state()))


if __name__ == "__main__":
    main()
