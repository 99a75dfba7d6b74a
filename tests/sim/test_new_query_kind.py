"""Adding a query kind is one module that registers itself (docs/design.md, "What to edit to
add ..."): this one counts the users in a disk ``scale`` times its own radius field, through
the range query's machinery, declares its prior answer, and a scenario asks it like the
bundled kinds."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import Field

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
from mdpsim.queries.kinds import QueryFields
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.tick_row import TickColumns


class WideFields(QueryFields):
    """``[queries.params.wide_range]``: this kind's own fields."""

    radius_m: float = Field(default=250.0, gt=0, description="the base radius")
    scale: float = Field(default=2.0, ge=1, description="how many radii the disk spans")


SEEN: list[WideFields] = []  # the fields each call was handed


def wide_prior(call) -> float:
    """The prior's answer: an error of 0.5 whatever the point (a stand-in)."""
    return 0.5


@register_kind(
    "wide_range", label="wide range count error", fields=WideFields, prior_answer=wide_prior
)
def ask_wide_range(call: QueryCall) -> tuple[QueryAnswer, float]:
    """Users within ``scale * radius_m`` of the point (PM1)."""
    mine = WideFields.of(call.settings, "wide_range")
    SEEN.append(mine)
    radius_m = mine.scale * mine.radius_m
    region = Disk(float(call.point_m[0]), float(call.point_m[1]), radius_m)
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


def test_a_kinds_own_fields_reach_it_from_the_scenario(world):
    SEEN.clear()
    simulate(world(queries={"params": {"wide_range": {"scale": 3.0}}}))
    assert SEEN and {(f.scale, f.radius_m) for f in SEEN} == {(3.0, 250.0)}  # over defaults


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"wide_range": {"scael": 3.0}}, r"queries\.params\.wide_range\.scael"),
        ({"wide_range": {"scale": 0.5}}, r"queries\.params\.wide_range\.scale.*greater"),
        ({"range": {"radius_m": -1.0}}, r"queries\.params\.range\.radius_m"),
        ({"sql": {"x": 1}}, r"queries\.params.*'sql', not a query kind"),
    ],
)
def test_a_wrong_field_is_one_line_naming_it(world, params, message):
    with pytest.raises(InputError, match=message) as caught:
        sc.from_dict(world.raw(queries={"params": params}))
    assert "\n" not in str(caught.value)


def test_a_wrong_field_stops_mdpsim_run_with_exit_2_and_nothing_written(world, tmp_path, capsys):
    from mdpsim.cli import main

    path = tmp_path / "s.toml"
    path.write_text(
        '[scenario]\nname = "s"\nticks = 2\n[network]\nsource = "helsinki-test"\n'
        '[domain]\nn_points = 40\n[mechanism]\nname = "em"\nepsilon_per_km = 4.0\n'
        "[queries.params.knn]\nk = 0\n"
    )
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "queries.params.knn.k" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_kinds_prior_answer_comes_from_its_registration():
    from mdpsim.env.prior_answers import prior_answer

    assert prior_answer("wide_range") is wide_prior


def test_the_flat_fields_of_the_bundled_kinds_still_work_and_warn(world):
    raw = world.raw(queries={"range_radius_m": 300.0, "knn_k": 3})
    with pytest.warns(DeprecationWarning) as record:
        scenario = sc.from_dict(raw)
    said = {str(w.message) for w in record}
    assert (
        "queries.range_radius_m is deprecated: write [queries.params.range] radius_m = ..." in said
    )
    assert "queries.knn_k is deprecated: write [queries.params.knn] k = ..." in said
    assert scenario.queries.params_of("range").radius_m == 300.0
    assert scenario.queries.params_of("knn").k == 3
    assert scenario.queries.params_of("kde").bandwidth_m == 100.0  # its default
    both = world.raw(queries={"range_radius_m": 300.0, "params": {"range": {"radius_m": 1.0}}})
    with pytest.raises(InputError, match="range_radius_m is the old name.*keep only the second"):
        sc.from_dict(both)


def test_a_sweep_reaches_a_kinds_field_by_dotted_name(world):
    scenario = world()
    wider = scenario.replace(**{"queries.params.range.radius_m": 400.0})
    assert wider.queries.params_of("range").radius_m == 400.0
    assert wider.get("queries.params.range.radius_m") == 400.0


def test_the_cli_tells_a_deprecated_field_in_one_warning_line(tmp_path, capsys):
    from mdpsim.cli import main

    path = tmp_path / "old.toml"
    path.write_text(
        '[scenario]\nname = "old"\nticks = 2\n[network]\nsource = "helsinki-test"\n'
        '[domain]\nn_points = 40\n[mechanism]\nname = "em"\nepsilon_per_km = 4.0\n'
        "[queries]\nrange_radius_m = 300.0\n"
    )
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert warned == [
        "warning: queries.range_radius_m is deprecated: write [queries.params.range] radius_m = ..."
    ]


def test_a_scenario_pickles_to_a_process_without_this_modules_kind(world, tmp_path):
    """A Dask worker unpickles the batch's scenario without this test module's kind: the
    table holds plain values, and each kind's fields are validated where they are read."""
    import pickle
    import subprocess
    import sys

    scenario = world(queries={"params": {"range": {"radius_m": 300.0}}})
    assert scenario.queries.params_of("wide_range").scale == 2.0  # read here, not carried
    (tmp_path / "s.pkl").write_bytes(pickle.dumps(scenario))
    code = (
        "import pickle, sys; s = pickle.load(open(sys.argv[1], 'rb')); "
        "print(s.queries.params_of('range').radius_m)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "s.pkl")], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == "300.0", done.stderr
