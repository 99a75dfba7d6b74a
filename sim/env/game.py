"""The game behind the environment API: observations, actions and rewards over a PrivacyModel.

The environment IS the simulation: a :class:`Game` owns one :class:`~mdpsim.model.PrivacyModel`
and a step is ``model.advance(decisions)``, with the decisions of outside agents put in place of
their strategies' (:meth:`~mdpsim.model.PrivacyModel.decide`). With every agent following its
strategy the run is the one ``mdpsim run`` makes with the same seed, tick for tick.

Agents: ``server`` and ``user_0 .. user_{n-1}``. Observations (float32 vectors, fields in
:data:`USER_OBS` and :data:`SERVER_OBS`) hold only what that agent knows at the start of a
tick: users their own budget, location and the public facts of the mechanism; the server what
it received and charged (never a true location). Rewards state the game:

* user ``i``: ``-(loss_i) - attack_weight * success_i``, where ``loss_i`` is the distance (km)
  between its secret and its report, or ``silent_loss_km`` when it did not report (by default
  the prior's mean distance between two secrets: the loss of an answer that knows nothing),
  and ``success_i`` is 1 when one of the server's attacks guesses the user's secret at this
  tick exactly (top-1);
* server: the mean attack success over the users minus ``query_weight`` times the sum of this
  tick's query errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from mdpsim.errors import InputError
from mdpsim.model import Decisions, PrivacyModel
from mdpsim.players import attack_success
from mdpsim.world import build_domain, load_graph

USER_OBS = (
    "tick_fraction",  # ticks done / horizon
    "remaining_fraction",  # own budget left / capacity
    "report_cost_fraction",  # one report's charge / capacity
    "expected_loss_km",  # the mechanism's prior-averaged loss (public)
    "hit_probability",  # chance the server's MAP guess of one report is exact (public)
    "silent_loss_km",  # the loss of not reporting (the game's rule)
    "halted",  # own filter halted
    "reported_last",  # reported at the last tick
    "x_fraction",  # own location, x scaled to the domain's bounding box
    "y_fraction",  # own location, y scaled likewise
)
SERVER_OBS = (
    "tick_fraction",
    "ticks_since_generation_fraction",  # ticks since the last generation / horizon
    "reported_fraction",  # users who reported at the last tick / users
    "halted_fraction",
    "remaining_fraction_mean",  # the server charges, so it knows the budgets
    "report_cost_fraction",
    "expected_loss_km",
    "attack_entropy_bits",  # the single-report posterior's entropy, last tick's mean
)
USER_ACTIONS = ("silent", "report")
SERVER_ACTIONS = ("refresh", "query")  # MultiDiscrete([2, 2]): regenerate now, ask queries


@dataclass(frozen=True)
class RewardWeights:
    """The game's weights: km per attack success (users), per query error (server)."""

    attack_weight: float = 1.0
    query_weight: float = 0.1
    silent_loss_km: float | None = None  # None: the prior's mean distance between two secrets


class Game:
    """One scenario's game: builds a model per reset, maps actions to decisions, scores ticks."""

    def __init__(self, scenario, *, weights: RewardWeights | None = None, **overrides: Any):
        self.overrides = dict(overrides)
        strategy_overrides = self.overrides.pop("strategies", None) or {}
        if self.overrides:
            scenario = scenario.replace(**self.overrides)
        self.scenario = scenario
        self.strategy_overrides = strategy_overrides
        self.weights = weights or RewardWeights()
        self.n_users = scenario.users.count
        self.horizon = scenario.scenario.ticks
        self.agents = ["server", *(f"user_{i}" for i in range(self.n_users))]
        self.graph = load_graph(scenario)
        self._domains: dict[int, Any] = {}
        self._model: PrivacyModel | None = None

    @property
    def started(self) -> bool:
        """Whether :meth:`reset` has built a model."""
        return self._model is not None

    @property
    def model(self) -> PrivacyModel:
        """The model of the current episode (after :meth:`reset`)."""
        if self._model is None:
            raise InputError("the environment has no episode yet: call reset() first")
        return self._model

    # ------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> spaces.Box:
        n = len(SERVER_OBS) if agent == "server" else len(USER_OBS)
        return spaces.Box(low=0.0, high=np.inf, shape=(n,), dtype=np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        if agent == "server":
            return spaces.MultiDiscrete([2, 2])
        return spaces.Discrete(2)

    def user_index(self, agent: str) -> int:
        if agent.startswith("user_") and agent[5:].isdigit() and int(agent[5:]) < self.n_users:
            return int(agent[5:])
        raise InputError(
            f"unknown agent {agent!r}; agents: server, user_0 .. user_{self.n_users - 1}"
        )

    # ------------------------------------------------------------------ episode
    def reset(self, seed: int) -> None:
        """A fresh model of the scenario with run seed ``seed`` (as ``mdpsim run --seed``)."""
        from mdpsim.strategies import from_scenario

        if seed not in self._domains:
            self._domains[seed] = build_domain(self.scenario, self.graph, seed=seed)
        domain = self._domains[seed]
        strategies = from_scenario(self.scenario, **self.strategy_overrides)
        self._model = PrivacyModel(
            self.scenario, rng=seed, graph=self.graph, domain=domain, strategies=strategies
        )
        prior = domain.prior
        self.silent_loss_km = (
            float(prior @ domain.dist_xx @ prior)
            if self.weights.silent_loss_km is None
            else float(self.weights.silent_loss_km)
        )
        lo, hi = domain.x_xy.min(axis=0), domain.x_xy.max(axis=0)
        self._xy_fraction = (domain.x_xy - lo) / np.where(hi > lo, hi - lo, 1.0)
        self.reported = np.zeros(self.n_users, dtype=bool)
        self.attack_entropy_bits = 0.0

    @property
    def done(self) -> bool:
        return self.started and self.model.tick >= self.horizon

    def strategy_actions(self) -> dict[str, Any]:
        """Every agent's action by the scenario's strategies for the coming tick."""
        return self.actions_of(self.model.decide())

    def actions_of(self, d: Decisions) -> dict[str, Any]:
        """The decisions of a tick as the agents' actions."""
        out: dict[str, Any] = {"server": np.array([int(d.refresh), int(d.query)], dtype=np.int64)}
        for i in range(self.n_users):
            out[f"user_{i}"] = int(d.report[i])
        return out

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
        """One tick: agents in ``actions`` replace their strategies; returns rewards and infos."""
        model = self.model
        default = model.decide()
        report = default.report.copy()
        refresh, query = default.refresh, default.query
        for agent, action in actions.items():
            if agent == "server":
                a = np.asarray(action).reshape(-1)
                if a.shape != (2,) or not np.all((a == 0) | (a == 1)):
                    raise InputError(f"server action {action!r} must be two bits [refresh, query]")
                refresh, query = bool(a[0]), bool(a[1])
            else:
                bit = int(action)
                if bit not in (0, 1):
                    raise InputError(f"{agent} action {action!r} must be 0 (silent) or 1 (report)")
                report[self.user_index(agent)] = bool(bit)
        model.advance(Decisions(report=report, refresh=refresh, query=query))
        return self._rewards(), self._infos()

    # ------------------------------------------------------------------ observations
    def observations(self) -> dict[str, np.ndarray]:
        model = self.model
        f = model.filters
        cap = np.where(f.capacity > 0, f.capacity, 1.0)
        tick_fraction = model.tick / self.horizon
        cost = model.server.report_charge.cost
        users = np.zeros((self.n_users, len(USER_OBS)), dtype=np.float32)
        users[:, 0] = tick_fraction
        users[:, 1] = f.remaining / cap
        users[:, 2] = cost / cap
        users[:, 3] = model.server.expected_loss_km
        users[:, 4] = model.server.hit_probability
        users[:, 5] = self.silent_loss_km
        users[:, 6] = f.halted
        users[:, 7] = self.reported
        users[:, 8:10] = self._xy_fraction[model.population.position]
        server = np.array(
            [
                tick_fraction,
                (model.tick - model.server.generated_at) / self.horizon,
                self.reported.mean(),
                f.halted.mean(),
                float(np.mean(f.remaining / cap)),
                cost / float(np.mean(cap)),
                model.server.expected_loss_km,
                self.attack_entropy_bits,
            ],
            dtype=np.float32,
        )
        out = {"server": np.nan_to_num(server, nan=0.0, posinf=0.0)}
        for i in range(self.n_users):
            out[f"user_{i}"] = users[i]
        return out

    # ------------------------------------------------------------------ rewards
    def _rewards(self) -> dict[str, float]:
        model, w = self.model, self.weights
        reports, attacks = model.last_reports, model.last_attacks
        n = self.n_users
        loss = np.full(n, self.silent_loss_km)
        loss[reports.users] = reports.loss_km
        success = attack_success(attacks, n)
        self.reported = np.zeros(n, dtype=bool)
        self.reported[reports.users] = True
        entropy = attacks.row.get("bayes_entropy_bits", float("nan"))  # no truth in it
        self.attack_entropy_bits = 0.0 if np.isnan(entropy) else float(entropy)
        users = -loss - w.attack_weight * success
        errors = [v for k, v in model.last_queries.items() if k.endswith("_error")]
        query_error = float(np.nansum(errors)) if errors else 0.0
        out = {"server": float(success.mean() - w.query_weight * query_error)}
        for i in range(n):
            out[f"user_{i}"] = float(users[i])
        return out

    def _infos(self) -> dict[str, dict]:
        tick = self.model.tick  # the tick's full row: model.log.ticks[-1]
        return {agent: {"tick": tick} for agent in self.agents}
