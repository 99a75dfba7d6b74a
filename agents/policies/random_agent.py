"""An agent that acts at random: samples its action space (seeded)."""

from __future__ import annotations

from gymnasium import spaces


class RandomAgent:
    """Acts by sampling ``action_space``; ``seed`` makes the draws reproducible."""

    def __init__(self, action_space: spaces.Space, *, seed: int = 0) -> None:
        self.action_space = action_space
        self.action_space.seed(seed)

    def act(self, observation):
        return self.action_space.sample()
