"""The privacy-quality frontier (sim/experiments/frontier.py, ``mdpsim frontier``): monotone in Q,
and no
mechanism leaves the Bayes-optimal adversary more error than the optimum at its own loss."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.cli import main
from mdpsim.experiments import frontier

TOL_KM = 1e-6


_PLANES: dict = {}
METRICS = [("domain", "l2"), pytest.param(("l2", "zero_one"), marks=pytest.mark.slow)]


@pytest.fixture
def plane(walk_domain):
    def build(metrics):
        if metrics not in _PLANES:
            domain = walk_domain(40, 11)
            kw = {"quality_metric": metrics[0], "adversary_metric": metrics[1]}
            curve = frontier.optimum_curve(domain, [0.1, 0.3, 0.5, 0.8], **kw)
            names = ["em", "laplace", "lp", "rmp"]
            points = frontier.mechanism_points(domain, names, [1.0, 4.0, 12.0], **kw)
            _PLANES[metrics] = (curve, frontier.with_gaps(points, curve))
        return _PLANES[metrics]

    return build


@pytest.mark.parametrize("metrics", METRICS)
def test_frontier_is_monotone_and_concave_in_q(plane, metrics):
    curve, _ = plane(metrics)
    opt = curve["adversary_error_km"].to_numpy()
    assert np.all(np.diff(opt) >= -TOL_KM)
    q = curve["quality_km"].to_numpy()
    slopes = np.diff(opt) / np.diff(q)
    assert np.all(np.diff(slopes) <= 1e-6)  # concave: the duals bound it from above
    assert np.all(curve["released_loss_km"] <= curve["quality_km"] + TOL_KM)


@pytest.mark.parametrize("metrics", METRICS)
def test_no_mechanism_lies_above_the_frontier(plane, metrics):
    _, points = plane(metrics)
    assert not points["failed"].any(), points[points["failed"] != ""]
    assert points["gap_km"].min() >= -TOL_KM, points.sort_values("gap_km").head(3)


def test_the_bound_is_exact_at_the_grid_and_above_the_optimum_between(plane, walk_domain):
    curve, _ = plane(("domain", "l2"))
    at_grid = frontier.frontier_bound(curve, curve["quality_km"])
    np.testing.assert_allclose(at_grid, curve["adversary_error_km"], atol=1e-9)
    between = frontier.optimum_curve(
        walk_domain(40, 11), [0.25, 0.5], quality_metric="domain", adversary_metric="l2"
    )
    bound = frontier.frontier_bound(curve, between["quality_km"])
    assert np.all(between["adversary_error_km"].to_numpy() <= bound + TOL_KM)


def test_cli_writes_the_table_and_the_plot(tmp_path, capsys):
    toml = tmp_path / "f.toml"
    toml.write_text(
        '[scenario]\nname = "f"\nseed = 2\nticks = 2\n[domain]\nn_points = 30\n'
        '[users]\ncount = 2\n[mechanism]\nname = "em"\nepsilon_per_km = 4.0\n'
        "[queries]\nevery_ticks = 0\n"
    )
    out = tmp_path / "out"
    code = main(["frontier", str(toml), "--out", str(out), "--mechanisms", "em,lp",
                 "--epsilons", "2,8", "--qualities", "0.2,0.4"])  # fmt: skip
    assert code == 0
    assert {p.name for p in out.iterdir()} == {
        "frontier.csv",
        "frontier.md",
        "frontier.png",
        ".mdpsim-output",
    }
    text = capsys.readouterr().out
    assert "| em | 2 |" in text and "| lp | 8 |" in text
    assert main(["frontier", str(toml), "--out", str(out)]) == 2  # exists, no --force
    assert main(["frontier", str(toml), "--adversary-metric", "manhattan"]) == 2


def test_attack_harness_reports_the_optimal_adversary_and_each_attacks_exploitability():
    from mdpsim.experiments import harness
    from mdpsim.simulation import scenario as scenario_mod

    sc = scenario_mod.from_dict(
        {
            "scenario": {"name": "x", "seed": 1, "ticks": 3},
            "domain": {"n_points": 30},
            "users": {"count": 20},
            "mechanism": {"name": "em", "epsilon_per_km": 4.0},
            "queries": {"every_ticks": 0},
            "attacks": {"run": ["bayes", "tracking"]},
        }
    )
    summary, _ = harness.evaluate(sc, harness.plan_of(sc))
    assert summary["optimal_error_km"].nunique() == 1 and summary["optimal_error_km"].iloc[0] > 0
    np.testing.assert_allclose(
        summary["exploitability_km"], summary["guess_error_km"] - summary["optimal_error_km"]
    )
    assert "exploitability_km" in harness.success_markdown(summary)


def test_the_markdown_shows_a_gap_a_hair_below_zero_as_zero():
    import pandas as pd

    from mdpsim.experiments.frontier import markdown

    curve = pd.DataFrame(
        {"quality_km": [0.1], "adversary_error_km": [0.2], "quality_dual": [1.0], "seconds": [0.1]}
    )
    points = pd.DataFrame(
        {
            "mechanism": ["em"],
            "epsilon_per_km": [2.0],
            "failed": [""],
            "quality_loss_km": [0.1],
            "adversary_error_km": [0.2],
            "frontier_km": [0.2],
            "gap_km": [-3e-9],
        }  # fmt: skip
    )
    row = markdown(curve, points, cap=0.5).splitlines()[-1]
    assert row == "| em | 2 | 0.1000 | 0.2000 | 0.2000 | 0.0000 |" and "-0.0000" not in row
