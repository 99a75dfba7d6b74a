"""N independent single-agent games stepped together: a Gymnasium ``VectorEnv``, and the
Stable-Baselines3 ``VecEnv`` the ``rl`` extra trains on (imported lazily)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from mdpsim.env.single import SingleAgentEnv
from mdpsim.simulation.scenario import ScenarioSource, resolve


class PrivacyVectorEnv(SyncVectorEnv):
    """``num_envs`` single-agent games of ``agent``; env ``i`` of ``reset(seed=s)`` plays seed
    ``s + i``, and the first ``reset()`` without a seed uses the scenario's seed as ``s`` (env 0
    replays the scenario's own game, the others play new ones). Later episodes draw their seeds
    from each env's generator, so one seed drives the whole run."""

    def __init__(
        self,
        scenario: ScenarioSource,
        num_envs: int,
        agent: str = "server",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        **overrides: Any,
    ) -> None:
        if int(num_envs) < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        scenario = resolve(scenario)
        self._scenario_seed = int(scenario.scenario.seed)
        self._started = False
        weights = overrides.get("weights")

        extra = {k: v for k, v in overrides.items() if k != "weights"}

        def make() -> SingleAgentEnv:
            return SingleAgentEnv(scenario, agent=agent, weights=weights, **extra)

        super().__init__(
            [make] * int(num_envs),
            copy=True,
            autoreset_mode=autoreset_mode,
        )
        self.agent = agent

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict | None = None):
        """Reset every env; ``seed`` as in the class docstring (or one per env)."""
        if seed is None and not self._started:
            seed = self._scenario_seed
        self._started = True
        return super().reset(seed=seed, options=options)


def to_sb3(vec: PrivacyVectorEnv) -> Any:
    """The Stable-Baselines3 ``VecEnv`` over ``vec`` (built with ``autoreset_mode="SameStep"``):
    SB3's conventions (``dones``, ``terminal_observation``, ``TimeLimit.truncated``).
    Imports stable-baselines3 (the ``rl`` extra) only when called."""
    from stable_baselines3.common.vec_env import VecEnv

    if vec.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
        raise ValueError("to_sb3 needs a vector env built with autoreset_mode='SameStep'")

    class _SB3VecEnv(VecEnv):
        def __init__(self) -> None:
            super().__init__(vec.num_envs, vec.single_observation_space, vec.single_action_space)
            self._actions: np.ndarray | None = None
            self._seed: int | None = None

        def reset(self):
            obs, _ = vec.reset(seed=self._seed)
            self._seed = None
            return obs

        def seed(self, seed: int | None = None):
            self._seed = seed
            return [None if seed is None else seed + i for i in range(self.num_envs)]

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = actions

        def step_wait(self):
            obs, rewards, terminated, truncated, info = vec.step(self._actions)
            dones = np.logical_or(terminated, truncated)
            infos: list[dict] = [{} for _ in range(self.num_envs)]
            for i in np.flatnonzero(dones):
                infos[i]["terminal_observation"] = info["final_obs"][i]
                infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            return obs, np.asarray(rewards, dtype=np.float32), dones, infos

        def close(self) -> None:
            vec.close()

        def get_attr(self, attr_name: str, indices=None) -> list:
            return [getattr(vec.envs[i], attr_name) for i in self._get_indices(indices)]

        def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
            for i in self._get_indices(indices):
                setattr(vec.envs[i], attr_name, value)

        def env_method(self, method_name: str, *args, indices=None, **kwargs) -> list:
            return [
                getattr(vec.envs[i], method_name)(*args, **kwargs)
                for i in self._get_indices(indices)
            ]

        def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
            return [isinstance(vec.envs[i], wrapper_class) for i in self._get_indices(indices)]

    return _SB3VecEnv()
