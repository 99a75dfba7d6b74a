"""Exact best responses of a user, within what it observes (docs/env.md, "Exact best responses").

A user observes its budget, the tick, the public fields and its own past actions, never its
location. When the attacks are memoryless (``bayes``: each report alone against the prior) and
the server's moves do not depend on the user (a fixed refresh schedule, a mechanism fitted
without uploads, queries whose charge is fixed), nothing the user observes tells it more about
its location than the prior, and a tick's expected reward depends only on its action:
``-(expected_loss_l + attack_weight * hit_l)`` for a report at level ``l`` (the published
mechanism's prior-averaged loss and exact-guess probability, the observation's public fields),
``-silent_loss_km`` for silence. The user's problem is then a finite-horizon MDP over its
information state (tick, budget spent, halted, reported last), with deterministic transitions
that replay its filter's arithmetic (:mod:`mdpsim.privacy.filters`) charge by charge.
:func:`user_best_response` solves it by backward induction; :meth:`UserGame.evaluate` gives any
observation-based policy's exact value on the same states.

``value`` is an expectation over the user's locations drawn from the prior at every tick (what
the public fields assume), the reports and the attacks' guesses. It is what playing the policy
earns on average where the users' places follow the prior (users that start from the prior and
do not move, tests/sim/test_responses.py); mobility that drifts from the prior shifts the
realised mean by the drift, which no legal policy can read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mdpsim.agents.strategies.query_planner import PerQuery
from mdpsim.agents.strategies.refresh import Every
from mdpsim.errors import InputError
from mdpsim.privacy.filters import PopulationFilter, add_up, fits, sub_down

Policy = Callable[[np.ndarray], int]
MEMORYLESS_ATTACKS = ("bayes",)


@dataclass(frozen=True)
class _State:
    spent: float
    halted: bool
    reported: bool


class UserGame:
    """The information-state MDP of ``agent`` in ``env``'s game at run seed ``seed``.

    ``env`` is a ``single_agent_env`` of a user (or its :class:`~mdpsim.env.game.Game`); it is
    reset at ``seed`` to read the public world (domain, mechanisms, charges). Raises
    :class:`~mdpsim.errors.InputError` saying why when the game is not such an MDP.
    """

    def __init__(self, env, *, seed: int, agent: str | None = None) -> None:
        game = getattr(env, "game", env)
        agent = agent or getattr(env, "agent", None)
        if agent is None or agent == "server":
            raise InputError("user_best_response needs a user agent (agent='user_i')")
        self.user = game.user_index(agent)
        game.reset(seed)
        model = game.model
        _refuse_non_markov(game)
        server = model.server
        self.horizon = game.horizon
        self.capacity = float(model.filters.capacity[self.user])
        self.costs = [float(c.cost) for c in server.level_charges]
        self.silent_loss_km = float(game.silent_loss_km)
        self.attack_weight = float(game.weights.attack_weight) if _has_attacks(game) else 0.0
        loss, hit = _located_loss_and_hit(server.level_mechanisms, model.domain)
        self.prior = model.domain.prior
        #: per secret x and action a (0 silent, 1 + l), the tick's expected reward at x
        self.located_rewards = np.column_stack(
            [np.full(len(self.prior), -self.silent_loss_km), -(loss + self.attack_weight * hit)]
        )
        self.rewards = self.prior @ self.located_rewards  # what the user expects at each tick
        self._template = game.observations()[agent].copy()
        self._fields = list(game.user_fields())
        self._query_ticks, self._query_cost, self._query_kinds = _query_schedule(game)
        self._renews = _renewal_ticks(model.budget, self.horizon)
        self._enumerate()

    # ------------------------------------------------------------------ states
    def _enumerate(self) -> None:
        """Every reachable state per tick and, per (state, action), the next state."""
        self.states: list[list[_State]] = [[_State(0.0, False, False)]]
        self.next: list[np.ndarray] = []
        self.paid: list[np.ndarray] = []  # per (state, action): the report was paid
        for tick in range(1, self.horizon + 1):
            index: dict[_State, int] = {}
            nxt = np.zeros((len(self.states[-1]), 1 + len(self.costs)), dtype=np.int64)
            paid = np.zeros(nxt.shape, dtype=bool)
            for s, state in enumerate(self.states[-1]):
                for a in range(nxt.shape[1]):
                    after, ok = self._transition(tick, state, a)
                    nxt[s, a] = index.setdefault(after, len(index))
                    paid[s, a] = ok
            self.states.append(list(index))
            self.next.append(nxt)
            self.paid.append(paid)

    def _transition(self, tick: int, state: _State, action: int) -> tuple[_State, bool]:
        """One tick of the user's filter: its report, the queries, the renewal."""
        cap, spent, halted = self.capacity, state.spent, state.halted
        ok = False
        if action and not halted:  # filters.request: pay, or halt for good
            cost = self.costs[action - 1]
            ok = cost > 0 and fits(spent, cost, cap)
            spent, halted = (add_up(spent, cost), halted) if ok else (spent, True)
        if tick in self._query_ticks:  # PerQuery.ask, one user, BM (spends its whole budget)
            for _ in range(self._query_kinds):
                cost = self._query_cost
                if not halted and sub_down(cap, spent) < cost:
                    if fits(spent, cost, cap):
                        spent = add_up(spent, cost)
                    else:
                        halted = True
                    continue
                if not halted:
                    spent = add_up(spent, cost)
        if tick in self._renews:
            spent, halted = 0.0, False
        return _State(spent, halted, ok), ok

    def observation(self, tick: int, state: _State) -> np.ndarray:
        """The user's observation in ``state`` before deciding tick ``tick + 1``."""
        obs = self._template.copy()
        f = self._fields
        remaining = 0.0 if state.halted else sub_down(self.capacity, state.spent)
        obs[f.index("tick_fraction")] = tick / self.horizon
        obs[f.index("remaining_fraction")] = remaining / self.capacity
        obs[f.index("halted")] = float(state.halted)
        obs[f.index("reported_last")] = float(state.reported)
        return obs

    # ------------------------------------------------------------------ solving
    def _q(self, tick: int, rewards: np.ndarray, after: np.ndarray) -> np.ndarray:
        """``Q[s, a, k]`` at tick ``tick + 1``: ``rewards`` (K, A), ``after`` (S', K)."""
        paid = self.paid[tick]
        kind = np.where(paid, np.arange(paid.shape[1])[None, :], 0)  # unpaid: a silent tick
        return rewards.T[kind] + after[self.next[tick]]

    def solve(self, rewards: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Backward induction for reward rows ``rewards`` (K, A): per tick the values (S, K)
        and the greedy actions (S, K); ties go to the lowest action."""
        values = [np.zeros((len(self.states[-1]), rewards.shape[0]))]
        actions: list[np.ndarray] = []
        for tick in reversed(range(self.horizon)):
            q = self._q(tick, rewards, values[0])
            actions.insert(0, q.argmax(axis=1))
            values.insert(0, q.max(axis=1))
        return values, actions

    def evaluate(self, policy: Policy) -> float:
        """The exact expected episode reward of ``policy`` (obs -> action)."""
        chosen = [
            np.array([int(policy(self.observation(t, s))) for s in states])
            for t, states in enumerate(self.states[:-1])
        ]
        value = np.zeros(len(self.states[-1]))
        rewards = self.rewards[None, :]
        for tick in reversed(range(self.horizon)):
            q = self._q(tick, rewards, value[:, None])[:, :, 0]
            value = q[np.arange(len(q)), chosen[tick]]
        return float(value[0])

    def state_of(self, obs: np.ndarray) -> tuple[int, int]:
        """The (tick, state index) an observation is in; one line when none matches."""
        f = self._fields
        tick = int(round(float(obs[f.index("tick_fraction")]) * self.horizon))
        if not 0 <= tick < self.horizon:
            raise InputError(f"observation at tick {tick}: the episode has {self.horizon} ticks")
        remaining = float(obs[f.index("remaining_fraction")]) * self.capacity
        halted, reported = bool(obs[f.index("halted")]), bool(obs[f.index("reported_last")])
        best, gap = -1, np.inf
        for s, state in enumerate(self.states[tick]):
            if state.halted != halted or state.reported != reported:
                continue
            left = 0.0 if state.halted else sub_down(self.capacity, state.spent)
            if abs(left - remaining) < gap:
                best, gap = s, abs(left - remaining)
        if best < 0 or gap > 1e-5 * self.capacity:
            raise InputError(
                "the observation's budget is no state of this game (another seed, user or "
                "scenario?): compute the best response for the env and seed it plays"
            )
        return tick, best


@dataclass
class UserBestResponse:
    """A user's exact best response: ``value`` (expected episode reward) and ``act(obs)``."""

    game: UserGame
    value: float
    actions: list[np.ndarray]  # per tick, per state: the action

    def act(self, obs: np.ndarray) -> int:
        tick, state = self.game.state_of(obs)
        return int(self.actions[tick][state, 0])

    def oracle(self) -> Callable[[np.ndarray, int], int]:
        """NOT a legal policy: ``act(obs, secret)`` of a user that sees its own secret and
        assumes it stays there (exact for users that do not move). Its choice would follow its
        location, which the server sees through the choice itself (docs/env.md)."""
        values, actions = self.game.solve(self.game.located_rewards)

        def act(obs: np.ndarray, secret: int) -> int:
            tick, state = self.game.state_of(obs)
            return int(actions[tick][state, secret])

        self.oracle_value = float(self.game.prior @ values[0][0])
        return act


def user_best_response(env, *, seed: int, agent: str | None = None) -> UserBestResponse:
    """The exact best response of ``env``'s user (or ``agent``) at run seed ``seed``."""
    game = UserGame(env, seed=seed, agent=agent)
    values, actions = game.solve(game.rewards[None, :])
    return UserBestResponse(game=game, value=float(values[0][0, 0]), actions=actions)


# ---------------------------------------------------------------------- the game's shape
def _has_attacks(game) -> bool:
    return bool(game.scenario.attacks.specs())


def _refuse_non_markov(game) -> None:
    """One line saying why the user's problem is no MDP over its information state."""
    model, scenario = game.model, game.scenario
    names = [s["name"] for s in scenario.attacks.specs()]
    other = [n for n in names if n not in MEMORYLESS_ATTACKS]
    if other:
        raise InputError(
            f"no exact best response: attack {other[0]!r} reads more than this tick's report, "
            f"so a tick's reward depends on the past; use attacks.run = {list(MEMORYLESS_ATTACKS)}"
        )
    if len(names) > 1:
        raise InputError("no exact best response: use one memoryless attack (attacks.run)")
    if any(m.upload_guarantee is not None for m in model.server.level_mechanisms):
        raise InputError(
            "no exact best response: the mechanism is fitted on the users' uploads, so the "
            "user's own places shape what it later plays against"
        )
    if not isinstance(model.strategies.refresh, Every):
        raise InputError(
            "no exact best response: the refresh schedule reads the users' reports (use "
            "strategies.refresh = 'every')"
        )
    due = any(model.server.wants_queries(t) for t in range(1, game.horizon + 1))
    if due and scenario.queries.kinds:
        if not isinstance(model.strategies.query_planner, PerQuery):
            raise InputError(
                "no exact best response: the query planner's allocations follow the budgets "
                "(use strategies.query_planner = 'per_query')"
            )
        if scenario.queries.saving:
            raise InputError(
                "no exact best response: with queries.saving the queries' charge depends on "
                "the user's place (iterative elimination); use queries.saving = false"
            )


def _query_schedule(game) -> tuple[set[int], float, int]:
    model, scenario = game.model, game.scenario
    ticks = {t for t in range(1, game.horizon + 1) if model.server.wants_queries(t)}
    if not scenario.queries.kinds:
        return set(), 0.0, 0
    cost = float(model.budget.query_costs(np.array([scenario.queries.rho_per_km2]))[0])
    return ticks, cost, len(scenario.queries.kinds)


def _renewal_ticks(budget, horizon: int) -> set[int]:
    """The ticks after which the budget policy renews a filter (probed on a one-user filter)."""
    out = set()
    for tick in range(1, horizon + 1):
        probe = PopulationFilter(budget.notion, 1)
        budget.end_of_tick(tick, probe)
        if probe.windows:
            out.add(tick)
    return out


def _located_loss_and_hit(mechanisms, domain) -> tuple[np.ndarray, np.ndarray]:
    """Per secret and level: the expected loss (km) of a report and the chance that the MAP
    guess of the report (the ``bayes`` attack's top-1, under the prior) is that secret."""
    prior = domain.prior
    loss, hit = [], []
    for m in mechanisms:
        z = m.matrix_
        loss.append((z * domain.dist_xy).sum(axis=1))
        top = (prior[:, None] * z).argmax(axis=0)  # per output, the MAP secret
        hit.append(_hit_at(z, top))
    return np.column_stack(loss), np.column_stack(hit)


def _hit_at(z: np.ndarray, top: np.ndarray) -> np.ndarray:
    """Per secret x: ``sum_y Z[x, y] [top(y) = x]``."""
    mine = top[None, :] == np.arange(z.shape[0])[:, None]
    return (z * mine).sum(axis=1)
