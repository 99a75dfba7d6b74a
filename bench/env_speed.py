"""Environment speed: env steps per second against users and points, and the CartPole ratio.

Rates are per CPU second of the process (``time.process_time``, every thread counted), which a
shared machine's load disturbs less than wall-clock time (printed beside it). Each rate is the
best of ``--repeats`` timed runs (a run the load slowed down is not the env's speed). One
process, one run: Gymnasium's ``CartPole-v1`` is stepped (random actions) right before each
mdpsim row, so the ratio compares like with like. The single-agent env is a user's (``user_0``
reports every tick, the others follow the strategies; EM at eps 6, the default attacks and
queries, 20-tick episodes with their resets on seed 0, whose domain and fits the env keeps); the
"new seed per episode" row resets without a seed, as a training loop that never replays a game,
so every episode builds its domain and fits; the parallel env row counts agent-steps (every
agent acts each step); the vector row (``vector_env``, ``--num-envs`` games of ``user_0``,
autoreset on new seeds) counts env-steps.

``--compare TREE`` measures every row of another checkout too (e.g. a ``git worktree`` of
main), in a child process that imports that tree's package (its static view,
``TREE/.typecheck``, which ``python tools/static_view.py`` builds there); the rows alternate
between the two, so a drift in the machine's load hits both. Usage:
``python bench/env_speed.py [--users 5 50] [--points 80 200] [--steps 600] [--repeats 3]
[--parallel-users 1000] [--num-envs 64] [--compare ../main]
[--plot docs/img/env_speed.png]``; prints a
Markdown table. ``--breakdown`` prints instead where a step of the first row's env goes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym

from mdpsim.env import parallel_env, single_agent_env
from mdpsim.simulation import scenario as sc


def _scenario(n_users: int, n_points: int, ticks: int = 20):
    return sc.from_dict(
        {
            "scenario": {"name": "env_speed", "seed": 3, "ticks": ticks},
            "network": {"source": "helsinki-test"},
            "domain": {"n_points": n_points},
            "users": {"count": n_users},
            "mechanism": {"name": "em", "epsilon_per_km": 6.0},
        }
    )


def _best(run, repeats: int) -> tuple[float, float]:
    """``run()`` -> steps, ``repeats`` times: the best (CPU s, wall s) per step."""
    cpu = wall = float("inf")
    for _ in range(repeats):
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        steps = run()
        cpu = min(cpu, (time.process_time() - start_cpu) / steps)
        wall = min(wall, (time.perf_counter() - start_wall) / steps)
    return cpu, wall


def cartpole_seconds_per_step(steps: int, repeats: int) -> tuple[float, float]:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    env.action_space.seed(0)

    def run() -> int:
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        return steps

    return _best(run, repeats)


def single_seconds_per_step(
    n_users: int, n_points: int, steps: int, repeats: int
) -> tuple[float, float]:
    env = single_agent_env(_scenario(n_users, n_points), agent="user_0")
    env.reset(seed=0)
    env.step(1)  # warm: the first tick tabulates what later ticks reuse
    env.reset(seed=0)

    def run() -> int:
        for _ in range(steps):
            _, _, _, done, _ = env.step(1)
            if done:
                env.reset(seed=0)  # the domain and the mechanism are cached per seed
        return steps

    return _best(run, repeats)


def fresh_seconds_per_step(
    n_users: int, n_points: int, steps: int, repeats: int
) -> tuple[float, float]:
    """As :func:`single_seconds_per_step`, each episode on a new seed (Gymnasium's ``reset()``
    without one, as a training loop that never replays a game): its domain and fits built."""
    env = single_agent_env(_scenario(n_users, n_points), agent="user_0")
    env.reset(seed=0)

    def run() -> int:
        for _ in range(steps):
            _, _, _, done, _ = env.step(1)
            if done:
                env.reset()
        return steps

    return _best(run, repeats)


def vector_seconds_per_env_step(
    n_users: int, n_points: int, steps: int, repeats: int, num_envs: int
) -> tuple[float, float]:
    """``vector_env`` of ``num_envs`` games of ``user_0`` (Gymnasium's autoreset, each env's
    later episodes on new seeds, as training runs): seconds per env-step (a vector step is
    ``num_envs`` of them; the autoreset's step, which plays no tick, counts as Gymnasium
    counts it). ``steps`` should be whole episodes (21 vector steps each), so that every
    run pays its share of resets."""
    import numpy as np

    from mdpsim.env import vector_env  # here: a --compare tree from before it has the other rows

    env = vector_env(_scenario(n_users, n_points), num_envs=num_envs, agent="user_0")
    env.reset(seed=0)
    actions = np.ones(num_envs, dtype=np.int64)
    env.step(actions)  # warm

    def run() -> int:
        for _ in range(steps):
            env.step(actions)
        return steps * num_envs

    return _best(run, repeats)


def parallel_seconds_per_agent_step(
    n_users: int, n_points: int, steps: int, repeats: int
) -> tuple[float, float]:
    env = parallel_env(_scenario(n_users, n_points, ticks=steps * repeats + 5))
    env.reset(seed=0)
    for _ in range(5):  # warm: the first ticks tabulate what later ticks reuse
        env.step(env.strategy_actions())

    def run() -> int:
        for _ in range(steps):
            env.step(env.strategy_actions())
        return steps * len(env.possible_agents)

    return _best(run, repeats)


def breakdown(n_users: int, n_points: int, steps: int) -> list[tuple[str, float]]:
    """Wall microseconds per step of the single-agent env by part: the tick's phases as the
    model times them (``model.log.timings``), the resets, and the rest (the env's decisions,
    the tick's row, rewards and observations)."""
    env = single_agent_env(_scenario(n_users, n_points), agent="user_0")
    env.reset(seed=0)
    env.step(1)
    env.reset(seed=0)
    parts: dict[str, float] = {}
    reset_s = 0.0

    def add_timings() -> None:
        for row in env.unwrapped.model.log.timings[1:]:  # tick 0's generation is the reset's
            for key, value in row.items():
                if key.endswith("_s"):
                    parts[key] = parts.get(key, 0.0) + value

    start = time.perf_counter()
    for _ in range(steps):
        _, _, _, done, _ = env.step(1)
        if done:
            add_timings()
            began = time.perf_counter()
            env.reset(seed=0)
            reset_s += time.perf_counter() - began
    total_s = time.perf_counter() - start
    add_timings()
    names = {"mechanism_s": "mechanism (refresh)", "report_s": "reports (filters, sampler)",
             "query_s": "queries (filters, elimination)", "attack_s": "attacks (filter, scores)",
             "move_s": "mobility"}  # fmt: skip
    out = [(names.get(key, key), value / steps * 1e6) for key, value in parts.items()]
    out.append(("reset (per step, 20-tick episodes)", reset_s / steps * 1e6))
    rest = total_s - reset_s - sum(parts.values())
    out.append(("env: decisions, tick row, rewards, observations", rest / steps * 1e6))
    return out


def measure(kind: str, n_users: int, n_points: int, args) -> dict:
    """One row: the env's and CartPole's CPU and wall seconds per (agent-)step."""
    cart_cpu, _ = cartpole_seconds_per_step(20_000, args.repeats)
    if kind == "single":
        cpu, wall = single_seconds_per_step(n_users, n_points, args.steps, args.repeats)
    elif kind == "fresh":
        cpu, wall = fresh_seconds_per_step(n_users, n_points, args.steps, args.repeats)
    elif kind == "vector":  # whole episodes (20 ticks and the autoreset's step) per run
        vec_steps = 21 * max(1, round(args.steps / args.num_envs / 21))
        cpu, wall = vector_seconds_per_env_step(
            n_users, n_points, vec_steps, args.repeats, args.num_envs
        )
    else:
        cpu, wall = parallel_seconds_per_agent_step(n_users, n_points, 20, args.repeats)
    return {"env": kind, "users": n_users, "points": n_points, "cpu_s": cpu, "wall_s": wall,
            "cartpole_cpu_s": cart_cpu, "num_envs": args.num_envs}  # fmt: skip


def _measured_in(tree: str, kind: str, n_users: int, n_points: int, args) -> dict:
    """:func:`measure` in a child process importing ``tree``'s package (its static view)."""
    command = [sys.executable, __file__, "--row", kind, str(n_users), str(n_points),
               "--steps", str(args.steps), "--repeats", str(args.repeats),
               "--num-envs", str(args.num_envs)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve() / ".typecheck")}
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1])


def _line(label: str, row: dict) -> str:
    rate, cart = 1.0 / row["cpu_s"], 1.0 / row["cartpole_cpu_s"]
    kind = {"single": "single (user)", "fresh": "single (user), a new seed per episode",
            "parallel": "parallel (agent-steps)",
            "vector": f"vector, {row.get('num_envs')} envs (env-steps)"}[row["env"]]  # fmt: skip
    return (f"| {label}{kind} | {row['users']} | {row['points']} | {rate:,.0f} | "
            f"{row['cpu_s'] * 1e6:,.0f} | {1.0 / row['wall_s']:,.0f} | {cart:,.0f} | "
            f"{rate / cart:.4f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[5, 50])
    parser.add_argument("--points", type=int, nargs="+", default=[80, 200])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per row (best)")
    parser.add_argument("--parallel-users", type=int, default=1000)
    parser.add_argument("--num-envs", type=int, default=64, help="the vector env's row; 0: none")
    parser.add_argument("--compare", default=None, help="another checkout to measure beside")
    parser.add_argument("--plot", default=None, help="write steps/s against users here")
    parser.add_argument("--row", nargs=3, default=None, help=argparse.SUPPRESS)  # a child
    parser.add_argument("--breakdown", action="store_true", help="where a step's time goes")
    args = parser.parse_args()
    if args.breakdown:  # the first users and points given
        parts = breakdown(args.users[0], args.points[0], args.steps * args.repeats)
        total = sum(us for _, us in parts)
        print(
            f"| part ({args.users[0]} users, {args.points[0]} points) | wall us per step | share |"
        )
        print("|---|---:|---:|")
        for name, us in parts:
            print(f"| {name} | {us:,.0f} | {us / total:.0%} |")
        print(f"| total | {total:,.0f} | |")
        return
    if args.row:  # one row as JSON, for --compare's child process
        kind, n_users, n_points = args.row[0], int(args.row[1]), int(args.row[2])
        print(json.dumps(measure(kind, n_users, n_points, args)))
        return
    print(f"load average {os.getloadavg()[0]:.2f} at start\n")
    print("| env | users | points | steps per CPU s | CPU us per step | steps per wall s | "
          "CartPole steps per CPU s | ratio |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = [("single", u, p) for p in args.points for u in args.users]
    rows.append(("fresh", args.users[0], args.points[0]))
    if args.num_envs:
        rows.append(("vector", args.users[0], args.points[0]))
    if args.parallel_users:
        rows.append(("parallel", args.parallel_users, args.points[0]))
    plotted = []
    for kind, n_users, n_points in rows:
        measured = []
        if args.compare:
            measured.append(("before: ", _measured_in(args.compare, kind, n_users, n_points, args)))
        measured.append(("after: " if args.compare else "", measure(kind, n_users, n_points, args)))
        for label, row in measured:
            print(_line(label, row), flush=True)
            if kind == "single":
                plotted.append((label, n_users, n_points, 1.0 / row["cpu_s"]))
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    if args.plot:
        _plot(plotted, args.plot)


def _plot(rows, path: str) -> None:
    """Steps per CPU second against users, a line per point count (dashed: ``--compare``'s
    tree); ``rows`` are ``(label, users, points, rate)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for (label, n_points), style in _styles(rows).items():
        mine = [(u, r) for lab, u, p, r in rows if (lab, p) == (label, n_points)]
        ax.plot(*zip(*mine, strict=True), style, marker="o", label=f"{label}{n_points} points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("users")
    ax.set_ylabel("single-agent env steps / CPU s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _styles(rows) -> dict[tuple[str, int], str]:
    """A line style per (tree, points): solid for this tree, dashed for the compared one."""
    keys = sorted({(label, p) for label, _, p, _ in rows})
    return {(label, p): "--" if label == "before: " else "-" for label, p in keys}


if __name__ == "__main__":
    main()
