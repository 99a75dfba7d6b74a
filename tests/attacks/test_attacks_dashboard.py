"""The dashboard's attack pieces: one chart per metric whatever attacks run; tracked traces."""

from __future__ import annotations

import numpy as np

from mdpsim.attacks.base import METRICS, attack_column
from mdpsim.dashboard import mapview
from mdpsim.simulation import columns as charts
from mdpsim.simulation.tick_row import Column, TickColumns, legacy


def test_attack_panels_show_every_attack_of_the_run():
    declared = TickColumns(
        Column(attack_column(label, metric), "attack", label, metric)
        for label, metric in [("bayes", "error_km"), ("bayes", "guess_error_km"),
                              ("viterbi", "error_km"), ("places", "hit"), ("bayes", "hit"),
                              ("linkage", "hit"), ("bayes", "leakage_per_km"),
                              ("smooth", "entropy_bits")]
    )  # fmt: skip
    panels = charts.attack_charts(declared)
    assert set(charts.ATTACK_CHARTS) <= set(METRICS)
    assert panels["Attack expected error (km)"] == ["bayes_error_km", "viterbi_error_km"]
    assert panels["Attack top-1 hit rate"] == ["places_hit", "bayes_hit", "linkage_hit"]
    assert panels["Attack posterior entropy (bits)"] == ["smooth_entropy_bits"]
    assert charts.attack_charts(TickColumns([Column("tick", "run")])) == {}


def test_a_table_without_declarations_is_read_by_its_names():
    """ticks.parquet of an mdpsim before the declarations: attack columns by the metric their
    names end with; ``{label}_hit`` settles a label that itself ends like a metric."""
    names = ["tick", "utility_loss_km", "range_error", "query_privacy_saving", "bayes_error_km",
             "prior_guess_error_km", "prior_guess_hit", "places_hit"]  # fmt: skip
    declared = legacy(names)
    assert declared["prior_guess_error_km"] == Column(
        "prior_guess_error_km", "attack", "prior_guess", "error_km"
    )
    assert declared["range_error"].group == "query"
    assert declared["utility_loss_km"].group == "run"
    assert list(charts.attack_columns(declared, ["hit"])) == ["prior_guess_hit", "places_hit"]


def test_tracked_trace_is_drawn_against_the_true_one(road_domain_small):
    domain = road_domain_small
    crs = domain.graph.graph["crs"]
    true, tracked = np.array([0, 1, 2, 2]), np.array([0, 3, 2, 5])
    layers = mapview.tracked_trace_layers(domain.x_xy, crs, true, tracked)
    ids = [layer.id for layer in layers]
    assert ids == ["true_trace", "true_trace_ticks", "tracked_trace", "tracked_trace_ticks"]
    path = np.array(layers[2].data[0]["path"])
    assert path.shape == (4, 2) and np.all(np.abs(path[:, 1] - 60.17) < 0.2)  # Helsinki
    roads = [[[24.93, 60.16], [24.95, 60.17]]]
    deck = mapview.deck(roads, {}, extra=tuple(layers))
    assert [layer.id for layer in deck.layers][-4:] == ids


def test_a_new_whole_run_score_shows_with_no_edit():
    """An attack's own score (here ``x_rate``) follows the known ones in ``mdpsim attack``'s
    table and the live page's whole-run table; the setting's keys are not scores."""
    import pandas as pd

    from mdpsim.experiments.harness import success_markdown

    summary = pd.DataFrame(
        {"mechanism": ["em"], "epsilon_per_km": [4.0], "repetition": [0], "attack": ["x"],
         "x_rate": [0.25], "chance": [0.1], "hit": [0.5]}
    )  # fmt: skip
    ids = ("mechanism", "epsilon_per_km", "repetition", "attack")
    assert charts.whole_run_metrics(summary, ids) == ["hit", "chance", "x_rate"]
    head = success_markdown(summary).splitlines()[0]
    assert head.index("hit") < head.index("chance") < head.index("x_rate")
