"""Privacy domains on road networks and grids: sizes, metrics, chaining pairs, errors."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra

from mdpsim.errors import InputError
from mdpsim.geo.domain import Domain
from mdpsim.geo.network import undirected_lengths
from mdpsim.geo.routing import MIN_SPACING_M, RoadSegments, max_points, shortest_path_trees


@pytest.fixture(scope="module")
def road_300(helsinki_walk):
    return Domain.from_network(helsinki_walk, n_points=300, seed=3)


@pytest.mark.parametrize("n", [2, 50, 2000])
def test_n_points_gives_exactly_that_many_secrets(helsinki_walk, n):
    d = Domain.from_network(helsinki_walk, n_points=n)
    assert d.n_x == n and d.n_y == n
    assert d.dist_xx.shape == (n, n) and d.dist_xx.dtype == np.float64


def test_spacing_places_one_point_per_spacing(helsinki_walk):
    from mdpsim.geo.network import summarize

    d = Domain.from_network(helsinki_walk, spacing_m=100.0)
    total_m = summarize(helsinki_walk).total_length_km * 1000
    assert d.n_x == int(total_m // 100.0)


def test_intersections_domain_chains_along_graph_edges(helsinki_test_walk):
    d = Domain.from_network(helsinki_test_walk)
    assert d.n_x == helsinki_test_walk.number_of_nodes()
    undirected = nx.Graph(helsinki_test_walk)
    assert len(d.constraint_pairs) <= undirected.number_of_edges()


def test_road_metric_is_symmetric_and_obeys_the_triangle_inequality(road_300):
    d = road_300.dist_xx
    assert np.array_equal(d, d.T)
    assert np.all(np.diag(d) == 0) and np.all(d[~np.eye(len(d), dtype=bool)] > 0)
    for k in range(len(d)):
        assert np.all(d <= d[:, [k]] + d[[k], :] + 1e-12)


def test_road_distances_match_networkx_shortest_paths(helsinki_walk):
    d = Domain.from_network(helsinki_walk, metric="road")  # X = intersections
    nodes = list(helsinki_walk.nodes)
    und = nx.Graph()
    for u, v, length in helsinki_walk.edges(data="length"):
        if u != v and (not und.has_edge(u, v) or und[u][v]["length"] > length):
            und.add_edge(u, v, length=length)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(nodes), size=5, replace=False):
        ref = nx.single_source_dijkstra_path_length(und, nodes[i], weight="length")
        for j in rng.choice(len(nodes), size=20, replace=False):
            assert d.dist_xx[i, j] == pytest.approx(ref[nodes[j]] / 1000, rel=1e-12, abs=1e-15)


def test_constraint_pairs_imply_all_distances_by_chaining(road_300):
    d = road_300.dist_xx
    p = road_300.constraint_pairs
    A = coo_matrix((d[p[:, 0], p[:, 1]], (p[:, 0], p[:, 1])), shape=d.shape)
    chained = dijkstra(A, directed=False)
    np.testing.assert_allclose(chained, d, rtol=1e-12, atol=1e-15)
    assert len(p) < 0.05 * len(d) ** 2


@pytest.mark.parametrize("metric", ["l1", "l2", "linf"])
def test_lp_metrics_and_their_chaining_pairs(road_300, helsinki_walk, metric):
    d = Domain.from_network(helsinki_walk, n_points=60, seed=3, metric=metric)
    diff = d.x_xy[:, None, :] - d.x_xy[None, :, :]
    p = {"l1": 1, "l2": 2, "linf": np.inf}[metric]
    np.testing.assert_allclose(d.dist_xx, np.linalg.norm(diff, ord=p, axis=2) / 1000)
    pairs = d.constraint_pairs
    A = coo_matrix((d.dist_xx[pairs[:, 0], pairs[:, 1]], (pairs[:, 0], pairs[:, 1])), (60, 60))
    np.testing.assert_allclose(dijkstra(A, directed=False), d.dist_xx, rtol=1e-11)


def test_l1_grid_keeps_only_neighbouring_cells():
    d = Domain.from_bbox((0, 0, 400, 300), cell_m=100, metric="l1")
    assert d.n_x == 12
    # a 4 x 3 grid has 3*3 + 4*2 = 17 neighbouring pairs; everything else chains through them
    assert len(d.constraint_pairs) == 17


def test_grid_over_network_bbox(helsinki_walk):
    d = Domain.grid(helsinki_walk, cell_m=200.0, metric="l2")
    assert d.n_x == d.n_y and d.n_x > 20
    assert d.metric == "l2"


def test_coarser_outputs(helsinki_walk):
    d = Domain.from_network(helsinki_walk, n_points=200, n_outputs=50)
    assert d.dist_xy.shape == (200, 50)
    assert np.all(d.dist_xy >= 0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_outputs_that_are_the_secrets_are_their_coordinates(helsinki_test_walk, seed):
    d = Domain.from_network(helsinki_test_walk, n_points=80, seed=seed)
    segments = RoadSegments.of(helsinki_test_walk)
    assert d.y_xy is d.x_xy and np.array_equal(d.x_xy, segments.xy(d.x_anchor))


def test_same_seed_same_domain_other_seed_other_points(helsinki_walk):
    a = Domain.from_network(helsinki_walk, n_points=100, seed=7)
    b = Domain.from_network(helsinki_walk, n_points=100, seed=7)
    c = Domain.from_network(helsinki_walk, n_points=100, seed=8)
    assert np.array_equal(a.x_xy, b.x_xy) and np.array_equal(a.dist_xx, b.dist_xx)
    assert not np.array_equal(a.x_xy, c.x_xy)


def test_prior_from_points_and_restrict(road_300):
    pts = road_300.x_xy[[0, 0, 0, 5]] + 0.1
    d = road_300.with_prior(points_xy=pts)
    assert d.prior[0] == pytest.approx(0.75) and d.prior[5] == pytest.approx(0.25)
    assert d.dist_xx is road_300.dist_xx  # shared, not copied
    sub = d.restrict([0, 5, 9])
    assert sub.n_x == 3 and sub.dist_xx[0, 1] == road_300.dist_xx[0, 5]
    assert sub.prior.sum() == pytest.approx(1.0)


def test_arrays_are_read_only(road_300):
    with pytest.raises(ValueError):
        road_300.dist_xx[0, 1] = 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_points": 10**9}, "more than this network allows"),
        ({"n_points": 1}, "at least 2"),
        ({"spacing_m": 0.0}, "spacing_m=0.0"),
        ({"spacing_m": -5.0}, "spacing_m=-5.0"),
        ({"n_points": 10, "metric": "l3"}, "metric='l3'.*p = 1, 2, inf"),
        ({"n_points": 10, "spacing_m": 5.0}, "not both"),
    ],
)
def test_bad_domain_parameters_are_named(helsinki_walk, kwargs, message):
    with pytest.raises(InputError, match=message):
        Domain.from_network(helsinki_walk, **kwargs)


def test_grid_rejects_road_metric_and_bad_cells(helsinki_walk):
    with pytest.raises(InputError, match="metric='road'"):
        Domain.grid(helsinki_walk, cell_m=100, metric="road")
    with pytest.raises(InputError, match="cell_m"):
        Domain.grid(helsinki_walk, cell_m=0, metric="l2")


def test_max_points_is_where_spreading_points_stops(helsinki_test_walk):
    limit = max_points(helsinki_test_walk)
    total_m = sum(undirected_lengths(helsinki_test_walk).values())
    assert limit == int(total_m // MIN_SPACING_M) > 2
    with pytest.raises(InputError, match=f"{limit:,} points"):
        Domain.from_network(helsinki_test_walk, n_points=limit + 1, metric="l2")


def test_a_domain_larger_than_memory_is_refused_before_it_is_built(helsinki_test_walk, monkeypatch):
    import mdpsim.geo.domain

    monkeypatch.setattr(mdpsim.geo.domain, "physical_memory_bytes", lambda: 100 * 100 * 8)
    Domain.from_network(helsinki_test_walk, n_points=100, metric="l2")  # exactly fits
    with pytest.raises(InputError, match=r"n_points=101: .* more than this machine's"):
        Domain.from_network(helsinki_test_walk, n_points=101, metric="l2")
    with pytest.raises(InputError, match=r"n_points=100, n_outputs=50"):
        Domain.from_network(helsinki_test_walk, n_points=100, n_outputs=50, metric="l2")
    with pytest.raises(InputError, match="n_points=101"):
        Domain.from_points(np.zeros((101, 2)) + np.arange(101)[:, None])


def test_draw_secret_is_the_draw_of_choice_with_the_prior(road_300):
    weights = np.random.default_rng(0).random(road_300.n_x) ** 4  # far from uniform
    domain = road_300.with_prior(weights / weights.sum())
    ours, theirs = np.random.default_rng(5), np.random.default_rng(5)
    drawn = [domain.draw_secret(ours) for _ in range(2000)]
    assert drawn == [int(theirs.choice(domain.n_x, p=domain.prior)) for _ in range(2000)]
    assert ours.bit_generator.state == theirs.bit_generator.state


def _cut_chains_by_segment(segments, cut_seg, cut_along, cut_node):
    """The chains of the cut segments one segment at a time (the loop the arrays replaced)."""
    rows, cols, w = [], [], []
    for s in np.unique(cut_seg):
        mine = cut_seg == s
        chain = np.concatenate([[segments.seg_u[s]], cut_node[mine], [segments.seg_v[s]]])
        pos = np.concatenate([[0.0], cut_along[mine], [segments.seg_len_m[s]]])
        rows.append(chain[:-1])
        cols.append(chain[1:])
        w.append(np.diff(pos))
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(w)


@pytest.mark.parametrize("seed", range(4))
def test_cut_segments_become_the_same_chains_as_one_segment_at_a_time(helsinki_test_walk, seed):
    segments = RoadSegments.of(helsinki_test_walk)
    rng = np.random.default_rng(seed)
    n_cuts = [1, 30, 300, 3000][seed]
    cut_seg = np.sort(rng.integers(0, len(segments.seg_len_m), n_cuts))
    cut_along = rng.random(n_cuts) * segments.seg_len_m[cut_seg]
    order = np.lexsort((cut_along, cut_seg))
    cut_seg, cut_along = cut_seg[order], cut_along[order]
    cut_node = 10_000 + np.arange(n_cuts)
    got = segments._cut_chains(cut_seg, cut_along, cut_node)
    expected = _cut_chains_by_segment(segments, cut_seg, cut_along, cut_node)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)  # the same edges, the same bits


def _scipy_road_distances(segments, x_place, y_place):
    """:meth:`RoadSegments.road_distances`' former computation: scipy's Dijkstra on the
    augmented graph (undirected) and on its split copy (the chaining pairs)."""
    from mdpsim.geo.routing import CHAIN_RTOL

    x_nodes, y_nodes, (rows, cols, w) = segments._augmented(x_place, y_place)
    total = len(segments.node_ids) + len(x_nodes) + (0 if y_place is x_place else len(y_nodes))
    A = coo_matrix((w, (rows, cols)), shape=(total, total)).tocsr()
    d = dijkstra(A, directed=False, indices=x_nodes)
    dist_xx = np.minimum(d[:, x_nodes], d[:, x_nodes].T) / 1000.0
    np.fill_diagonal(dist_xx, 0.0)
    dist_xy = dist_xx if y_place is x_place else d[:, y_nodes] / 1000.0
    n, coo = len(x_nodes), A.tocoo()
    u, v, w = np.r_[coo.row, coo.col], np.r_[coo.col, coo.row], np.r_[coo.data, coo.data]
    is_x = np.full(total, -1)
    is_x[x_nodes] = np.arange(n)
    src = np.where(is_x[u] >= 0, total + np.maximum(is_x[u], 0), u)
    B = coo_matrix((w, (src, v)), shape=(total + n, total + n)).tocsr()
    split = dijkstra(B, directed=True, indices=total + np.arange(n))[:, x_nodes]
    ok = np.isfinite(split) & (split <= dist_xx * 1000.0 * (1 + CHAIN_RTOL) + 1e-9)
    pairs = np.argwhere(ok & (np.arange(n)[:, None] < np.arange(n)[None, :]))
    return dist_xx, dist_xy, pairs


@pytest.mark.parametrize(
    ("n_points", "n_outputs", "seed"), [(80, None, 0), (80, None, 7), (300, 40, 1), (None, None, 0)]
)
def test_road_distances_are_the_bits_of_scipys_dijkstra(
    helsinki_test_walk, n_points, n_outputs, seed
):
    segments = RoadSegments.of(helsinki_test_walk)
    rng = np.random.default_rng(seed)

    def spread(n, name):
        return segments.spread(n_points=n, spacing_m=None, rng=rng, name=name)

    x = segments.at_nodes() if n_points is None else spread(n_points, "X")
    y = x if n_outputs is None else spread(n_outputs, "Y")
    new, old = segments.road_distances(x, y), _scipy_road_distances(segments, x, y)
    for got, want in zip(new, old, strict=True):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def _scipy_trees(n, rows, cols, w, sources):
    A = coo_matrix((w, (rows, cols)), shape=(n, n)).tocsr()
    return dijkstra(A, directed=False, indices=sources, return_predecessors=True)[1]


@pytest.mark.parametrize(("n_points", "seed"), [(80, 0), (80, 5), (300, 2), (None, 0)])
def test_shortest_path_trees_are_scipys(helsinki_test_walk, n_points, seed):
    d = Domain.from_network(helsinki_test_walk, n_points=n_points, seed=seed)
    p = d.constraint_pairs
    w = d.dist_xx[p[:, 0], p[:, 1]]
    for sources in (np.arange(d.n_x), np.array([3, 1, d.n_x - 1])):
        got = shortest_path_trees(d.n_x, p[:, 0], p[:, 1], w, sources)
        want = _scipy_trees(d.n_x, p[:, 0], p[:, 1], w, sources)
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_shortest_path_trees_ask_scipy_when_two_paths_tie():
    # a square 0-1-2-3 of equal sides (2 reaches 0 by 1 or by 3) and an unreachable node 4
    rows, cols, w = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]), np.full(4, 0.3)
    sources = np.arange(5)
    got = shortest_path_trees(5, rows, cols, w, sources)
    assert np.array_equal(got, _scipy_trees(5, rows, cols, w, sources))


def _split_graph_pairs(total, edges, x_nodes, dist_xx_m):
    """The chaining pairs as Dijkstra on a graph whose secrets are split into an 'in' copy
    (no outgoing edges) and an 'out' copy (no incoming edges), one source at a time."""
    from mdpsim.geo.routing import CHAIN_RTOL, _adjacency, _shortest

    n = len(x_nodes)
    u, v, w = edges
    is_x = np.full(total, -1)
    is_x[x_nodes] = np.arange(n)
    out_copy = total + np.arange(n)
    src = np.where(is_x[u] >= 0, out_copy[np.maximum(is_x[u], 0)], u)
    d = _shortest(_adjacency(total + n, src, v, w), out_copy)[:, x_nodes]
    ii, jj = np.nonzero(np.isfinite(d) & (d <= dist_xx_m * (1 + CHAIN_RTOL) + 1e-9))
    return np.column_stack([ii[ii < jj], jj[ii < jj]])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("n_points", [None, 80])
def test_chain_pairs_stopping_at_secrets_are_the_split_graphs(helsinki_test_walk, seed, n_points):
    from mdpsim.geo.routing import _adjacency

    segments = RoadSegments.of(helsinki_test_walk)
    d = Domain.from_network(helsinki_test_walk, n_points=n_points, seed=seed, segments=segments)
    x_nodes, _, (rows, cols, w) = segments._augmented(d.x_anchor, d.y_anchor)
    total = len(segments.node_ids) + (len(x_nodes) if n_points else 0)
    edges = (np.r_[rows, cols], np.r_[cols, rows], np.r_[w, w])
    want = _split_graph_pairs(total, edges, x_nodes, d.dist_xx * 1000.0)
    got = RoadSegments._chain_pairs(_adjacency(total, *edges), x_nodes, d.dist_xx * 1000.0)
    assert np.array_equal(got, want) and np.array_equal(d.constraint_pairs, want)
