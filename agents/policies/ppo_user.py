"""A deep-RL user: stable-baselines3's PPO learns the game of :mod:`lookahead` (issue 36, item 6).

The recipe (docs/rl.md): a vector env of :data:`N_ENVS` single-agent games of ``user_0``
(stable-baselines3's ``DummyVecEnv``), each resetting at its share of the training seeds
1000-1019 in turn (:class:`SeedCycle`); PPO's ``MlpPolicy`` with ``gamma = 1`` (an episode is
20 ticks and ends) and Monte Carlo returns (``gae_lambda = 1``), on one torch thread, seeded.
``python -m mdpsim.agents.policies.ppo_user [--timesteps N] [--seed S] [--seeds 20]`` trains
it and prints the table of docs/rl.md: PPO beside the exact best response, greedy, always,
Q-learning and the constant cheapest level on the held-out seeds. Needs the ``rl`` extra
(``pip install 'mdpsim[rl]'``); importing this module imports neither torch nor
stable-baselines3 (:func:`train` does).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import gymnasium
import numpy as np

from mdpsim.agents.policies import lookahead
from mdpsim.errors import InputError

if TYPE_CHECKING:
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

TRAIN_SEEDS = range(1000, 1020)  # disjoint from the held-out seeds 0-19
N_ENVS = 8
N_STEPS = 200  # per env and update: 8 x 200 ticks = 80 episodes per update
TIMESTEPS = 60_000  # 3,000 episodes; about 50-70 s of CPU (docs/rl.md)
LEARNING_RATE = 1e-3


class SeedCycle(gymnasium.Wrapper):
    """Every reset plays the next of ``seeds`` in turn (a seed passed to ``reset`` is ignored:
    the vector env's own seeding would otherwise replay one game)."""

    def __init__(self, env: gymnasium.Env, seeds: Sequence[int]):
        super().__init__(env)
        self._seeds = itertools.cycle(seeds)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        return self.env.reset(seed=next(self._seeds), options=options)


def vector_env(n_envs: int = N_ENVS, seeds: Sequence[int] = TRAIN_SEEDS) -> DummyVecEnv:
    """``n_envs`` games of :func:`lookahead.env`, env ``i`` cycling through ``seeds[i::n_envs]``."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    seeds = list(seeds)
    return DummyVecEnv([partial(_seeded_game, seeds[i::n_envs]) for i in range(n_envs)])


def _seeded_game(seeds: Sequence[int]) -> gymnasium.Env:
    return SeedCycle(lookahead.env(), seeds)


def train(*, timesteps: int = TIMESTEPS, seed: int = 0) -> PPO:
    """PPO trained ``timesteps`` ticks on :func:`vector_env` (one torch thread: same seed, same
    model)."""
    try:
        import torch
        from stable_baselines3 import PPO
    except ImportError as exc:
        raise InputError(f"{exc.name} is not installed: pip install 'mdpsim[rl]'") from None
    torch.set_num_threads(1)
    model = PPO(
        "MlpPolicy",
        vector_env(),
        n_steps=N_STEPS,
        batch_size=N_ENVS * N_STEPS // 4,
        gamma=1.0,
        gae_lambda=1.0,
        learning_rate=LEARNING_RATE,
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return model.learn(timesteps)


def policy(model: PPO) -> Callable[[np.ndarray], int]:
    """The model's deterministic action as an observation policy (``act(obs) -> action``)."""

    def act(obs: np.ndarray) -> int:
        return int(model.predict(obs, deterministic=True)[0])

    return act


def cheapest_level(obs: np.ndarray) -> int:
    """Report at the cheapest level (eps 2) every tick: the constant the table compares with."""
    return 1


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timesteps", type=int, default=TIMESTEPS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=20, help="held-out seeds 0 .. N-1")
    args = parser.parse_args(argv)
    start = time.process_time()
    try:
        model = train(timesteps=args.timesteps, seed=args.seed)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    cpu_s = time.process_time() - start
    rows = lookahead.compare(
        range(args.seeds), policies={"ppo": policy(model), "cheapest_level": cheapest_level}
    )
    print(lookahead.markdown(rows))
    print(f"PPO trained {args.timesteps} ticks in {cpu_s:.1f} s of CPU")


if __name__ == "__main__":
    main()
