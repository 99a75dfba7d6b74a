"""Shortest paths on a road network split at the domain's points.

:class:`RoadSegments` turns the undirected road graph into arrays of segments, spreads points
along them, and computes road distances between points that lie part-way along segments: each
segment is split at its points and Dijkstra runs on that augmented graph. It also finds the
*constraint pairs* of the secrets, the pairs joined by a shortest path through no other secret
(docs/design.md, the road metric). :class:`mdpsim.geo.domain.Domain` is its one user.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import shapely

from mdpsim._core.validation import check_scalar
from mdpsim.errors import InputError
from mdpsim.geo.network import undirected_lengths

MIN_SPACING_M = 1.0
# Relative slack when deciding that d(i,k) + d(k,j) == d(i,j) (far below the verifier's 1e-9).
CHAIN_RTOL = 1e-12
_SOURCE_CHUNK = 256  # Dijkstra sources per call: bounds the (sources x nodes) distance block


def max_points(G) -> int:
    """How many points :meth:`Domain.from_network` can spread on the road network ``G``
    (at least :data:`MIN_SPACING_M` apart), for ``n_points`` and ``n_outputs``."""
    return _max_points(sum(undirected_lengths(G).values()))


def _max_points(total_road_m: float) -> int:
    return int(total_road_m // MIN_SPACING_M)


@dataclass
class RoadSegments:
    """The undirected road graph as arrays of segments, for placing points and routing."""

    node_ids: list
    node_xy: np.ndarray
    seg_u: np.ndarray
    seg_v: np.ndarray
    seg_len_m: np.ndarray
    seg_geom: np.ndarray  # object: each segment's LineString, None when straight
    seg_reversed: np.ndarray  # bool: the geometry runs from v to u

    @classmethod
    def of(cls, G) -> RoadSegments:
        if G is None or G.number_of_edges() == 0:
            raise InputError("the road network has no edges")
        node_ids = list(G.nodes)
        index = {n: i for i, n in enumerate(node_ids)}
        node_xy = np.array([(G.nodes[n]["x"], G.nodes[n]["y"]) for n in node_ids], dtype=float)
        lengths = undirected_lengths(G)
        geoms = {}
        for u, v, d in G.edges(data=True):
            key = (u, v) if (u, v) in lengths else (v, u)
            if key in lengths and d["length"] == lengths[key] and key not in geoms:
                geom = d.get("geometry")
                geoms[key] = (geom, key != (u, v))
        keys = sorted(lengths, key=lambda k: (index[k[0]], index[k[1]]))
        return cls(
            node_ids=node_ids,
            node_xy=node_xy,
            seg_u=np.array([index[u] for u, _ in keys], dtype=np.int64),
            seg_v=np.array([index[v] for _, v in keys], dtype=np.int64),
            seg_len_m=np.array([lengths[k] for k in keys], dtype=float),
            seg_geom=np.array([geoms.get(k, (None,))[0] for k in keys], dtype=object),
            seg_reversed=np.array([geoms.get(k, (None, False))[1] for k in keys], dtype=bool),
        )

    def at_nodes(self) -> tuple:
        """Places of the intersections: segment -1 marks 'at a node'."""
        n = len(self.node_ids)
        return (np.full(n, -1), np.arange(n), np.zeros(n))

    def spread(self, *, n_points, spacing_m, rng, name: str) -> tuple:
        """Evenly spaced places ``(segment, node_or_-1, offset_m)`` along all segments."""
        count = self.place_count(n_points=n_points, spacing_m=spacing_m, name=name)
        spacing_m = float(self.seg_len_m.sum()) / count if spacing_m is None else spacing_m
        offsets = (np.arange(count) + rng.uniform(0.05, 0.95)) * spacing_m
        ends = np.cumsum(self.seg_len_m)
        seg = np.searchsorted(ends, offsets, side="right")
        seg = np.minimum(seg, len(ends) - 1)
        along = offsets - (ends[seg] - self.seg_len_m[seg])
        along = np.clip(along, 0.0, self.seg_len_m[seg])
        return (seg, np.full(count, -1), along)

    def place_count(self, *, n_points, spacing_m, name: str) -> int:
        """How many places :meth:`spread` makes: ``n_points``, or one every ``spacing_m``
        metres of road (checked: at least 2, at most the network's room)."""
        total = float(self.seg_len_m.sum())
        max_points = _max_points(total)
        if spacing_m is not None:
            if not (spacing_m > 0 and math.isfinite(spacing_m)):
                raise InputError(f"spacing_m={spacing_m!r} must be a positive number of metres")
            if spacing_m < MIN_SPACING_M:
                raise InputError(f"spacing_m={spacing_m} is below the minimum {MIN_SPACING_M} m")
            count = int(total // spacing_m)
            if count < 2:
                raise InputError(
                    f"spacing_m={spacing_m} leaves fewer than 2 points on {total:.0f} m of road"
                )
        else:
            n_points = check_scalar(n_points, "n_points", kind=int, owner=name)
            if n_points < 2:
                raise InputError(f"{name}: n_points={n_points} must be at least 2")
            if n_points > max_points:
                raise InputError(
                    f"{name}: n_points={n_points:,} is more than this network allows "
                    f"({max_points:,} points at least {MIN_SPACING_M} m apart on "
                    f"{total / 1000:.1f} km of road); use a larger network or fewer points"
                )
            count = int(n_points)
        return count

    def xy(self, place: tuple) -> np.ndarray:
        """Coordinates in metres of places, following edge geometry where it exists."""
        seg, node, along = place
        out = np.empty((len(seg), 2))
        at_node = seg < 0
        out[at_node] = self.node_xy[node[at_node]]
        on_seg = np.nonzero(~at_node)[0]
        s = seg[on_seg]
        length = self.seg_len_m[s]
        frac = np.zeros(len(s))
        np.divide(along[on_seg], length, out=frac, where=length > 0)
        geom = self.seg_geom[s]
        curved = ~shapely.is_missing(geom)
        straight = ~curved
        a, b = self.node_xy[self.seg_u[s[straight]]], self.node_xy[self.seg_v[s[straight]]]
        out[on_seg[straight]] = a + frac[straight, None] * (b - a)
        if curved.any():  # every curved point in one GEOS call (what geom.interpolate does)
            fracs = np.where(self.seg_reversed[s[curved]], 1.0 - frac[curved], frac[curved])
            points = shapely.line_interpolate_point(geom[curved], fracs, normalized=True)
            out[on_seg[curved]] = shapely.get_coordinates(points)
        return out

    def road_distances(self, x_place: tuple, y_place: tuple):
        """Road distances X-X and X-Y in km, plus the chaining constraint pairs of X."""
        n_nodes = len(self.node_ids)
        x_nodes, y_nodes, adj_rows = self._augmented(x_place, y_place)
        total = n_nodes + len(x_nodes) + (0 if y_place is x_place else len(y_nodes))
        rows, cols, w = adj_rows
        edges = (np.concatenate([rows, cols]), np.concatenate([cols, rows]), np.concatenate([w, w]))
        graph = _adjacency(total, *edges)  # undirected: each edge both ways
        dist_xx = np.empty((len(x_nodes), len(x_nodes)))
        dist_xy = np.empty((len(x_nodes), len(y_nodes)))
        for start in range(0, len(x_nodes), _SOURCE_CHUNK):
            src = x_nodes[start : start + _SOURCE_CHUNK]
            d = _shortest(graph, src)
            dist_xx[start : start + len(src)] = d[:, x_nodes]
            dist_xy[start : start + len(src)] = d[:, y_nodes]
        if not np.all(np.isfinite(dist_xx)) or not np.all(np.isfinite(dist_xy)):
            raise InputError("the road network is not connected; load it with load_network")
        dist_xx = np.minimum(dist_xx, dist_xx.T)  # exact symmetry
        dist_xx /= 1000.0
        np.fill_diagonal(dist_xx, 0.0)
        dist_xy /= 1000.0
        if y_place is x_place:
            dist_xy = dist_xx
        if len(dist_xx) > 1 and np.min(dist_xx + np.diag(np.full(len(dist_xx), np.inf))) <= 0:
            raise InputError(
                "two secrets share a location (zero road distance); use n_points or spacing_m "
                "instead of intersections on this network"
            )
        pairs = self._chain_pairs(graph, x_nodes, dist_xx * 1000.0)
        return dist_xx, dist_xy, pairs

    def _augmented(self, x_place: tuple, y_place: tuple):
        """Graph on intersections + X points (+ Y points), each segment split at its points."""
        n_nodes = len(self.node_ids)
        places = [x_place] if y_place is x_place else [x_place, y_place]
        node_of = []
        seg_parts, along_parts, node_parts = [], [], []
        next_id = n_nodes
        for seg, node, along in places:
            on_seg = seg >= 0
            ids = np.asarray(node, dtype=np.int64).copy()
            count = int(on_seg.sum())
            ids[on_seg] = np.arange(next_id, next_id + count)
            next_id += count
            node_of.append(ids)
            seg_parts.append(seg[on_seg])
            along_parts.append(along[on_seg])
            node_parts.append(ids[on_seg])
        cut_seg = np.concatenate(seg_parts)
        cut_along = np.concatenate(along_parts)
        cut_node = np.concatenate(node_parts)
        order = np.lexsort((cut_along, cut_seg))
        cut_seg, cut_along, cut_node = cut_seg[order], cut_along[order], cut_node[order]
        has_cut = np.zeros(len(self.seg_len_m), dtype=bool)
        has_cut[cut_seg] = True
        plain = ~has_cut
        chain_rows, chain_cols, chain_w = self._cut_chains(cut_seg, cut_along, cut_node)
        rows = np.concatenate([self.seg_u[plain], chain_rows])
        cols = np.concatenate([self.seg_v[plain], chain_cols])
        w = np.concatenate([self.seg_len_m[plain], chain_w])
        # Positive weights (coincident points 1e-9 m apart): the shortest lengths are unique.
        w = np.maximum(w, 1e-9)
        x_nodes = node_of[0]
        y_nodes = node_of[0] if len(node_of) == 1 else node_of[1]
        return x_nodes, y_nodes, (rows, cols, w)

    def _cut_chains(
        self, cut_seg: np.ndarray, cut_along: np.ndarray, cut_node: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The edges of the segments cut at points, ``(rows, cols, weights)``: each such
        segment (in order) becomes the chain ``u -> its points by offset -> v``, weighted by
        the differences of the offsets ``0, along..., length``. ``cut_*`` are sorted by
        segment, then offset."""
        if not len(cut_seg):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
        changes = cut_seg[1:] != cut_seg[:-1]
        first = np.concatenate([[True], changes])  # a segment's first cut
        last = np.concatenate([changes, [True]])  # and its last
        # per cut: the edge into it (from u or the cut before), then a closing edge into v
        start = np.where(first, self.seg_u[cut_seg], np.concatenate([[0], cut_node[:-1]]))
        before = np.where(first, 0.0, np.concatenate([[0.0], cut_along[:-1]]))
        n_cuts = len(cut_seg)
        closing = np.flatnonzero(last)
        closed = np.concatenate([[0], np.cumsum(last)[:-1]])  # closing edges before each cut
        at = np.arange(n_cuts) + closed  # edge slots, closings between
        rows = np.empty(n_cuts + len(closing), dtype=np.int64)
        cols = np.empty_like(rows)
        w = np.empty(len(rows))
        rows[at], cols[at], w[at] = start, cut_node, cut_along - before
        shut = at[closing] + 1
        s = cut_seg[closing]
        rows[shut], cols[shut] = cut_node[closing], self.seg_v[s]
        w[shut] = self.seg_len_m[s] - cut_along[closing]
        return rows, cols, w

    @staticmethod
    def _chain_pairs(graph: tuple, x_nodes: np.ndarray, dist_xx_m: np.ndarray) -> np.ndarray:
        """Secret pairs joined by a shortest path through no other secret (``graph``: the
        augmented graph as CSR arrays, each edge both ways).

        Dijkstra from secret i expands no other secret, so it reaches j only along paths
        that avoid every other secret (the lengths of a graph where each secret is split into
        an 'in' copy without outgoing edges and an 'out' copy without incoming ones). A pair
        is kept when such a path is a shortest path.
        """
        n = len(x_nodes)
        stops = np.zeros(len(graph[0]) - 1, dtype=bool)
        stops[x_nodes] = True
        kept = []
        for start in range(0, n, _SOURCE_CHUNK):
            idx = np.arange(start, min(start + _SOURCE_CHUNK, n))
            d = _shortest(graph, x_nodes[idx], stops)[:, x_nodes]
            ok = np.isfinite(d) & (d <= dist_xx_m[idx] * (1 + CHAIN_RTOL) + 1e-9)
            ii, jj = np.nonzero(ok)
            ii = idx[ii]
            sel = ii < jj
            kept.append(np.column_stack([ii[sel], jj[sel]]))
        return np.concatenate(kept).astype(np.int64)  # sorted, unique: row-major by chunk


def _adjacency(n: int, rows: np.ndarray, cols: np.ndarray, w: np.ndarray) -> tuple:
    """The directed graph ``rows -> cols`` (weights ``w``) on ``n`` nodes as CSR arrays
    ``(indptr, indices, weights)``. Parallel edges would stay apart (scipy's COO to CSR sums
    them); the augmented graph has none (one segment per node pair, distinct cut points)."""
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, cols[order].astype(np.int64), w[order].astype(np.float64)


def _shortest(graph: tuple, sources: np.ndarray, stops: np.ndarray | None = None) -> np.ndarray:
    """Road lengths from ``sources`` to every node of the CSR ``graph`` (:func:`_adjacency`),
    the bits of ``csgraph.dijkstra``; with ``stops`` (bool per node), along paths through no
    stop (a source still leaves itself)."""
    indptr, indices, weights = graph
    stops = np.zeros(len(indptr) - 1, dtype=bool) if stops is None else stops
    sources = np.asarray(sources, dtype=np.int64)
    return _compiled().shortest_rows(indptr, indices, weights, sources, stops)


def shortest_path_trees(
    n: int, rows: np.ndarray, cols: np.ndarray, w: np.ndarray, sources: np.ndarray
) -> np.ndarray:
    """``dijkstra(coo_matrix((w, (rows, cols)), (n, n)), directed=False, indices=sources,
    return_predecessors=True)[1]``: each source's shortest-path tree, int32, -9999 at the
    source and unreachable nodes, for a graph of positive weights and no parallel edges.

    Each node's predecessor is the one neighbour whose length plus the edge's is the node's
    length; only when two neighbours tie does it depend on scipy's order, and scipy says."""
    both_ways = (np.concatenate([rows, cols]), np.concatenate([cols, rows]), np.concatenate([w, w]))
    graph = _adjacency(n, *both_ways)
    kernels = _compiled()
    indptr, indices, weights = graph
    dist = _shortest(graph, sources)
    pred, tied = kernels.tree_predecessors(indptr, indices, weights, dist)
    if tied:
        from scipy import sparse
        from scipy.sparse import csgraph

        A = sparse.coo_matrix((w, (rows, cols)), shape=(n, n)).tocsr()
        _, pred = csgraph.dijkstra(A, directed=False, indices=sources, return_predecessors=True)
    return pred


@functools.cache
def _compiled():
    """The compiled kernels' module, imported on first use (numba's import is not paid by
    ``import mdpsim``)."""
    from mdpsim.geo import _kernels

    return _kernels
