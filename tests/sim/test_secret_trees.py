"""A domain's shared shortest-path trees: any sources' rows are those computed for them alone."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.geo.routing import shortest_path_trees
from mdpsim.simulation.mobility import secret_trees


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_rows_are_the_trees_of_those_sources(walk_domain, seed):
    domain = walk_domain(80, seed)
    pairs = domain.constraint_pairs
    w = domain.dist_xx[pairs[:, 0], pairs[:, 1]]
    places = np.sort(np.random.default_rng(seed).choice(domain.n_x, 40, replace=False))
    alone = shortest_path_trees(domain.n_x, pairs[:, 0], pairs[:, 1], w, places)
    trees = secret_trees(domain)
    assert trees is secret_trees(domain) and not trees.flags.writeable
    assert trees.dtype == alone.dtype and np.array_equal(trees[places], alone)


def test_rows_do_not_depend_on_other_sources_even_on_ties():
    side = 6  # a grid of unit edges: many tied shortest paths (scipy's order decides)
    ids = np.arange(side * side).reshape(side, side)
    rows = np.r_[ids[:, :-1].ravel(), ids[:-1, :].ravel()]
    cols = np.r_[ids[:, 1:].ravel(), ids[1:, :].ravel()]
    w = np.ones(len(rows))
    n = side * side
    every = shortest_path_trees(n, rows, cols, w, np.arange(n))
    for sources in ([0], [5, 17], [35, 3, 20]):
        alone = shortest_path_trees(n, rows, cols, w, np.array(sources))
        assert np.array_equal(every[sources], alone)
