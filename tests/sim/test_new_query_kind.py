"""Adding a query kind is one module that registers itself (docs/design.md, "What to edit to
add ..."): this one counts the users in a disk twice the range radius, through the range
query's machinery, and a scenario asks it like the bundled kinds."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.errors import InputError
from mdpsim.experiments.report import labels, tables
from mdpsim.experiments.run import simulate
from mdpsim.queries import (
    Disk,
    QueryAnswer,
    QueryCall,
    available_kinds,
    count_err,
    range_count,
    register_kind,
    true_count,
)
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.tick_row import TickColumns


@register_kind("wide_range", label="wide range count error")
def ask_wide_range(call: QueryCall) -> tuple[QueryAnswer, float]:
    """Users within twice ``range_radius_m`` of the point (PM1)."""
    s = call.settings
    region = Disk(float(call.point_m[0]), float(call.point_m[1]), 2 * s.range_radius_m)
    answer = range_count(call.locations_m, region, call.budgets, method="PM1", rng=call.rng)
    truth = true_count(call.locations_m[call.budgets > 0], region)
    return answer, count_err(float(answer.value), truth)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def world(make_scenario):
    """This module's scenario: the registered kind beside range."""
    return make_scenario.but(
        scenario={"name": "s", "seed": 2, "ticks": 3},
        domain={"n_points": 60},
        users={"count": 12},
        queries={"rho_per_km2": 20.0, "kinds": ["range", "wide_range"]},
    )


def test_a_registered_query_kind_is_asked_and_charged_like_the_bundled_ones(world):
    assert {"range", "kde", "knn", "wide_range"} <= set(available_kinds())
    ticks, _, _ = simulate(world())
    assert np.isfinite(ticks["wide_range_error"]).all()
    assert ticks["wide_range_privacy_saving"].between(0, 1).all()
    assert ticks["range_error"].notna().all()  # the bundled kind beside it
    declared = TickColumns.of(ticks)  # mdpsim report's metrics: the run's declarations
    assert labels(declared)["wide_range_error"] == "wide range count error"
    assert {"range_error", "wide_range_error"} <= set(tables(declared)["Queries and budgets"])


def test_an_unregistered_query_kind_is_refused_naming_the_field(world):
    raw = world.raw(queries={"kinds": ["range", "sql"]})
    with pytest.raises(InputError, match=r"queries.kinds.*'sql'.*available: .*range"):
        sc.from_dict(raw)


def test_a_registered_kind_shows_in_summary_json_and_the_live_charts(world, tmp_path):
    import json

    from mdpsim.dashboard.model_view import charts
    from mdpsim.experiments.run import run_scenario

    summary = run_scenario(world(), tmp_path / "run")
    assert np.isfinite(summary["wide_range_error"])
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert json.dumps(written).count("wide_range_error") >= 1
    ticks, _, _ = simulate(world())
    savings = charts(ticks)["Privacy savings of queries"]
    assert {"wide_range_privacy_saving", "range_privacy_saving"} <= set(savings)
