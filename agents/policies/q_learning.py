"""A tabular Q-learning agent (numpy only) and the user's state for the eps-level choice.

:class:`TabularQ` learns ``Q(s, a)`` over a finite state set given by a ``state_of(obs)``
function, with epsilon-greedy exploration and the one-step update
``Q(s, a) += alpha (r + gamma max_a' Q(s', a') - Q(s, a))`` (``gamma = 1``: an episode is a
finite run; ``alpha = None``: ``1 / visits(s, a)``, the running mean of the targets, which the
noisy rewards of the game need). :class:`UserState` maps a user's observation
(:meth:`mdpsim.env.Game.user_fields`) to its own budget left and the tick, both binned: the
public facts of the levels are the same for every user, and a user's location is left out (its
choice is visible to the server, so a choice that follows its location would leak it;
docs/env.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


class TabularQ:
    """Q-learning over ``n_states`` x ``n_actions``; ``state_of(obs)`` gives the state."""

    def __init__(
        self,
        n_states: int,
        n_actions: int,
        state_of: Callable[[np.ndarray], int],
        *,
        alpha: float | None = None,
        gamma: float = 1.0,
        explore: float = 0.2,
        initial: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.q = np.full((n_states, n_actions), float(initial))
        self.visits = np.zeros((n_states, n_actions), dtype=np.int64)
        self.state_of = state_of
        self.alpha, self.gamma, self.explore = alpha, gamma, explore
        self.rng = np.random.default_rng(seed)

    def act(self, obs: np.ndarray) -> int:
        """The greedy action (ties: the lowest index)."""
        return int(np.argmax(self.q[self.state_of(obs)]))

    def explore_act(self, obs: np.ndarray) -> int:
        """Epsilon-greedy: a uniform action with probability ``explore``."""
        if self.rng.random() < self.explore:
            return int(self.rng.integers(self.q.shape[1]))
        return self.act(obs)

    def update(self, obs, action: int, reward: float, next_obs, done: bool) -> None:
        """One Q-learning step from ``obs`` to ``next_obs``."""
        s, s2 = self.state_of(obs), self.state_of(next_obs)
        target = reward + (0.0 if done else self.gamma * self.q[s2].max())
        self.visits[s, action] += 1
        step = self.alpha if self.alpha is not None else 1.0 / self.visits[s, action]
        self.q[s, action] += step * (target - self.q[s, action])

    def train(self, env, seeds: Sequence[int], episodes: int) -> list[float]:
        """Train on a Gymnasium env (``single_agent_env``), cycling through ``seeds``, with
        the exploration annealed linearly to 0; returns each episode's total reward."""
        returns, start = [], self.explore
        for k in range(episodes):
            self.explore = start * (1 - k / episodes)  # annealed to 0
            obs, _ = env.reset(seed=int(seeds[k % len(seeds)]))
            total, done = 0.0, False
            while not done:
                action = self.explore_act(obs)
                next_obs, reward, terminated, truncated, _ = env.step(action)
                done = terminated or truncated
                self.update(obs, action, reward, next_obs, done)
                obs, total = next_obs, total + reward
            returns.append(total)
        self.explore = start
        return returns


class UserState:
    """A user's state: ``remaining_fraction`` in ``budget_bins`` bins x ``tick_fraction`` in
    ``tick_bins`` bins (``fields``: the observation's field names), plus ``extra`` states
    from an optional ``extra(obs) -> int`` (the self-play adds what the levels offer)."""

    def __init__(
        self,
        fields: Sequence[str],
        *,
        budget_bins: int = 20,
        tick_bins: int = 5,
        extra: Callable[[np.ndarray], int] | None = None,
        n_extra: int = 1,
    ) -> None:
        self.remaining = list(fields).index("remaining_fraction")
        self.tick = list(fields).index("tick_fraction")
        self.budget_bins, self.tick_bins = budget_bins, tick_bins
        self.extra, self.n_extra = extra, n_extra

    @property
    def n_states(self) -> int:
        return self.budget_bins * self.tick_bins * self.n_extra

    def __call__(self, obs: np.ndarray) -> int:
        b = min(int(obs[self.remaining] * self.budget_bins), self.budget_bins - 1)
        t = min(int(obs[self.tick] * self.tick_bins), self.tick_bins - 1)
        e = self.extra(obs) if self.extra is not None else 0
        return (e * self.tick_bins + t) * self.budget_bins + b


def level_user(env, *, episodes: int, seeds: Sequence[int], budget_bins: int = 13, seed: int = 0):
    """A Q-learning user trained on ``env`` (a ``single_agent_env`` of a user in a
    ``[game] epsilon_levels`` scenario): state = budget bins x the exact tick, ``gamma = 1``."""
    state = UserState(env.game.user_fields(), budget_bins=budget_bins, tick_bins=env.game.horizon)
    agent = TabularQ(state.n_states, int(env.action_space.n), state, explore=0.2, seed=seed)
    agent.train(env, seeds, episodes)
    return agent
