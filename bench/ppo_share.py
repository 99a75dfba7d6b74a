"""The env's share of a PPO run (issue 49 item 2: at most 10 % of the time).

Trains Stable-Baselines3's PPO with ``ppo_user``'s hyperparameters (docs/rl.md: 200 steps
per env and update, a quarter of a rollout per batch, one torch thread) on
``to_sb3(vector_env(...))`` over the level game of ``agents/policies/lookahead.py``
(``user_0``, 8 games, new seeds after the first episodes), and on ``ppo_user.vector_env``
(the ``DummyVecEnv`` of 8 ``single_agent_env`` games cycling their training seeds), timing
every call into the vector env (steps and resets) in CPU seconds of the process
(``time.process_time``) and wall seconds. Needs the ``rl`` extra. Usage:
``python bench/ppo_share.py [--timesteps 16000] [--num-envs 8]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import time

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecEnvWrapper

from mdpsim.agents.policies import lookahead, ppo_user
from mdpsim.env import vector_env
from mdpsim.env.vector import to_sb3
from mdpsim.simulation import scenario as sc


class Timed(VecEnvWrapper):
    """A VecEnv that adds the CPU and wall seconds spent inside ``venv`` to its counters."""

    def __init__(self, venv) -> None:
        super().__init__(venv)
        self.cpu_s = self.wall_s = 0.0

    def _timed(self, call, *args):
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return call(*args)
        finally:
            self.cpu_s += time.process_time() - cpu
            self.wall_s += time.perf_counter() - wall

    def reset(self):
        return self._timed(self.venv.reset)

    def step_async(self, actions) -> None:
        self._timed(self.venv.step_async, actions)

    def step_wait(self):
        return self._timed(self.venv.step_wait)


def vector_recipe(num_envs: int):
    return to_sb3(
        vector_env(
            sc.from_dict(lookahead.GAME),
            num_envs=num_envs,
            agent="user_0",
            weights=lookahead.WEIGHTS,
            autoreset_mode="SameStep",
        )
    )


def measure(envs, timesteps: int) -> dict[str, float]:
    """Train PPO for ``timesteps`` on ``envs``; the run's and the env's seconds."""
    timed = Timed(envs)
    n_envs = envs.num_envs
    model = PPO(
        "MlpPolicy", timed, n_steps=ppo_user.N_STEPS, batch_size=n_envs * ppo_user.N_STEPS // 4,
        gamma=1.0, gae_lambda=1.0, learning_rate=ppo_user.LEARNING_RATE, seed=0, device="cpu",
    )  # fmt: skip
    cpu, wall = time.process_time(), time.perf_counter()
    model.learn(timesteps)
    return {
        "cpu_s": time.process_time() - cpu,
        "wall_s": time.perf_counter() - wall,
        "env_cpu_s": timed.cpu_s,
        "env_wall_s": timed.wall_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=16_000)
    parser.add_argument("--num-envs", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"PPO, {args.timesteps:,} timesteps, {args.num_envs} games, one torch thread\n")
    print("| vector env | run CPU s | env CPU s | env share (CPU) | run wall s | env wall s "
          "| env-steps per CPU s of the env |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    recipes = (("vector_env + to_sb3", vector_recipe), ("DummyVecEnv", ppo_user.vector_env))
    for name, build in recipes:
        m = measure(build(args.num_envs), args.timesteps)
        share = m["env_cpu_s"] / m["cpu_s"]
        rate = args.timesteps / m["env_cpu_s"]
        print(f"| {name} | {m['cpu_s']:.1f} | {m['env_cpu_s']:.1f} | {share:.0%} "
              f"| {m['wall_s']:.1f} | {m['env_wall_s']:.1f} | {rate:,.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
