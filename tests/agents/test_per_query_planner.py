"""The per-query planner against the loop it replaced: the same outcomes, charges and draws."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from mdpsim.agents.strategies.budget import CGPBudget
from mdpsim.agents.strategies.query_planner import PerQuery, QueryRound, ask_one
from mdpsim.queries.outcome import UNANSWERED, QueryOutcome
from mdpsim.simulation.scenario.queries_table import QueriesTable


@dataclass
class _Settings:
    """The ``[queries]`` table with any ``rho_per_km2`` (the table refuses 0)."""

    rho_per_km2: float
    kinds: list[str] = field(default_factory=lambda: ["range", "kde", "knn"])
    every_ticks: int = 1
    beta: float = 0.05
    saving: bool = True

    def params_of(self, kind: str):
        return QueriesTable().params_of(kind)


@dataclass
class _Domain:
    """The prior's points and a draw of one (what ``ask_one`` reads of the domain)."""

    x_xy: np.ndarray

    def draw_secret(self, rng: np.random.Generator) -> int:
        return int(rng.integers(len(self.x_xy)))


def _old_ask(round_: QueryRound) -> dict[str, QueryOutcome]:
    """``PerQuery.ask`` as it was: the budgets array tested for a budget > 0."""
    settings, filters = round_.settings, round_.filters
    rho = settings.rho_per_km2
    outcomes: dict[str, QueryOutcome] = {}
    cost = float(round_.budget.query_costs(np.array([rho]))[0])
    for kind in settings.kinds:
        if filters.halted.all():
            outcomes[kind] = UNANSWERED
            continue
        cannot = filters.short_of(cost)
        if cannot.any():
            filters.request(np.where(cannot, cost, 0.0), component=f"query_{kind}")
        budgets = np.where(filters.halted, 0.0, rho)
        if not (budgets > 0).any():
            outcomes[kind] = UNANSWERED
            continue
        answer, error = ask_one(kind, round_, budgets)
        filters.spend(round_.budget.query_costs(answer.spent), component=f"query_{kind}")
        spent = float(np.asarray(answer.spent).sum())
        outcomes[kind] = QueryOutcome(error, float(budgets.sum()), spent)
    return outcomes


def _round(seed: int) -> QueryRound:
    """Users some of whom have spent most of a small budget or halted, and a rho that fits
    some of them (or 0)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 12))
    budget = CGPBudget(rho_per_km2=2.0)
    filters = budget.new_filter(n)
    filters.spend(rng.choice([0.0, 0.5, 1.2, 1.9, 2.0], n), component="reports")
    filters.request(np.where(rng.random(n) < 0.2, 5.0, 0.0), component="reports")
    rho = float(rng.choice([0.0, 0.05, 0.3, 0.5, 0.9, 2.5]))
    domain = _Domain(rng.uniform(0, 3000, (40, 2)))
    locations = rng.uniform(0, 3000, (n, 2))
    return QueryRound(_Settings(rho), locations, domain, filters, budget, rng)


@pytest.mark.parametrize("seed", range(60))
def test_per_query_asks_charges_and_draws_as_the_loop_it_replaced(seed):
    new_round, old_round = _round(seed), _round(seed)
    planner = PerQuery()
    planner.bind(new_round.settings, horizon_ticks=10)
    for _ in range(3):  # three ticks: users halt as their budgets run out
        got, want = planner.ask(new_round), _old_ask(old_round)
        assert repr(got) == repr(want)
        new_f, old_f = new_round.filters, old_round.filters
        assert new_f.spent.tobytes() == old_f.spent.tobytes()
        assert new_f.halted.tobytes() == old_f.halted.tobytes()
        assert repr(new_f.spent_by_component()) == repr(old_f.spent_by_component())
        assert new_round.rng.bit_generator.state == old_round.rng.bit_generator.state


def _model():
    from mdpsim.simulation import scenario as sc
    from mdpsim.simulation.model import PrivacyModel

    s = sc.from_dict(
        {
            "scenario": {"name": "kinds", "seed": 3, "ticks": 4},
            "network": {"source": "helsinki-test"},
            "domain": {"n_points": 30},
            "users": {"count": 6},
            "mechanism": {"name": "em", "epsilon_per_km": 6.0},
        }
    )
    return PrivacyModel(s, rng=9)


def test_the_server_asks_the_chosen_kinds_as_a_fresh_copy_of_the_table_would():
    kept, fresh = _model(), _model()
    for kinds in [("kde", "knn"), ("range",), ("kde", "knn"), ("knn", "range"), ("kde", "knn")]:
        got = kept.server.ask_queries(kinds)
        settings = fresh.config.queries
        asked = settings.model_copy(update={"kinds": [k for k in settings.kinds if k in kinds]})
        want = fresh.server.planner.ask(
            QueryRound(
                asked,
                fresh.domain.x_xy[fresh.population.position],
                fresh.domain,
                fresh.filters,
                fresh.budget,
                fresh.streams["queries"],
            )
        )
        assert list(got) == [k for k in ("range", "kde", "knn") if k in kinds]
        assert repr(got) == repr(want)
    assert kept.server._asking(kept.config.queries, ("kde", "knn")) is kept.server._asking(
        kept.config.queries, ("kde", "knn")
    )
