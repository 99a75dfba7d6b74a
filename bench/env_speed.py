"""Environment speed: env steps per second against users and points, and the CartPole ratio.

Rates are per CPU second of the process (``time.process_time``, every thread counted), which a
shared machine's load disturbs less than wall-clock time. One process, one run: Gymnasium's
``CartPole-v1`` is stepped (random actions) right before each mdpsim row, so the ratio compares
like with like. The single-agent env is a user's (``user_0`` reports every tick, the others
follow the strategies; EM at eps 6, the default attacks and queries, 20-tick episodes); the
parallel env row counts agent-steps (every agent acts each step). Usage:
``python bench/env_speed.py [--users 5 50] [--points 80 200] [--steps 600]
[--parallel-users 1000] [--plot docs/img/env_speed.png]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import time

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


def cartpole_steps_per_s(steps: int) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    env.action_space.seed(0)
    start = time.process_time()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    return steps / (time.process_time() - start)


def single_steps_per_s(n_users: int, n_points: int, steps: int) -> float:
    env = single_agent_env(_scenario(n_users, n_points), agent="user_0")
    env.reset(seed=0)
    env.step(1)  # warm: the first tick tabulates what later ticks reuse
    env.reset(seed=0)
    start = time.process_time()
    for _ in range(steps):
        _, _, _, done, _ = env.step(1)
        if done:
            env.reset(seed=0)  # the domain and the mechanism are cached per seed
    return steps / (time.process_time() - start)


def parallel_agent_steps_per_s(n_users: int, n_points: int, steps: int) -> float:
    env = parallel_env(_scenario(n_users, n_points, ticks=steps))
    env.reset(seed=0)
    start = time.process_time()
    for _ in range(steps):
        env.step(env.strategy_actions())
    return steps * len(env.possible_agents) / (time.process_time() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[5, 50])
    parser.add_argument("--points", type=int, nargs="+", default=[80, 200])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--parallel-users", type=int, default=1000)
    parser.add_argument("--plot", default=None, help="write steps/s against users here")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at start\n")
    print("| env | users | points | steps per CPU s | CartPole steps per CPU s | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = []
    for n_points in args.points:
        for n_users in args.users:
            cart = cartpole_steps_per_s(20_000)
            rate = single_steps_per_s(n_users, n_points, args.steps)
            rows.append((n_users, n_points, rate))
            print(f"| single (user) | {n_users} | {n_points} | {rate:,.0f} | {cart:,.0f} | "
                  f"{rate / cart:.4f} |")  # fmt: skip
    if args.parallel_users:
        cart = cartpole_steps_per_s(20_000)
        rate = parallel_agent_steps_per_s(args.parallel_users, args.points[0], 10)
        print(f"| parallel (agent-steps) | {args.parallel_users} | {args.points[0]} | "
              f"{rate:,.0f} | {cart:,.0f} | {rate / cart:.4f} |")  # fmt: skip
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    if args.plot:
        _plot(rows, args.plot)


def _plot(rows, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    for n_points in sorted({p for _, p, _ in rows}):
        mine = [(u, r) for u, p, r in rows if p == n_points]
        ax.plot([u for u, _ in mine], [r for _, r in mine], marker="o", label=f"{n_points} points")
    ax.set_xscale("log")
    ax.set_xlabel("users")
    ax.set_ylabel("single-agent env steps / s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
