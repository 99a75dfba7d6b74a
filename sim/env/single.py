"""A Gymnasium Env for one agent; every other agent follows the scenario's strategies."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from mdpsim.env.game import Game
from mdpsim.simulation.scenario import ScenarioSource, resolve


class SingleAgentEnv(gym.Env):
    """``agent`` (``"server"`` or ``"user_i"``) acts; one step is one tick."""

    metadata = {"render_modes": []}

    def __init__(self, scenario: ScenarioSource, agent: str = "server", **overrides: Any) -> None:
        scenario = resolve(scenario)  # a path, a packaged name, a dict or a Scenario
        weights = overrides.pop("weights", None)
        self.game = Game(scenario, weights=weights, **overrides)
        if agent != "server":
            self.game.user_index(agent)  # raises for an unknown agent
        self.agent = agent
        self.observation_space = self.game.observation_space(agent)
        self.action_space = self.game.action_space(agent)
        self._scenario_seed = scenario.scenario.seed

    @property
    def model(self):
        """The :class:`~mdpsim.simulation.model.PrivacyModel` of the current episode."""
        return self.game.model

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode; ``seed`` is the run seed, later seeds come from it."""
        if seed is not None:
            super().reset(seed=seed)
            run_seed = int(seed)
        elif not self.game.started:  # the first episode replays the scenario's own seed
            super().reset(seed=self._scenario_seed)
            run_seed = int(self._scenario_seed)
        else:
            run_seed = int(self.np_random.integers(2**31))
        self.game.reset(run_seed)
        return self.game.observation(self.agent), {}

    def strategy_action(self):
        """The action the scenario's strategy would take now for this agent."""
        return self.game.strategy_actions()[self.agent]

    def step(self, action):
        if self.agent != "server":
            action = int(np.asarray(action).item())
        rewards, infos = self.game.step({self.agent: action}, scored=(self.agent,))
        obs = self.game.observation(self.agent)
        return obs, rewards[self.agent], False, self.game.done, infos[self.agent]
