"""The PettingZoo ParallelEnv: ``server`` and every user act at once, one tick per step."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from pettingzoo import ParallelEnv

from mdpsim.env.game import Game
from mdpsim.simulation.scenario import ScenarioSource, resolve


class PrivacyParallelEnv(ParallelEnv):
    """All agents act each tick; the episode is the scenario's ``scenario.ticks`` ticks."""

    metadata = {"name": "mdpsim_v0", "render_modes": []}

    def __init__(self, scenario: ScenarioSource, **overrides: Any) -> None:
        scenario = resolve(scenario)  # a path, a packaged name, a dict or a Scenario
        weights = overrides.pop("weights", None)
        self.game = Game(scenario, weights=weights, **overrides)
        self.possible_agents = list(self.game.agents)
        self.agents: list[str] = []
        self._seed = scenario.scenario.seed
        self._seeds = np.random.default_rng(self._seed)

    @property
    def model(self):
        """The :class:`~mdpsim.simulation.model.PrivacyModel` of the current episode."""
        return self.game.model

    @functools.cache  # noqa: B019 - PettingZoo asks for the same object
    def observation_space(self, agent: str):
        return self.game.observation_space(agent)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str):
        return self.game.action_space(agent)

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start an episode; ``seed`` is the run seed (``mdpsim run --seed``)."""
        if seed is not None:
            self._seeds = np.random.default_rng(seed)
            run_seed = int(seed)
        else:
            run_seed = int(self._seeds.integers(2**31))
        self.game.reset(run_seed)
        self.agents = list(self.possible_agents)
        return self.game.observations(), {a: {} for a in self.agents}

    def strategy_actions(self) -> dict[str, Any]:
        """The actions the scenario's strategies would take now (follow them to replay a run)."""
        return self.game.strategy_actions()

    def step(self, actions: dict[str, Any]):
        """Play one tick with every live agent's action (``{"server": a, "user_0": b, ...}``).

        Returns PettingZoo's five dicts keyed by agent: observations, rewards, terminations
        (always ``False``: a run has no terminal state), truncations (``True`` on the last tick,
        after which ``agents`` is empty) and infos.
        """
        rewards, infos = self.game.step(actions)
        observations = self.game.observations()
        done = self.game.done
        terminations = {a: False for a in self.agents}
        truncations = {a: done for a in self.agents}
        if done:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def render(self) -> None:
        return None

    def close(self) -> None:
        return None
