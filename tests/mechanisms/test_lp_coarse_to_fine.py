"""The coarse-to-fine warm start of the optimal LP: same optimum as the direct full LP, fewer
rounds."""

from __future__ import annotations

import numpy as np
import pytest
from test_lp_generation import _full_lp_optimum, _solve

from mdpsim.errors import InputError, SolverError
from mdpsim.mechanisms import make
from mdpsim.mechanisms.lp import coarse_to_fine
from mdpsim.mechanisms.lp.coarse_to_fine import (
    coarse_to_fine_warm_start,
    farthest_point_order,
    subset_sizes,
)
from mdpsim.mechanisms.lp.highs import HighsOptions


@pytest.fixture(scope="module")
def road_48(walk_domain):
    return walk_domain(48, 3)


def test_subset_sizes_shrink_by_sqrt2_down_to_the_smallest():
    assert subset_sizes(140) == []
    assert subset_sizes(141) == [100]
    assert subset_sizes(150) == [106]
    assert subset_sizes(300) == [106, 150, 212]
    assert subset_sizes(48, smallest=16) == [17, 24, 34]


def test_farthest_point_order_starts_at_the_1_median_and_takes_the_farthest(road_48):
    dist, prior = road_48.dist_xx, road_48.prior
    order = farthest_point_order(dist, prior, 10)
    assert order[0] == np.argmin(dist @ prior)
    assert len(np.unique(order)) == 10
    for m in range(1, 10):
        assert dist[:, order[:m]].min(axis=1)[order[m]] == dist[:, order[:m]].min(axis=1).max()


@pytest.mark.parametrize(
    "eps", [pytest.param(e, marks=pytest.mark.slow) for e in (4.0, 7.0)] + [10.0]
)
def test_subset_seeds_keep_the_full_lp_optimum_and_cut_the_rounds(road_48, eps):
    warm, sizes = coarse_to_fine_warm_start(road_48, eps, smallest=16)
    assert sizes == [17, 24, 34]
    _, cold = _solve(road_48, eps)
    _, seeded = _solve(road_48, eps, warm=warm, dual_restarts=True)  # as make("lp") solves
    if eps < 10:  # at eps 10 linprog's default tolerance (1e-7) is the looser of the two
        full = _full_lp_optimum(road_48, eps)
        assert abs(seeded.objective - full) <= 1e-7 * full
    assert seeded.objective == pytest.approx(cold.objective, rel=1e-9)
    assert seeded.rounds < 2 / 3 * cold.rounds  # equal without seeds


def test_make_lp_starts_coarse_to_fine_by_default(road_48, monkeypatch):
    monkeypatch.setattr(coarse_to_fine, "SMALLEST_SUBSET", 16)
    seeded = make("lp", epsilon=4.0).fit(road_48)
    direct = make("lp", epsilon=4.0, coarse_to_fine=False).fit(road_48)
    assert seeded.info_["subsets"] == "17,24,34"
    assert direct.info_["subsets"] == ""
    assert seeded.info_["rounds"] < 2 / 3 * direct.info_["rounds"]
    assert seeded.expected_loss() == pytest.approx(direct.expected_loss(), rel=1e-9)


def test_the_time_limit_covers_the_subsets(road_48):
    with pytest.raises(SolverError, match="Time limit reached"):
        coarse_to_fine_warm_start(road_48, 4.0, smallest=16, options=HighsOptions(time_limit_s=0.0))


def test_coarse_to_fine_must_be_a_bool_and_levels_is_retired():
    with pytest.raises(InputError, match="coarse_to_fine"):
        make("lp", epsilon=4.0, coarse_to_fine="no")
    with pytest.raises(InputError, match="'levels' is gone; use coarse_to_fine"):
        make("lp", epsilon=4.0, levels=False)
