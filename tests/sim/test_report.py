"""`mdpsim report`: mean ± 1.96 SE tables (Markdown, CSV), pivots, plots, and clear errors."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mdpsim.cli import main
from mdpsim.errors import InputError
from mdpsim.experiments.batch import expand
from mdpsim.experiments.report import summarize, write_report
from mdpsim.experiments.store import new_manifest, write_task
from mdpsim.simulation import scenario as sc

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SWEEP = {"mechanism.name": ["em", "laplace"], "mechanism.epsilon_per_km": [4.0, 10.0]}


def _synthetic_store(
    root: Path, *, repetitions: int = 3, fail: str | None = None, sweep: dict | None = None
) -> Path:
    """A store whose per-task numbers are known: loss = base + repetition, 3 ticks each."""
    scenario = sc.from_dict(
        {
            "scenario": {"name": "synthetic", "ticks": 3},
            "domain": {"n_points": 300},
            "mechanism": {"name": "em", "epsilon_per_km": 4.0},
            "sweep": {**(SWEEP if sweep is None else sweep), "repetitions": repetitions},
        }
    )
    tasks = expand(scenario)
    root.mkdir(parents=True)
    (root / "tasks").mkdir()
    for t in tasks:
        if t.task_id == fail:
            continue
        mech = t.params["mechanism.name"]
        eps = t.params.get("mechanism.epsilon_per_km", 4.0)
        base = (1.0 if mech == "em" else 2.0) / eps
        n = 3
        ident = {"task_id": [t.task_id] * n, "repetition": [t.repetition] * n, "seed": [t.seed] * n}
        ticks = pd.DataFrame(
            {
                **ident,
                **{k: [v] * n for k, v in t.params.items()},
                "tick": [1, 2, 3],
                "mechanism": [mech] * n,
                "epsilon_per_km": [eps] * n,
                # the tick mean is base + repetition; ticks vary around it
                "utility_loss_km": base + t.repetition + np.array([-0.1, 0.0, 0.1]),
                "bayes_error_km": [0.5 * base] * n,
                "remaining_budget_mean": [100.0, 90.0, 80.0 - t.repetition],
                "n_halted": [0, 1, 2],
                "query_privacy_saving": [0.1, 0.2, 0.3],
                "range_error": [np.nan] * n,
            }
        )
        timings = pd.DataFrame(
            {
                **ident,
                "tick": [1, 2, 3],
                "regenerated": [True, False, True],
                "mechanism_s": [0.2, 99.0, 0.4],
            }
        )
        write_task(root, t.task_id, ticks=ticks, timings=timings)
    manifest = new_manifest(scenario, [dataclasses.asdict(t) for t in tasks], "per-task")
    (root / "manifest.json").write_text(json.dumps(manifest))
    failures = {fail: "Traceback ...\nValueError: synthetic failure"} if fail else {}
    (root / "failures.json").write_text(json.dumps(failures))
    return root


def test_summary_is_mean_and_1_96_standard_errors_over_repetitions(tmp_path):
    store = _synthetic_store(tmp_path / "s")
    write_report(store)
    summary = pd.read_csv(store / "report" / "summary.csv")
    row = summary[
        (summary["mechanism.name"] == "em") & (summary["mechanism.epsilon_per_km"] == 4.0)
    ]
    row = row.iloc[0]
    # repetitions give tick means 0.25, 1.25, 2.25: mean 1.25, sd 1, half-width 1.96/sqrt(3)
    assert row["n"] == 3
    assert math.isclose(row["utility_loss_km_mean"], 1.25)
    assert math.isclose(row["utility_loss_km_ci95"], 1.96 / math.sqrt(3))
    assert math.isclose(row["bayes_error_km_mean"], 0.125) and row["bayes_error_km_ci95"] == 0
    assert math.isclose(row["remaining_budget_final_mean"], 79.0)  # last tick, not the mean
    assert math.isclose(row["halted_final_mean"], 2.0)
    assert math.isclose(row["solve_s_mean"], 0.3)  # only ticks that generated the mechanism
    assert "range_error_mean" not in summary  # all-NaN metrics are left out
    tasks = pd.read_csv(store / "report" / "tasks.csv")
    assert len(tasks) == 12 and set(tasks["n_points"]) == {300}


def test_markdown_has_paper_style_pivots_and_the_plots(tmp_path):
    store = _synthetic_store(tmp_path / "s")
    paths = write_report(store)
    md = (store / "report" / "summary.md").read_text()
    assert (
        "| mechanism.name | mechanism.epsilon_per_km = 4.0 | mechanism.epsilon_per_km = 10.0 |"
        in md
    )
    assert "| em | 1.25 ± 1.1 | 1.1 ± 1.1 |" in md  # utility loss pivot, em row
    assert "| laplace | 1.5 ± 1.1 | 1.2 ± 1.1 |" in md
    assert "tasks finished: 12 of 12; failed: 0" in md
    pngs = {p.name for p in paths if p.suffix == ".png"}
    assert pngs == {
        "utility_loss_vs_eps.png",
        "attack_error_vs_eps.png",
        "remaining_budget_over_ticks.png",
        "privacy_saving_over_ticks.png",
    }  # one |X| only: no solve-time plot
    for name in pngs:
        data = (store / "report" / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000
        assert f"]({name})" in md


def test_solve_time_is_plotted_against_the_swept_domain_size(tmp_path):
    sweep = {"mechanism.name": ["em", "laplace"], "domain.n_points": [300, 600]}
    store = _synthetic_store(tmp_path / "s", repetitions=2, sweep=sweep)
    pngs = {p.name for p in write_report(store) if p.suffix == ".png"}
    assert "solve_time_vs_n_points.png" in pngs
    assert "utility_loss_vs_eps.png" not in pngs  # one eps only
    tasks = pd.read_csv(store / "report" / "tasks.csv")
    assert sorted(set(tasks["n_points"])) == [300, 600]


def test_a_single_repetition_reports_the_mean_without_a_half_width(tmp_path):
    store = _synthetic_store(tmp_path / "s", repetitions=1)
    write_report(store)
    summary = pd.read_csv(store / "report" / "summary.csv")
    assert (summary["n"] == 1).all() and summary["utility_loss_km_ci95"].isna().all()
    md = (store / "report" / "summary.md").read_text()
    assert "| em | 0.25 | 0.1 |" in md


def test_failed_and_missing_tasks_are_reported_not_hidden(tmp_path):
    store = _synthetic_store(tmp_path / "s", fail="0004")
    write_report(store, tmp_path / "elsewhere")
    md = (tmp_path / "elsewhere" / "summary.md").read_text()
    assert "tasks finished: 11 of 12; failed: 1" in md
    assert "`0004`: ValueError: synthetic failure" in md
    summary = pd.read_csv(tmp_path / "elsewhere" / "summary.csv")
    assert sorted(summary["n"]) == [2, 3, 3, 3]


def test_report_of_a_folder_that_is_not_a_store_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "not a batch store" in capsys.readouterr().err
    store = _synthetic_store(tmp_path / "s")
    for p in (store / "tasks").iterdir():
        p.unlink()
    with pytest.raises(InputError, match="no finished task"):
        write_report(store)


def test_batch_then_report_on_a_tiny_real_batch(tmp_path, capsys, helsinki_walk):
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(
        """
[scenario]
name = "tiny"
seed = 3
ticks = 2
[domain]
n_points = 100
[users]
count = 10
[mechanism]
name = "em"
epsilon_per_km = 4.0
[sweep]
"mechanism.epsilon_per_km" = [3.0, 9.0]
"""
    )
    store = tmp_path / "store"
    assert main(["batch", str(scenario), "--out", str(store), "--workers", "1"]) == 0
    assert main(["report", str(store)]) == 0
    out = capsys.readouterr().out
    assert "summary.md" in out and "utility_loss_vs_eps.png" in out
    summary = pd.read_csv(store / "report" / "summary.csv")
    assert list(summary["mechanism.epsilon_per_km"]) == [3.0, 9.0]
    loss = summary["utility_loss_km_mean"]
    assert loss.notna().all() and loss[0] > loss[1]  # more privacy, more loss
    md = (store / "report" / "summary.md").read_text()
    assert "## Utility and attacks" in md and "| 9.0 | 1 |" in md


def test_standard_errors_skip_missing_values_and_need_two_repetitions():
    tasks = pd.DataFrame(
        {
            "mechanism.name": ["em", "em", "em", "lp"],
            "utility_loss_km": [1.0, 3.0, float("nan"), 5.0],
        }
    )
    out = summarize(tasks, ["mechanism.name"]).set_index("mechanism.name")
    assert list(out["n"]) == [3, 1]
    assert out.loc["em", "utility_loss_km_mean"] == 2.0
    assert math.isclose(out.loc["em", "utility_loss_km_ci95"], 1.96)  # s = sqrt 2 over n = 2
    assert math.isnan(out.loc["lp", "utility_loss_km_ci95"])  # one value: no interval
