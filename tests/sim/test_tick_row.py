"""The tick row is a typed record whose columns the run declares (sim/simulation/tick_row.py):
every column says what it is, the declarations travel with the table, and readers find the
attack and query columns in them, never by how a name ends."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mdpsim.dashboard import batch_data
from mdpsim.experiments.run import run_scenario
from mdpsim.queries.outcome import QueryOutcome
from mdpsim.simulation import columns
from mdpsim.simulation.tick_row import (
    DECLARATIONS_FILE,
    Column,
    TickColumns,
    TickRow,
    legacy,
    stack,
)


@pytest.fixture(scope="module")
def run(make_scenario, tmp_path_factory):
    """A run whose second attack is the tracking attack labelled ``smooth_guess``: a label
    that ends like a metric (``guess``, and ``smooth_guess_error_km`` ends like
    ``guess_error_km``)."""
    scenario = make_scenario(
        domain={"n_points": 60},
        users={"count": 8},
        attacks={
            "run": ["bayes", "smooth_guess"],
            "params": {"smooth_guess": {"attack": "tracking"}},
        },
    )
    out = tmp_path_factory.mktemp("tick_row") / "run"
    summary = run_scenario(scenario, out)
    return summary, pd.read_parquet(out / "ticks.parquet")


def test_ticks_parquet_carries_what_every_column_is(run):
    _, ticks = run
    declared = TickColumns.of(ticks)
    assert declared.names == list(ticks.columns)  # every column, in the table's order
    assert declared["smooth_guess_error_km"] == Column(
        "smooth_guess_error_km", "attack", "smooth_guess", "error_km"
    )
    assert declared["smooth_guess_guess_error_km"].metric == "guess_error_km"
    assert declared["range_error"] == Column("range_error", "query", "range", "error")
    assert declared["query_privacy_saving"].group == "query"
    assert declared["solver_status"].group == "mechanism"
    assert declared["n_halted"].group == "run"


def test_summary_and_charts_read_the_declarations(run):
    summary, ticks = run
    assert np.isfinite(summary["smooth_guess_error_km"])
    assert np.isfinite(summary["range_error"])
    panels = columns.charts(TickColumns.of(ticks))
    assert panels["Attack expected error (km)"] == ["bayes_error_km", "smooth_guess_error_km"]
    assert "range_privacy_saving" in panels[columns.SAVINGS_CHART]


def test_a_row_is_its_parts_in_the_tables_order(run):
    _, ticks = run
    declared = TickColumns.of(ticks)
    outcome = QueryOutcome(error=2.0, asked=4.0, spent=3.0)
    assert outcome.saving == 0.25
    assert QueryOutcome(float("nan")).saving is None  # nothing asked: no saving column
    first = ticks.iloc[0]
    from mdpsim.agents.server import MechanismFacts
    from mdpsim.simulation.tick_row import RunFacts

    run_facts = RunFacts(**{c.name: first[c.name] for c in declared.of_group("run")})
    mech = MechanismFacts(**{c.name: first[c.name] for c in declared.of_group("mechanism")})
    row = TickRow(run_facts, mech, {"range": outcome}, {"bayes": {"hit": 0.5}})
    flat = TickColumns().record(row)
    assert list(flat)[-4:] == ["range_error", "range_privacy_saving", "query_privacy_saving",
                               "bayes_hit"]  # fmt: skip
    assert flat["query_privacy_saving"] == 0.25


def test_one_name_with_two_meanings_is_refused():
    declared = TickColumns([Column("a_hit", "attack", "a", "hit")])
    with pytest.raises(ValueError, match="'a_hit' declared as"):
        declared.declare([Column("a_hit", "query", "a", "hit")])


def test_tables_stack_with_their_declarations_merged():
    one = TickColumns([Column("x_hit", "attack", "x", "hit")]).attach(
        pd.DataFrame({"x_hit": [1.0]})
    )
    two = TickColumns([Column("y_hit", "attack", "y", "hit")]).attach(
        pd.DataFrame({"y_hit": [0.0]})
    )
    stacked = stack([one, two])
    assert TickColumns.of(stacked).names == ["x_hit", "y_hit"]
    plain = stack([pd.DataFrame({"a": [1]}), pd.DataFrame({"a": [2]})])  # a timings table
    assert plain.attrs == {}


def test_a_report_folder_declares_its_task_table(tmp_path, run):
    """The batch explorer reads a report's tasks.csv with the declarations beside it; without
    them (a report of an older mdpsim) by the names (``legacy``)."""
    _, ticks = run
    declared = TickColumns.of(ticks)
    tasks = pd.DataFrame(
        {"task_id": ["t0"], "repetition": [0], "seed": [1], "mechanism": ["em"],
         "epsilon_per_km": [6.0], "n_points": [60], "smooth_guess_error_km": [0.4]}
    )  # fmt: skip
    tasks.to_csv(tmp_path / "tasks.csv", index=False)
    (tmp_path / DECLARATIONS_FILE).write_text(declared.to_json(), encoding="utf-8")
    batch = batch_data.load(tmp_path)
    assert batch_data.labels(batch)["smooth_guess_error_km"] == (
        "smooth_guess attack: expected error (km)"
    )
    (tmp_path / DECLARATIONS_FILE).unlink()
    older = batch_data.load(tmp_path)  # without a hit column the old rule misreads the label
    assert TickColumns.of(older.tasks)["smooth_guess_error_km"].owner == "smooth"
    assert legacy(["smooth_guess_error_km", "smooth_guess_hit"])["smooth_guess_error_km"].owner == (
        "smooth_guess"
    )


def _same(one: dict, other: dict) -> bool:
    """The same keys in the same order, each value the same (NaN as NaN) and of one type."""
    return list(one) == list(other) and all(
        type(a) is type(b) and (a == b or (a != a and b != b))
        for a, b in zip(one.values(), other.values(), strict=True)
    )


def test_a_recorded_row_is_its_flat_row_at_every_layout(run):
    _, ticks = run
    declared = TickColumns.of(ticks)
    first = ticks.iloc[0]
    from mdpsim.agents.server import MechanismFacts
    from mdpsim.simulation.tick_row import RunFacts

    run_facts = RunFacts(**{c.name: first[c.name] for c in declared.of_group("run")})
    mech = MechanismFacts(**{c.name: first[c.name] for c in declared.of_group("mechanism")})
    nan = float("nan")
    queries = [
        {},
        {"range": QueryOutcome(2.0, 4.0, 3.0), "kde": QueryOutcome(nan)},
        {"range": QueryOutcome(nan), "knn": QueryOutcome(1.0, 2.0, 2.0)},
    ]
    attacks = [{}, {"bayes": {"hit": 0.5, "error_km": nan}, "t": {"hit": 1.0}}, {"t": {}}]
    columns = TickColumns()
    for _ in range(2):  # declared, then recorded under the names kept
        for asked in queries:
            for means in attacks:
                row = TickRow(run_facts, mech, asked, means)
                assert _same(columns.record(row), row.flat())
