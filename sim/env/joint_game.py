"""The game over public state: exact values of a profile and every player's exact best response.

With memoryless attacks (``bayes``), mechanisms fitted without uploads, queries whose charge is
fixed (``per_query``, ``queries.saving = false``) and deterministic players whose policies read
their observations (or follow the scenario's strategies), nothing random moves the public state:
the tick, the published mechanism and every user's filter (spent, halted, reported last) evolve
deterministically from the players' actions. Each player's expected reward at a tick is then a
closed form of that state and the actions, over users placed by the prior (what every player
assumes at a tick), the reports, the guesses and the query noise:

* a user reporting at level ``l`` under mechanism ``m``: ``-(loss_{m,l} + attack_weight
  hit_{m,l})`` (prior-averaged loss and exact-guess chance); silent or refused:
  ``-silent_loss_km``;
* the server: the users' mean ``hit_{m,l}`` over the paid reports, minus ``query_weight`` times
  each owed answer's expected error (:mod:`mdpsim.env.expected_errors`).

:class:`JointGame` enumerates the states one player's actions reach while the others follow
their policies, and solves that player's problem by backward induction. Transitions being
deterministic, the best response is a plan (an action per tick) and ``act(obs)`` reads only the
observation's tick: no policy that reads more does better. A policy's observation is rebuilt
from the state bit for bit (``attack_entropy_bits``, random, is 0; a server policy that reads
it is refused).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mdpsim.agents.strategies.refresh import Every, RefreshContext
from mdpsim.agents.strategies.report_policy import ReportContext
from mdpsim.env.expected_errors import ErrorTables, range_error_tables, refuse_inexact
from mdpsim.env.prior_answers import planar_distances_km
from mdpsim.env.responses import (
    _has_attacks,
    _located_loss_and_hit,
    _refuse_non_markov,
    _renewal_ticks,
    _State,
    user_best_response,
)
from mdpsim.errors import InputError
from mdpsim.privacy.filters import add_up, fits, sub_down

Policy = Callable[[np.ndarray], Any]
Decision = tuple[bool, int | None, tuple[str, ...]]  # refresh, mechanism, kinds asked


@dataclass(frozen=True)
class JointState:
    """The public state at the start of a tick."""

    mechanism: int  # index of the published mechanism
    generated_at: int  # kept only while the server's observation can matter
    users: tuple[_State, ...]
    level_counts: tuple[int, ...]  # last tick's paid reports per level


@dataclass(frozen=True)
class _Menu:
    """One publishable mechanism's public facts, per eps level."""

    costs: np.ndarray
    loss: np.ndarray
    hit: np.ndarray
    report_cost: float
    expected_loss_km: float
    user_obs: np.ndarray  # (n_users, fields) observation template
    server_obs: np.ndarray


@dataclass(frozen=True)
class Tick:
    """One tick of an episode: what every player chose, the mechanism the reports meet (after
    a refresh) and the expected rewards."""

    user_actions: list[int]
    decision: Decision
    mechanism: int
    user_rewards: np.ndarray
    server_reward: float


@dataclass
class Solved:
    """``agent``'s exact best response: its value and the plan (an action per tick)."""

    agent: str
    value: float
    plan: list[Any]
    game: JointGame

    def act(self, obs: np.ndarray) -> Any:
        return self.plan[self.game.tick_of(obs)]

    def evaluate(self, policy: Policy) -> float:
        """The exact value of ``policy`` for this agent, the others unchanged."""
        return self.game.values({**self.game.policies, self.agent: policy})[self.agent]


class JointGame:
    """The public-state game of ``env`` at run seed ``seed``; ``policies`` maps agents to
    deterministic observation -> action policies (an agent left out follows its strategy)."""

    def __init__(self, env, *, seed: int, policies: Mapping[str, Policy] | None = None) -> None:
        game = getattr(env, "game", env)
        self.game, self.policies = game, dict(policies or {})
        for agent in self.policies:
            if agent != "server":
                game.user_index(agent)
        game.reset(seed)
        model, scenario = game.model, game.scenario
        _refuse(game, server_follows=("server" not in self.policies))
        self.n, self.horizon = game.n_users, game.horizon
        self.capacity = model.filters.capacity.astype(float)
        self.safe_cap = np.where(self.capacity > 0, self.capacity, 1.0)
        self.default_level = model.server.default_level
        self.weights = game.weights
        self.attack_weight = float(game.weights.attack_weight) if _has_attacks(game) else 0.0
        self.has_attacks = _has_attacks(game)
        self.silent_loss_km = float(game.silent_loss_km)
        self.kinds = tuple(scenario.queries.kinds)
        self.saving = bool(scenario.queries.saving)
        self.owed = {t for t in range(1, self.horizon + 1) if model.server.wants_queries(t)}
        self.query_cost = (
            float(model.budget.query_costs(np.array([scenario.queries.rho_per_km2]))[0])
            if self.kinds else 0.0
        )  # fmt: skip
        self.renews = _renewal_ticks(model.budget, self.horizon)
        self.report_policy, self.refresh = model.report_policy, model.strategies.refresh
        self.planner = model.server.planner
        self.start = model.server.published
        self.menu = [self._menu(m) for m in range(len(model.server.mechanism_names))]
        game.reset(seed)  # the episode the env plays starts untouched
        self._domain = model.domain
        self._tables: ErrorTables | None = None
        self._server_actions = self._enumerate_server_actions()

    # ------------------------------------------------------------------ the public world
    def _menu(self, index: int) -> _Menu:
        game = self.game
        server = game.model.server
        server.generate(index)  # at tick 0, as a refresh to it would
        prior = game.model.domain.prior
        loss, hit = _located_loss_and_hit(server.level_mechanisms, game.model.domain)
        obs = game.observations()
        return _Menu(
            costs=np.array([float(c.cost) for c in server.level_charges]),
            loss=prior @ loss,
            hit=prior @ hit,
            report_cost=float(server.report_charge.cost),
            expected_loss_km=float(server.expected_loss_km),
            user_obs=np.stack([obs[f"user_{i}"] for i in range(self.n)]),
            server_obs=obs["server"],
        )

    @property
    def tables(self) -> ErrorTables:
        """The owed range answers' expected errors (one line when they have no finite sum)."""
        if self._tables is None:
            settings = self.game.scenario.queries
            refuse_inexact(settings)
            planar = planar_distances_km(self._domain)
            self._tables = range_error_tables(settings, self._domain, planar, self.n)
        return self._tables

    def initial(self) -> JointState:
        users = tuple(_State(0.0, False, False) for _ in range(self.n))
        return JointState(self.start, 0, users, (0,) * len(self.menu[0].costs))

    def tick_of(self, obs: np.ndarray) -> int:
        tick = int(round(float(obs[0]) * self.horizon))  # tick_fraction, first in both
        if not 0 <= tick < self.horizon:
            raise InputError(f"observation at tick {tick}: the episode has {self.horizon} ticks")
        return tick

    # ------------------------------------------------------------------ observations
    def _remaining(self, state: JointState) -> np.ndarray:
        return np.array([0.0 if u.halted else sub_down(c, u.spent)
                         for u, c in zip(state.users, self.capacity, strict=True)])  # fmt: skip

    def user_obs(self, tick: int, state: JointState, i: int) -> np.ndarray:
        """User ``i``'s observation before deciding tick ``tick + 1`` (as Game.observations)."""
        obs = self.menu[state.mechanism].user_obs[i].copy()
        u = state.users[i]
        remaining = 0.0 if u.halted else sub_down(self.capacity[i], u.spent)
        obs[0] = tick / self.horizon
        obs[1] = remaining / self.safe_cap[i]
        obs[6], obs[7] = float(u.halted), float(u.reported)
        return obs

    def server_obs(self, tick: int, state: JointState, entropy: float = 0.0) -> np.ndarray:
        """The server's observation (``attack_entropy_bits`` set to ``entropy``)."""
        menu, cap = self.menu[state.mechanism], self.safe_cap
        head = np.array(
            [
                tick / self.horizon,
                (tick - state.generated_at) / self.horizon,
                np.mean([u.reported for u in state.users]),
                np.mean([u.halted for u in state.users]),
                float(np.mean(self._remaining(state) / cap)),
                menu.report_cost / float(np.mean(cap)),
                menu.expected_loss_km,
                entropy,
            ],
            dtype=np.float32,
        )
        obs = menu.server_obs.copy()
        obs[: len(head)] = np.nan_to_num(head, nan=0.0, posinf=0.0)
        if self.game.mechanism_names:
            obs[len(head)] = np.float32(state.mechanism)
        if self.game.level_fields:
            obs[-len(state.level_counts) :] = np.asarray(state.level_counts) / self.n
        return obs

    # ------------------------------------------------------------------ actions
    def _enumerate_server_actions(self) -> dict[Decision, np.ndarray]:
        """Every distinct decision of the server's action space, with one action giving it."""
        nvec = self.game.action_space("server").nvec
        out: dict[Decision, np.ndarray] = {}
        for combo in itertools.product(*(range(int(k)) for k in nvec)):
            action = np.array(combo, dtype=np.int64)
            out.setdefault(self.decision(action), action)
        return out

    def decision(self, action: Any) -> Decision:
        d = self.game._server_decision(action)
        kinds: tuple[str, ...] = ()
        if d["query"]:
            kinds = self.kinds if d["query_kinds"] is None else tuple(d["query_kinds"])
        mechanism = d["mechanism"] if d["refresh"] else None
        return bool(d["refresh"]), mechanism, kinds

    def _strategy_users(self, tick: int, state: JointState) -> np.ndarray:
        menu = self.menu[state.mechanism]
        ctx = ReportContext(
            tick=tick + 1,
            horizon_ticks=self.horizon,
            remaining=self._remaining(state),
            capacity=self.capacity,
            halted=np.array([u.halted for u in state.users]),
            report_cost=menu.report_cost,
            expected_loss_km=menu.expected_loss_km,
        )
        report = np.asarray(self.report_policy.decide(ctx), dtype=bool)
        return np.where(report, 1 + self.default_level, 0)

    def user_actions(self, tick: int, state: JointState, skip: str | None = None) -> list[int]:
        """Every user's action at ``state`` by its policy or strategy (``skip``: left 0)."""
        by_strategy = None
        out = []
        for i in range(self.n):
            agent = f"user_{i}"
            if agent == skip:
                out.append(0)
            elif agent in self.policies:
                out.append(int(np.asarray(self.policies[agent](self.user_obs(tick, state, i)))))
            else:
                if by_strategy is None:
                    by_strategy = self._strategy_users(tick, state)
                out.append(int(by_strategy[i]))
        return out

    def server_decision(self, tick: int, state: JointState) -> Decision:
        """The server's decision at ``state`` by its policy or its strategies."""
        policy = self.policies.get("server")
        if policy is None:
            due = self.refresh.due(RefreshContext(tick + 1, state.generated_at, 0, 0))
            query = self.planner.due(tick + 1)
            return bool(due), None, (self.kinds if query else ())
        action = policy(self.server_obs(tick, state))
        if not np.array_equal(
            np.asarray(action), np.asarray(policy(self.server_obs(tick, state, 1.0)))
        ):
            raise InputError(
                "the server's policy reads attack_entropy_bits, a random field: its exact "
                "value is no finite sum (give a policy that reads the public state)"
            )
        return self.decision(action)

    # ------------------------------------------------------------------ one tick
    def step(
        self, tick: int, state: JointState, users: list[int], decision: Decision
    ) -> tuple[JointState, np.ndarray, float]:
        """Tick ``tick + 1`` from ``state``: the next state, the users' and the server's
        expected rewards."""
        t = tick + 1
        refresh, chosen, kinds = decision
        if kinds and self.saving:
            raise InputError(
                "no exact value: a query asked with queries.saving charges the users by their "
                "places (iterative elimination); use queries.saving = false"
            )
        mech, generated = state.mechanism, state.generated_at
        if refresh:
            mech, generated = (mech if chosen is None else chosen), t
        menu = self.menu[mech]
        spent = [u.spent for u in state.users]
        halted = [u.halted for u in state.users]
        active_start = self.n - sum(halted)
        paid = [False] * self.n
        counts = [0] * len(menu.costs)
        rewards = np.full(self.n, -self.silent_loss_km)
        hits = 0.0
        for i, a in enumerate(users):  # filters.request: a cost of 0 is not asked
            cost = menu.costs[a - 1] if a else 0.0
            if cost > 0 and not halted[i]:
                if fits(spent[i], cost, self.capacity[i]):
                    spent[i], paid[i] = add_up(spent[i], cost), True
                    counts[a - 1] += 1
                    rewards[i] = -(menu.loss[a - 1] + self.attack_weight * menu.hit[a - 1])
                    hits += menu.hit[a - 1] if self.has_attacks else 0.0
                else:
                    halted[i] = True
        asked = {kind: self._ask(spent, halted) for kind in kinds}
        server = hits / self.n
        if t in self.owed and self.kinds:
            tables = self.tables
            for kind in self.kinds:
                n_q = asked.get(kind, 0)
                owed = tables.asked[n_q] if n_q else tables.prior[active_start]
                server -= self.weights.query_weight * float(owed)
        if t in self.renews:
            spent, halted = [0.0] * self.n, [False] * self.n
        after = tuple(_State(s, h, p) for s, h, p in zip(spent, halted, paid, strict=True))
        nxt = JointState(mech, generated, after, tuple(counts))
        return nxt, rewards, float(server)

    def _ask(self, spent: list[float], halted: list[bool]) -> int:
        """One ``per_query`` query (BM): who cannot pay is asked and halts; returns how many
        answered (as responses.UserGame replays the filter)."""
        cost, n_q = self.query_cost, 0
        for i in range(self.n):
            if halted[i]:
                continue
            if sub_down(self.capacity[i], spent[i]) < cost:
                if fits(spent[i], cost, self.capacity[i]):
                    spent[i] = add_up(spent[i], cost)
                    n_q += 1
                else:
                    halted[i] = True
                continue
            spent[i] = add_up(spent[i], cost)
            n_q += 1
        return n_q

    # ------------------------------------------------------------------ values
    def play(self, policies: Mapping[str, Policy] | None = None) -> Iterator[Tick]:
        """The episode every player's policy (default: this game's) plays, tick by tick."""
        game = self if policies is None else replace_policies(self, policies)
        state = game.initial()
        for tick in range(self.horizon):
            users, decision = game.user_actions(tick, state), game.server_decision(tick, state)
            after, rewards, r_server = game.step(tick, state, users, decision)
            yield Tick(users, decision, after.mechanism, rewards, r_server)
            state = after

    def values(self, policies: Mapping[str, Policy] | None = None) -> dict[str, float]:
        """Every player's exact expected episode reward when all follow ``policies`` (default:
        this game's)."""
        totals, server = np.zeros(self.n), 0.0
        for tick in self.play(policies):
            totals += tick.user_rewards
            server += tick.server_reward
        return {"server": server, **{f"user_{i}": float(totals[i]) for i in range(self.n)}}

    def best_response(self, agent: str) -> Solved:
        """``agent``'s exact best response to the others' policies (backward induction over
        the states its actions reach; ties go to the first action)."""
        is_server = agent == "server"
        if not is_server:
            index = self.game.user_index(agent)
        actions: list[Any] = (
            list(self._server_actions.items()) if is_server
            else [(a, a) for a in range(1 + len(self.menu[0].costs))]
        )  # fmt: skip
        layers: list[dict[JointState, int]] = [{self.initial(): 0}]
        edges: list[np.ndarray] = []
        gains: list[np.ndarray] = []
        for tick in range(self.horizon):
            index_of: dict[JointState, int] = {}
            nxt = np.zeros((len(layers[-1]), len(actions)), dtype=np.int64)
            reward = np.zeros(nxt.shape)
            for s, state in enumerate(layers[-1]):
                users = self.user_actions(tick, state, skip=None if is_server else agent)
                fixed = (False, None, ()) if is_server else self.server_decision(tick, state)
                for k, (choice, _) in enumerate(actions):
                    if is_server and choice[2] and self.saving:  # cannot be owed: saving
                        nxt[s, k], reward[s, k] = -1, -np.inf  # is refused then
                        continue
                    if is_server:
                        after, _, r = self.step(tick, state, users, choice)
                        after = replace(after, generated_at=0)  # nobody else reads it
                    else:
                        users[index] = choice
                        after, rewards, _ = self.step(tick, state, users, fixed)
                        r = rewards[index]
                    nxt[s, k] = index_of.setdefault(after, len(index_of))
                    reward[s, k] = r
            layers.append(index_of)
            edges.append(nxt)
            gains.append(reward)
        value = np.zeros(len(layers[-1]))
        best: list[np.ndarray] = []
        for tick in reversed(range(self.horizon)):
            q = gains[tick] + value[edges[tick]]
            best.insert(0, q.argmax(axis=1))
            value = q.max(axis=1)
        plan, s = [], 0
        for tick in range(self.horizon):
            k = int(best[tick][s])
            plan.append(actions[k][1])
            s = int(edges[tick][s, k])
        return Solved(agent=agent, value=float(value[0]), plan=plan, game=self)


def best_response(env, *, seed: int, policies=None):
    """``env``'s agent's exact best response at run seed ``seed`` (``value``, ``act(obs)``).

    A user against the scenario's strategies (``policies`` None): by dynamic programming over
    its information state (:mod:`mdpsim.env.responses`), a ``UserBestResponse``. The server,
    or a user against ``policies`` (agent -> deterministic observation policy; the others follow
    their strategies): over the public state (module docstring), a :class:`Solved` plan."""
    agent = getattr(env, "agent", None)
    if agent == "server" or policies is not None:
        if agent is None:
            raise InputError("best_response needs a single_agent_env (its agent answers)")
        return JointGame(env, seed=seed, policies=policies).best_response(agent)
    return user_best_response(env, seed=seed)


def replace_policies(game: JointGame, policies: Mapping[str, Policy]) -> JointGame:
    """A shallow copy of ``game`` whose players follow ``policies``."""
    other = object.__new__(JointGame)
    other.__dict__.update(game.__dict__)
    other.policies = dict(policies)
    return other


def _refuse(game, *, server_follows: bool) -> None:
    """One line saying why the public state would not move deterministically."""
    scenario = game.scenario
    if scenario.attacks.report_probability < 1.0:
        raise InputError(
            "no exact best response: attacks.report_probability < 1 draws who reports at "
            "random; use 1"
        )
    try:
        _refuse_non_markov(game)
    except InputError as err:
        if server_follows or "refresh schedule" not in str(err):
            raise
    if server_follows and not isinstance(game.model.strategies.refresh, Every):
        raise InputError("no exact best response: use strategies.refresh = 'every'")
