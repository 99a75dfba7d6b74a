"""The dashboard's attack pieces: one chart per metric whatever attacks run; tracked traces."""

from __future__ import annotations

import numpy as np

from mdpsim.attacks.base import METRICS
from mdpsim.dashboard import mapview
from mdpsim.simulation import columns as charts


def test_attack_panels_show_every_attack_of_the_run():
    columns = ["tick", "bayes_error_km", "bayes_guess_error_km", "viterbi_error_km",
               "places_hit", "bayes_hit", "linkage_hit", "bayes_leakage_per_km",
               "smooth_entropy_bits"]  # fmt: skip
    panels = charts.attack_charts(columns)
    assert set(charts.ATTACK_CHARTS) <= set(METRICS)
    assert panels["Attack expected error (km)"] == ["bayes_error_km", "viterbi_error_km"]
    assert panels["Attack top-1 hit rate"] == ["places_hit", "bayes_hit", "linkage_hit"]
    assert panels["Attack posterior entropy (bits)"] == ["smooth_entropy_bits"]
    assert charts.attack_charts(["tick", "utility_loss_km"]) == {}


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
