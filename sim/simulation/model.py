"""The Mesa model: mobile users on a road network, an honest-but-curious server, one tick a story.

Hot state lives in arrays owned by the model (positions in
:class:`~mdpsim.simulation.mobility.Population`,
budgets in a :class:`~mdpsim.privacy.filters.PopulationFilter`); behaviour lives in the players'
strategies (:mod:`mdpsim.agents.strategies`). A tick starts with the players' decisions
(:meth:`PrivacyModel.decide`, or actions given from outside by :mod:`mdpsim.env`), made from
what each knows at that moment. Every random choice flows from the scenario's seed through
independent child streams (mobility, reports, queries), so adding a query does not change
where users walk.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from functools import cached_property

import mesa
import numpy as np
from mesa.discrete_space import Network

from mdpsim._core.threads import one_blas_thread
from mdpsim.agents import CuriousServer, UserAgent
from mdpsim.agents.strategies import Strategies, from_scenario
from mdpsim.agents.strategies.report_policy import ReportContext
from mdpsim.geo.domain import Domain
from mdpsim.queries.outcome import QueryOutcome
from mdpsim.simulation.scenario import Scenario
from mdpsim.simulation.tick_row import RunFacts, TickColumns, TickRow
from mdpsim.simulation.world import build_world


@dataclass
class TickLog:
    """Per-tick rows and per-(tick, user) columns collected during a run; ``columns``
    declares what each tick column is (the run's :class:`TickColumns`)."""

    ticks: list[dict] = field(default_factory=list)
    columns: TickColumns = field(default_factory=TickColumns)
    users: list[dict[str, np.ndarray]] = field(default_factory=list)
    timings: list[dict[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Decisions:
    """What the players decided at the start of a tick."""

    report: np.ndarray  # bool per user: willing to report
    refresh: bool  # the server regenerates the mechanism
    query: bool  # the server asks this tick's queries
    # the game's choices ([game], docs/env.md); None: what the strategies do
    level: np.ndarray | None = None  # per user, the index of its eps level
    mechanism: int | None = None  # at a refresh, the index of the mechanism to publish
    query_kinds: tuple[str, ...] | None = None  # the kinds asked (None: every kind)


class PrivacyModel(mesa.Model):
    """Users move, report under mDP, the server queries and attacks; see docs/design.md §6.

    The first mechanism is generated when the model is built (tick 0), so the players' first
    decisions see it.

    Parameters
    ----------
    scenario
        A validated :class:`~mdpsim.simulation.scenario.Scenario`.
    rng
        Seed of the run (defaults to ``scenario.seed``); Mesa's own ``rng`` is set from it.
    graph, domain
        Optionally a preloaded road graph / domain (the dashboard caches them).
    mechanism_cache
        Optionally a mapping shared between models that keeps fitted mechanisms which do not
        depend on the users (everything but DistA-LP), keyed by name, eps, parameters and domain.
    strategies
        Optionally the players' strategies (default:
        :func:`mdpsim.agents.strategies.from_scenario`).
    """

    @one_blas_thread()  # the same bits whatever the environment's BLAS threads (_core/threads.py)
    def __init__(
        self,
        scenario: Scenario,
        *,
        rng: int | None = None,
        graph=None,
        domain=None,
        mechanism_cache: MutableMapping | None = None,
        strategies: Strategies | None = None,
    ):
        world = build_world(scenario, rng, graph=graph, domain=domain)
        super().__init__(rng=world.seed)
        scenario = world.scenario  # with traces: users.count and scenario.ticks of the data
        self.world, self.config, self.seed = world, scenario, world.seed
        self.streams = world.streams
        self.graph, self.domain = world.graph, world.domain
        self.mobility, self.population = world.mobility, world.population
        self.strategies = from_scenario(scenario) if strategies is None else strategies
        self.horizon_ticks = scenario.scenario.ticks
        self.budget = self.strategies.budget
        self.filters = self.budget.new_filter(world.n_users)
        self.report_policy = self.strategies.report
        self.strategies.query_planner.bind(scenario.queries, horizon_ticks=self.horizon_ticks)
        self.tick = 0
        self.pseudonyms = np.arange(world.n_users, dtype=np.int64)  # the names reports carry
        self._user_ids = np.arange(world.n_users, dtype=np.int64)  # every tick's "user" column
        self._user_ids.setflags(write=False)
        self.log = TickLog()
        for index in range(world.n_users):
            UserAgent(self, index)
        self.server = CuriousServer(
            self,
            refresh=self.strategies.refresh,
            planner=self.strategies.query_planner,
            mechanism_cache=mechanism_cache,
        )
        self.server.generate()  # tick 0: the mechanism the first decisions see
        self.log.timings.append(
            {"tick": 0, "regenerated": True, "mechanism_s": self.server.generation_seconds}
        )

    @cached_property
    def space(self) -> Network:
        """The Mesa network space over the secrets, built on first use (a reset that never
        reads it, as the environment's, does not pay for it; building it draws nothing)."""
        return _secret_network(self.domain, self.random)

    # ------------------------------------------------------------------ one tick
    def report_context(self) -> ReportContext:
        """What users know when they decide about the coming tick."""
        return ReportContext(
            tick=self.tick + 1,
            horizon_ticks=self.horizon_ticks,
            remaining=self.filters.remaining,
            capacity=self.filters.capacity,
            halted=self.filters.halted.copy(),
            report_cost=self.server.report_charge.cost,
            expected_loss_km=self.server.expected_loss_km,
        )

    def decide(self) -> Decisions:
        """The players' decisions for the coming tick, by their strategies."""
        tick = self.tick + 1
        report = np.asarray(self.report_policy.decide(self.report_context()), dtype=bool)
        chance = self.config.attacks.report_probability
        if chance < 1.0:  # every willing user reports with this chance, whatever its place
            report &= self.streams["participation"].random(len(report)) < chance
        return Decisions(
            report=report,
            refresh=bool(self.server.wants_refresh(tick)),
            query=bool(self.server.wants_queries(tick)),
        )

    def step(self) -> None:
        """One tick with every player following its strategy."""
        self.advance(self.decide())

    @one_blas_thread()
    def advance(self, decisions: Decisions) -> None:
        """One tick, as SPEC.md section 6 and docs/design.md tell it, with the players'
        ``decisions`` for it (made from what they knew at the end of the previous tick)."""
        self.tick += 1
        clock = time.perf_counter  # each phase's seconds: the clock read between phases
        start = clock()
        self._move()  # 1. users move
        moved = clock()
        regenerated = self._regenerate(decisions)  # 2. a new mechanism (uploads) when due
        generated = clock()
        reports = self._report(decisions)  # 3. users report (each at its level) and pay
        reported = clock()
        queries = self._query(decisions)  # 4. the server's queries
        queried = clock()
        attacks = self.server.attack(reports)  # 5. the server's attacks, scored
        attacked = clock()
        self.last_reports, self.last_attacks, self.last_queries = reports, attacks, queries
        self._collect(reports, queries, attacks, regenerated)  # 6. the data collector
        self.budget.end_of_tick(self.tick, self.filters)  # a renewing budget renews here
        # wall-clock times differ between identical runs: kept apart from the data
        self.log.timings.append(
            {
                "tick": self.tick,
                "regenerated": regenerated,
                "move_s": moved - start,
                "mechanism_s": generated - moved,
                "report_s": reported - generated,
                "query_s": queried - reported,
                "attack_s": attacked - queried,
            }
        )

    def _move(self) -> None:
        """Phase 1: every user walks one tick (the positions this tick's reports are about)."""
        self.population.step(self.streams["mobility"])

    def _regenerate(self, decisions: Decisions) -> bool:
        """Phase 2: the server (re)generates the mechanism when the decisions say it is due."""
        return bool(decisions.refresh and self.server.generate(decisions.mechanism))

    def _report(self, decisions: Decisions):
        """Phase 3: users take this tick's pseudonyms, report at their levels and pay."""
        self.pseudonyms = self.strategies.pseudonyms.names(
            self.tick, self.pseudonyms, self.streams["pseudonyms"]
        )
        return self.server.collect_reports(decisions.report, decisions.level)

    def _query(self, decisions: Decisions) -> dict[str, QueryOutcome]:
        """Phase 4: the server's queries of this tick (none when it does not ask)."""
        return self.server.ask_queries(decisions.query_kinds) if decisions.query else {}

    def run(self, ticks: int, *, progress=None) -> TickLog:
        """Run ``ticks`` ticks; ``progress`` is called with the tick number after each."""
        for _ in range(ticks):
            self.step()
            if progress is not None:
                progress(self.tick)
        return self.log

    # ------------------------------------------------------------------ data collection
    def _collect(self, reports, queries, attacks, regenerated) -> None:
        filters = self.filters
        remaining = filters.remaining
        n = len(remaining)
        run = RunFacts(
            tick=self.tick,
            n_users=n,
            n_reports=len(reports.users),
            n_halted=int(np.count_nonzero(filters.halted)),
            remaining_budget_mean=float(np.add.reduce(remaining) / n),  # np.mean's sum
            remaining_budget_min=float(np.minimum.reduce(remaining)),
            delta_spent_max=float(np.maximum.reduce(filters.delta_spent)),
            utility_loss_km=_mean(reports.loss_km),
            mechanism_regenerated=bool(regenerated),
        )
        facts = self.server.mechanism_facts()
        row = self.log.columns.record(TickRow(run, facts, queries, attacks.means))
        self.log.ticks.append(row)
        if self.config.output.per_user:
            cols = {
                "tick": np.full(n, self.tick, dtype=np.int64),
                "user": self._user_ids,
                "secret": self.population.position.copy(),
                "remaining_budget": remaining,
                "halted": filters.halted.copy(),
            }
            cols.update(reports.user_columns(n))
            cols.update(attacks.user_columns(n))
            self.log.users.append(cols)


def _secret_network(domain: Domain, random) -> Network:
    """Mesa network space over the secrets, laid out at their coordinates (no spring layout)."""
    import networkx as nx

    G = nx.Graph()
    G.add_nodes_from(range(domain.n_x))
    pairs = domain.constraint_pairs
    G.add_edges_from(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), strict=True))
    layout = {i: tuple(xy) for i, xy in enumerate(domain.x_xy.tolist())}
    return Network(G, layout=layout, random=random)


def _mean(values: np.ndarray) -> float:
    """``np.mean`` of a 1-D float array (its sum over the count; NaN when empty)."""
    return float(np.add.reduce(values) / len(values)) if len(values) else float("nan")
