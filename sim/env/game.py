"""The game behind the environment API: observations, actions and rewards over a PrivacyModel.

The environment IS the simulation: a :class:`Game` owns one
:class:`~mdpsim.simulation.model.PrivacyModel`
and a step is ``model.advance(decisions)``, with the decisions of outside agents put in place of
their strategies' (:meth:`~mdpsim.simulation.model.PrivacyModel.decide`). With every agent
following its
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
* server: the mean attack success over the users minus ``query_weight`` times the summed
  error of the answers owed at the tick (every kind of ``queries.kinds`` at a tick the query
  schedule names): an asked query's own error, else the prior's answer's
  (:mod:`mdpsim.env.prior_answers`), so silence is not free for the server either.

The ``[game]`` table widens the choices (docs/env.md, "Players with real choices"): with
``epsilon_levels`` a user's action is 0 (silent) or ``1 + l`` (report at level ``l``), and its
observation adds each level's charge, expected loss and hit probability; with ``mechanisms``
the server's action adds the index of the mechanism to publish at a refresh; with
``choose_query_kinds`` its query bit becomes one bit per kind. Left empty, the spaces are the
ones above. :meth:`Game.user_fields`, :meth:`Game.server_fields` and
:meth:`Game.server_action_fields` name the entries of each.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from mdpsim.agents import attack_success
from mdpsim.env.prior_answers import PriorCall, planar_distances_km, prior_answer
from mdpsim.errors import InputError
from mdpsim.geo.routing import RoadSegments
from mdpsim.queries.outcome import UNANSWERED
from mdpsim.simulation.model import Decisions, PrivacyModel
from mdpsim.simulation.world import build_domain, load_graph, trace_fixes, with_trace_counts

USER_OBS = (
    "tick_fraction",  # ticks done / horizon
    "remaining_fraction",  # own budget left / capacity
    "report_cost_fraction",  # one report's charge / capacity
    "expected_loss_km",  # the mechanism's prior-averaged loss (public)
    "hit_probability",  # chance the server's MAP guess of one report is exact (public)
    "silent_loss_km",  # the loss of not reporting (the game's rule)
    "halted",  # own filter halted
    "reported_last",  # reported at the last tick
)  # never the user's location: its choice is seen by the server and charged as its level only
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
USER_ACTIONS = ("silent", "report")  # with [game] epsilon_levels: silent, then one per level
SERVER_ACTIONS = ("refresh", "query")  # MultiDiscrete([2, 2]): regenerate now, ask queries
#: Per eps level l (``[game] epsilon_levels``), appended to the user's observation as
#: ``level{l}_{field}``: its charge / own capacity, its expected loss, its hit probability.
LEVEL_OBS = ("cost_fraction", "expected_loss_km", "hit_probability")


@dataclass(frozen=True)
class RewardWeights:
    """The game's weights: km per attack success (users), per query error (server)."""

    attack_weight: float = 1.0
    query_weight: float = 0.1
    silent_loss_km: float | None = None  # None: the prior's mean distance between two secrets


#: Run seeds whose domain and mechanism fits a :class:`Game` keeps (least recently played out)
SEEDS_KEPT = 64


@dataclass
class _SeedWorld:
    """What a run seed fixes for every episode of it: the domain, the fits of the mechanisms
    that take no uploads (keyed by name, eps, parameters and domain: the same fit gives the
    same matrix, so the bytes do not move), the planar distances and prior answers' tables."""

    domain: Any
    mechanisms: dict = field(default_factory=dict)
    planar_km: np.ndarray | None = None
    prior_tables: dict = field(default_factory=dict)


class Game:
    """One scenario's game: builds a model per reset, maps actions to decisions, scores ticks."""

    def __init__(self, scenario, *, weights: RewardWeights | None = None, **overrides: Any):
        self.overrides = dict(overrides)
        strategy_overrides = self.overrides.pop("strategies", None) or {}
        if self.overrides:
            scenario = scenario.replace(**self.overrides)
        self.graph = load_graph(scenario)
        scenario = with_trace_counts(scenario, trace_fixes(scenario, self.graph))  # traces
        self.scenario = scenario
        self.strategy_overrides = strategy_overrides
        self.weights = weights or RewardWeights()
        self.n_users = scenario.users.count
        self.horizon = scenario.scenario.ticks
        game = scenario.game
        self.levels = tuple(game.epsilon_levels or [scenario.mechanism.epsilon_per_km])
        self.level_fields = bool(game.epsilon_levels)  # the observation's per-level fields
        self.mechanism_names = tuple(game.mechanisms)  # empty: no mechanism choice
        self.query_kinds = tuple(scenario.queries.kinds) if game.choose_query_kinds else ()
        self.agents = ["server", *(f"user_{i}" for i in range(self.n_users))]
        self._user_of = {agent: i for i, agent in enumerate(self.agents[1:])}  # name -> index
        #: what a run seed fixes and the episodes of that seed reuse, for the last
        #: SEEDS_KEPT seeds played (an env reset with fresh seeds keeps a bounded memory)
        self._seeds: OrderedDict[int, _SeedWorld] = OrderedDict()
        self._segments: RoadSegments | None = None
        for kind in self.scenario.queries.kinds:
            prior_answer(kind)  # every owed query has an answer without data
        self._model: PrivacyModel | None = None
        self._seed_world: _SeedWorld | None = None

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
    def user_fields(self) -> tuple[str, ...]:
        """The user's observation fields: :data:`USER_OBS`, then :data:`LEVEL_OBS` per level."""
        per_level = tuple(f"level{i}_{name}" for i in range(len(self.levels)) for name in LEVEL_OBS)
        return USER_OBS + (per_level if self.level_fields else ())

    def server_fields(self) -> tuple[str, ...]:
        """The server's observation fields: :data:`SERVER_OBS`, the published mechanism's
        index (with ``[game] mechanisms``) and per level the users who reported at it."""
        extra: tuple[str, ...] = ("mechanism_index",) if self.mechanism_names else ()
        if self.level_fields:
            extra += tuple(f"level{i}_reported_fraction" for i in range(len(self.levels)))
        return SERVER_OBS + extra

    def server_action_fields(self) -> tuple[str, ...]:
        """The entries of the server's MultiDiscrete action, in order."""
        mechanism = ("mechanism",) if self.mechanism_names else ()
        query = tuple(f"query_{k}" for k in self.query_kinds) if self.query_kinds else ("query",)
        return ("refresh", *mechanism, *query)

    def observation_space(self, agent: str) -> spaces.Box:
        n = len(self.server_fields()) if agent == "server" else len(self.user_fields())
        return spaces.Box(low=0.0, high=np.inf, shape=(n,), dtype=np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        if agent == "server":
            sizes = [len(self.mechanism_names) if f == "mechanism" else 2
                     for f in self.server_action_fields()]  # fmt: skip
            return spaces.MultiDiscrete(sizes)
        return spaces.Discrete(1 + len(self.levels))

    def user_index(self, agent: str) -> int:
        index = self._user_of.get(agent)
        if index is None:
            raise InputError(
                f"unknown agent {agent!r}; agents: server, user_0 .. user_{self.n_users - 1}"
            )
        return index

    # ------------------------------------------------------------------ episode
    def reset(self, seed: int) -> None:
        """A fresh model of the scenario with run seed ``seed`` (as ``mdpsim run --seed``)."""
        from mdpsim.agents.strategies import from_scenario

        world = self._seed_world_of(seed)
        domain = world.domain
        strategies = from_scenario(self.scenario, **self.strategy_overrides)
        self._model = PrivacyModel(
            self.scenario,
            rng=seed,
            graph=self.graph,
            domain=domain,
            strategies=strategies,
            mechanism_cache=world.mechanisms,
        )
        self._seed_world = world
        capacity = self._model.filters.capacity  # fixed for the episode
        self._cap = np.where(capacity > 0, capacity, 1.0)  # the divisor of the fractions
        prior = domain.prior
        self.silent_loss_km = (
            float(prior @ domain.dist_xx @ prior)
            if self.weights.silent_loss_km is None
            else float(self.weights.silent_loss_km)
        )
        self.reported = np.zeros(self.n_users, dtype=bool)
        self.level_reported = np.zeros(len(self.levels))
        self.attack_entropy_bits = 0.0

    def _seed_world_of(self, seed: int) -> _SeedWorld:
        """Seed ``seed``'s domain and fits, built on its first episode (the least recently
        played seed is dropped beyond :data:`SEEDS_KEPT`)."""
        world = self._seeds.get(seed)
        if world is None:
            if self._segments is None:  # the game's graph, read once and never changed
                self._segments = RoadSegments.of(self.graph)
            domain = build_domain(self.scenario, self.graph, seed=seed, segments=self._segments)
            world = _SeedWorld(domain)
            self._seeds[seed] = world
            if len(self._seeds) > SEEDS_KEPT:
                self._seeds.popitem(last=False)
        self._seeds.move_to_end(seed)
        return world

    @property
    def done(self) -> bool:
        return self.started and self.model.tick >= self.horizon

    def strategy_actions(self) -> dict[str, Any]:
        """Every agent's action by the scenario's strategies for the coming tick."""
        return self.actions_of(self.model.decide())

    def actions_of(self, d: Decisions) -> dict[str, Any]:
        """The decisions of a tick as the agents' actions."""
        server = self.model.server
        mechanism = [server.published if d.mechanism is None else d.mechanism]
        if self.query_kinds:
            query = [int(d.query and (d.query_kinds is None or k in d.query_kinds))
                     for k in self.query_kinds]  # fmt: skip
        else:
            query = [int(d.query)]
        out: dict[str, Any] = {"server": np.array(
            [int(d.refresh), *(mechanism if self.mechanism_names else []), *query], dtype=np.int64
        )}  # fmt: skip
        level = np.full(self.n_users, server.default_level) if d.level is None else d.level
        users = np.where(d.report, 1 + np.asarray(level, dtype=np.int64), 0)
        out.update(zip(self.agents[1:], users.tolist(), strict=True))
        return out

    def step(
        self, actions: dict[str, Any], *, scored: tuple[str, ...] | None = None
    ) -> tuple[dict[str, float], dict[str, Any]]:
        """One tick: agents in ``actions`` replace their strategies; returns the rewards and
        infos of the agents in ``scored`` (None: every agent; a single-agent env asks only
        its own, so a user's env does not score the server's queries)."""
        model = self.model
        default = model.decide()
        report = default.report.copy()
        level = None  # one eps level: the decisions name none
        if len(self.levels) > 1:
            level = np.full(self.n_users, model.server.default_level)
            if default.level is not None:
                level[:] = default.level
        server: dict[str, Any] = {"refresh": default.refresh, "query": default.query}
        if "server" in actions:
            server = self._server_decision(actions["server"])
        users = [agent for agent in actions if agent != "server"]
        if users:
            index = [self.user_index(agent) for agent in users]
            choice = [int(actions[agent]) for agent in users]
            self._check_choices(actions, users, choice)
            _put_choices(report, level, index, choice)
        agents = self.agents if scored is None else scored
        owed = None  # the users' places and unhalted filters, what a query owed addresses
        if "server" in agents:
            owed = model.population.position.copy(), ~model.filters.halted
        model.advance(Decisions(report=report, level=level, **server))
        return self._rewards(owed, scored), self._infos(agents)

    def _check_choices(self, actions: dict[str, Any], users: list[str], choice: list[int]) -> None:
        """Refuse the first of ``users`` whose action (``choice``, as ints) is not 0 (silent)
        or a level's number, in one line."""
        top = len(self.levels)
        if min(choice) < 0 or max(choice) > top:
            agent = next(a for a, c in zip(users, choice, strict=True) if not 0 <= c <= top)
            action = actions[agent]
            if isinstance(action, np.generic):
                action = action.item()  # shown as 7, not np.int64(7)
            raise InputError(
                f"{agent} action {action!r} must be 0 (silent) or 1 .. {len(self.levels)} "
                "(report at that eps level)"
                if len(self.levels) > 1
                else f"{agent} action {action!r} must be 0 (silent) or 1 (report)"
            )

    def _server_decision(self, action: Any) -> dict[str, Any]:
        """The server's action as the fields of :class:`~mdpsim.simulation.model.Decisions`."""
        names = self.server_action_fields()
        a = np.asarray(action).reshape(-1)
        sizes = np.asarray(self.action_space("server").nvec)  # type: ignore[attr-defined]
        if a.shape != (len(names),) or not np.all((a >= 0) & (a < sizes)):
            raise InputError(
                f"server action {action!r} must be [{', '.join(names)}] within {sizes.tolist()}"
            )
        got = dict(zip(names, (int(v) for v in a), strict=True))
        query_kinds = None
        if self.query_kinds:
            query_kinds = tuple(k for k in self.query_kinds if got[f"query_{k}"])
            query = bool(query_kinds)
            if len(query_kinds) == len(self.query_kinds):
                query_kinds = None  # every kind: as the schedule asks them
        else:
            query = bool(got["query"])
        return {
            "refresh": bool(got["refresh"]),
            "mechanism": got.get("mechanism"),
            "query": query,
            "query_kinds": query_kinds,
        }

    # ------------------------------------------------------------------ observations
    def observations(self) -> dict[str, np.ndarray]:
        """Every agent's observation at the start of the coming tick."""
        out = {"server": self._server_observation()}
        out.update(zip(self.agents[1:], self._user_observations(), strict=True))
        return out

    def observation(self, agent: str) -> np.ndarray:
        """One agent's entry of :meth:`observations` (a single-agent env builds only it)."""
        if agent == "server":
            return self._server_observation()
        return self._user_observations(self.user_index(agent))

    def _user_observations(self, user: int | None = None) -> np.ndarray:
        """``(n_users, fields)`` float32: row ``i`` is ``user_i``'s observation; with
        ``user``, that row alone (the same float64 values, taken one by one)."""
        model = self.model
        f, server = model.filters, model.server
        who: int | slice = slice(None) if user is None else user
        cap = self._cap[who]
        fields = (
            model.tick / self.horizon,
            f.remaining[who] / cap,
            server.report_charge.cost / cap,
            server.expected_loss_km,
            server.hit_probability,
            self.silent_loss_km,
            f.halted[who],
            self.reported[who],
        )  # USER_OBS
        if user is not None:
            row = np.array(fields, dtype=np.float32)
            if self.level_fields:
                row = np.concatenate([row, self._level_observations(cap)])
            return row
        users = np.empty((self.n_users, len(USER_OBS)), dtype=np.float32)
        for column, values in enumerate(fields):
            users[:, column] = values
        if self.level_fields:
            users = np.hstack([users, self._level_observations(cap)])
        return users

    def _server_observation(self) -> np.ndarray:
        model = self.model
        f = model.filters
        cap = self._cap
        server = np.array(
            [
                model.tick / self.horizon,
                (model.tick - model.server.generated_at) / self.horizon,
                self.reported.mean(),
                f.halted.mean(),
                float(np.mean(f.remaining / cap)),
                model.server.report_charge.cost / float(np.mean(cap)),
                model.server.expected_loss_km,
                self.attack_entropy_bits,
            ],
            dtype=np.float32,
        )
        if self.mechanism_names:
            server = np.append(server, np.float32(model.server.published))
        if self.level_fields:
            server = np.append(server, self.level_reported.astype(np.float32))
        return np.nan_to_num(server, nan=0.0, posinf=0.0)

    def _level_observations(self, cap: np.ndarray | float) -> np.ndarray:
        """Per user, :data:`LEVEL_OBS` of every level: own charge fraction, loss, hit
        (``cap``: the users' capacities, or one user's for its row alone)."""
        server = self.model.server
        loss, hit = server.level_expected_loss_km, server.level_hit_probability
        cols: list = []
        for charge, loss_km, hit_p in zip(server.level_charges, loss, hit, strict=True):
            cols += [charge.cost / cap, loss_km, hit_p]
        values = np.stack(np.broadcast_arrays(*cols), axis=1) if np.ndim(cap) else np.array(cols)
        return np.nan_to_num(values, nan=0.0, posinf=0.0).astype(np.float32)

    # ------------------------------------------------------------------ rewards
    def _rewards(
        self, owed: tuple[np.ndarray, np.ndarray] | None, scored: tuple[str, ...] | None
    ) -> dict[str, float]:
        """The rewards of the agents in ``scored`` (None: all); ``owed``: the users' places
        and unhalted filters at the start of the tick (what a query owed then addresses),
        None when the server is not scored."""
        model, w = self.model, self.weights
        reports, attacks = model.last_reports, model.last_attacks
        n = self.n_users
        loss = np.full(n, self.silent_loss_km)
        loss[reports.users] = reports.loss_km
        success = attack_success(attacks, n)
        self.reported = np.zeros(n, dtype=bool)
        self.reported[reports.users] = True
        if reports.levels is not None:
            counts = np.bincount(reports.levels, minlength=len(self.levels))
            self.level_reported = counts / n
        else:
            self.level_reported = np.zeros(len(self.levels))
            self.level_reported[model.server.default_level] = len(reports.users) / n
        entropy = attacks.means.get("bayes", {}).get("entropy_bits", float("nan"))  # no truth
        self.attack_entropy_bits = 0.0 if math.isnan(entropy) else float(entropy)
        out = {}
        if owed is not None:
            owed_error = self.answer_error(*owed)
            out["server"] = float(success.mean() - w.query_weight * owed_error)
        if scored is None:
            users = -loss - w.attack_weight * success
            out.update(zip(self.agents[1:], users.tolist(), strict=True))
        else:  # -loss - weight * success of each scored user, as the vector's float64 ops
            loss_of, success_of = loss.tolist(), success.tolist()
            for a in scored:
                if a != "server":
                    i = self.user_index(a)
                    out[a] = -loss_of[i] - w.attack_weight * success_of[i]
        return out

    def answer_error(self, secrets: np.ndarray, active: np.ndarray) -> float:
        """The summed error of the answers owed at the tick just run: every kind of
        ``queries.kinds`` at a tick the schedule asks for; an asked query's own error, else
        (not asked, or answered by nobody) the prior's answer's (sim/env/prior_answers.py)."""
        model = self.model
        if not model.server.wants_queries(model.tick):
            return 0.0  # nobody asked for an answer at this tick
        total = 0.0
        for kind in self.scenario.queries.kinds:
            asked = model.last_queries.get(kind, UNANSWERED).error
            total += asked if np.isfinite(asked) else self._prior_error(kind, secrets[active])
        return total

    def _prior_error(self, kind: str, positions: np.ndarray) -> float:
        world = self._seed_world
        assert world is not None  # a step follows a reset
        if world.planar_km is None:
            world.planar_km = planar_distances_km(world.domain)
        call = PriorCall(self.scenario.queries, world.domain, positions, world.planar_km,
                         world.prior_tables)  # fmt: skip
        return prior_answer(kind)(call)

    def _infos(self, agents) -> dict[str, dict]:
        tick = self.model.tick  # the tick's full row: model.log.ticks[-1]
        return {agent: {"tick": tick} for agent in agents}


#: Choices put in place one by one up to this many users (above: numpy's fancy index).
_FEW_CHOICES = 8


def _put_choices(
    report: np.ndarray, level: np.ndarray | None, index: list[int], choice: list[int]
) -> None:
    """User ``index[j]`` reports iff ``choice[j] > 0``, at level ``choice[j] - 1`` (``level``
    None: one level); the users are distinct."""
    if len(index) <= _FEW_CHOICES:
        for i, c in zip(index, choice, strict=True):
            report[i] = c > 0
            if c > 0 and level is not None:
                level[i] = c - 1
        return
    users, chosen = np.array(index, dtype=np.intp), np.array(choice, dtype=np.int64)
    report[users] = chosen > 0
    if level is not None:
        level[users[chosen > 0]] = chosen[chosen > 0] - 1
