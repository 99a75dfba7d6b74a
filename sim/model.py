"""The Mesa model: mobile users on a road network, an honest-but-curious server, one tick a story.

Hot state lives in arrays owned by the model (positions in :class:`~sim.mobility.Population`,
budgets in a :class:`~sim.privacy.filters.PopulationFilter`); the Mesa agents in ``agents/``
are thin views over one index of those arrays. Every random choice flows from the scenario's
seed through independent child streams (mobility, reports, queries), so adding a query does not
change where users walk.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field

import mesa
import numpy as np
from mesa.discrete_space import Network

from sim.domain import Domain
from sim.mobility import MobilityModel, Population
from sim.network import load_network
from sim.privacy.accounting import CGP, PureGP
from sim.privacy.filters import PopulationFilter, cost_in
from sim.scenario import Scenario

_STREAMS = ("mobility", "reports", "queries", "mechanism", "places")


@dataclass
class TickLog:
    """Per-tick rows and per-(tick, user) columns collected during a run."""

    ticks: list[dict] = field(default_factory=list)
    users: list[dict[str, np.ndarray]] = field(default_factory=list)
    timings: list[dict[str, float]] = field(default_factory=list)


class PrivacyModel(mesa.Model):
    """Users move, report under mDP, the server queries and attacks; see SPEC §6.

    Parameters
    ----------
    scenario
        A validated :class:`~sim.scenario.Scenario`.
    rng
        Seed of the run (defaults to ``scenario.seed``); Mesa's own ``rng`` is set from it.
    graph, domain
        Optionally a preloaded road graph / domain (the dashboard caches them).
    mechanism_cache
        Optionally a mapping shared between models that keeps fitted mechanisms which do not
        depend on the users (everything but DistA-LP), keyed by name, eps, parameters and domain.
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        rng: int | None = None,
        graph=None,
        domain=None,
        mechanism_cache: MutableMapping | None = None,
    ):
        seed = scenario.scenario.seed if rng is None else int(rng)
        super().__init__(rng=seed)
        self.config = scenario
        self.seed = seed
        streams = np.random.SeedSequence(seed).spawn(len(_STREAMS))
        self.streams = {
            name: np.random.default_rng(s) for name, s in zip(_STREAMS, streams, strict=True)
        }
        net, dom, users = scenario.network, scenario.domain, scenario.users
        self.graph = graph if graph is not None else load_network(
            net.source, network_type=net.network_type
        )  # fmt: skip
        self.domain = domain if domain is not None else Domain.from_network(
            self.graph,
            n_points=dom.n_points,
            n_outputs=dom.n_outputs or None,
            metric=dom.metric,
            seed=seed,
        )  # fmt: skip
        self.space = _secret_network(self.domain, self.random)
        self.mobility = MobilityModel.build(
            self.domain,
            n_places=users.n_places,
            speed_mps=users.speed_mps,
            tick_seconds=scenario.scenario.tick_seconds,
            dwell_ticks=tuple(users.dwell_ticks),
            rng=self.streams["places"],
        )
        self.population = Population(
            self.mobility, self.domain, users.count, self.streams["mobility"]
        )
        self.budget = CGP(users.budget_rho_per_km2)
        self.filters = PopulationFilter(self.budget, users.count)
        self.tick = 0
        self.log = TickLog()

        from agents.server import ServerAgent
        from agents.user import UserAgent

        for index in range(users.count):
            UserAgent(self, index)
        self.server = ServerAgent(self, mechanism_cache=mechanism_cache)

    # ------------------------------------------------------------------ one tick
    def step(self) -> None:
        """One tick, as SPEC §6 tells it."""
        self.tick += 1
        timing: dict[str, float] = {}
        with _timed(timing, "move_s"):
            self.population.step(self.streams["mobility"])  # 1. users move
        with _timed(timing, "mechanism_s"):
            regenerated = self.server.refresh_mechanism_if_due()  # 2. uploads, DistA-LP
        with _timed(timing, "report_s"):
            reports = self.server.collect_reports()  # 3. users report, paying their budgets
        with _timed(timing, "query_s"):
            queries = self.server.ask_queries()  # 4. adaptive queries with elimination
        with _timed(timing, "attack_s"):
            attacks = self.server.attack(reports)  # 5. Bayesian and tracking attacks
        self._collect(reports, queries, attacks, timing, regenerated)  # 6. the data collector

    def run(self, ticks: int, *, progress=None) -> TickLog:
        """Run ``ticks`` ticks; ``progress`` is called with the tick number after each."""
        for _ in range(ticks):
            self.step()
            if progress is not None:
                progress(self.tick)
        return self.log

    # ------------------------------------------------------------------ data collection
    def report_cost(self, epsilon_per_km: float) -> float:
        """What an eps-mDP report costs in the users' budget currency (rho = eps^2 / 2)."""
        return cost_in(self.budget, PureGP(epsilon_per_km))

    def _collect(self, reports, queries, attacks, timing, regenerated) -> None:
        remaining = self.filters.remaining
        n = self.population.n_users
        row = {
            "tick": self.tick,
            "n_users": n,
            "n_reports": int(len(reports.users)),
            "n_halted": int(self.filters.halted.sum()),
            "remaining_budget_mean": float(remaining.mean()),
            "remaining_budget_min": float(remaining.min()),
            "utility_loss_km": _mean(reports.loss_km),
            "mechanism_regenerated": bool(regenerated),
            **self.server.mechanism_row(),
            **queries,
            **attacks.tick_row(),
        }
        self.log.ticks.append(row)
        # wall-clock times differ between identical runs: kept apart from the data
        self.log.timings.append({"tick": self.tick, "regenerated": bool(regenerated), **timing})
        if self.config.output.per_user:
            cols = {
                "tick": np.full(n, self.tick, dtype=np.int64),
                "user": np.arange(n, dtype=np.int64),
                "secret": self.population.position.copy(),
                "remaining_budget": remaining,
                "halted": self.filters.halted.copy(),
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
    return float(np.mean(values)) if len(values) else float("nan")


class _timed:
    """Context manager adding the elapsed seconds to ``timing[key]``."""

    def __init__(self, timing: dict[str, float], key: str) -> None:
        self.timing, self.key = timing, key

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc) -> None:
        self.timing[self.key] = self.timing.get(self.key, 0.0) + time.perf_counter() - self.start
