"""Compiled kernels of road routing (numba, ``cache=True``).

Plain functions over arrays; nothing compiles at import, each signature compiles on its first
call and is cached on disk beside this module (or under ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def shortest_rows(
    indptr: np.ndarray,
    indices: np.ndarray,
    weights: np.ndarray,
    sources: np.ndarray,
    stops: np.ndarray,
) -> np.ndarray:
    """Shortest-path lengths from each of ``sources`` to every node of the CSR graph
    ``(indptr, indices, weights)`` (inf: unreachable), ``(len(sources), n)``, along paths
    that pass through no node of ``stops`` (bool per node; a source still leaves itself).

    Label correcting with a FIFO queue: a node re-enters the queue whenever its length
    shrinks, until no edge ``u -> v`` has ``d[u] + w < d[v]``. With positive weights (and
    ``d + w > d`` in floating point) that fixed point is unique, so the bits are those of
    any Dijkstra, scipy's included; on road graphs this is several times faster.
    """
    n = len(indptr) - 1
    out = np.full((len(sources), n), np.inf)
    queue = np.empty(n, dtype=np.int64)  # circular: a node is queued at most once at a time
    queued = np.zeros(n, dtype=np.bool_)
    for r in range(len(sources)):
        dist = out[r]
        dist[sources[r]] = 0.0
        queue[0], queued[sources[r]] = sources[r], True
        head, size = 0, 1
        while size:
            u = queue[head]
            head = head + 1 if head + 1 < n else 0
            size -= 1
            queued[u] = False
            if stops[u] and u != sources[r]:
                continue
            for k in range(indptr[u], indptr[u + 1]):
                v = indices[k]
                length = dist[u] + weights[k]
                if length < dist[v]:
                    dist[v] = length
                    if not queued[v]:
                        tail = head + size
                        queue[tail if tail < n else tail - n] = v
                        queued[v] = True
                        size += 1
    return out


@numba.njit(cache=True, nogil=True)
def tree_predecessors(
    indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray, dist: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Per row ``r`` of :func:`shortest_rows`' ``dist`` (from source ``sources[r]``) and node
    ``v``, the one node ``u`` with ``dist[r, u] + w(u, v) == dist[r, v]`` (-9999: the source
    and unreachable nodes), and whether some ``v`` had two: then the lengths alone do not say
    which one a Dijkstra picks (the first settled; the caller asks scipy)."""
    pred = np.full(dist.shape, -9999, dtype=np.int32)
    for r in range(dist.shape[0]):
        d = dist[r]
        for u in range(len(indptr) - 1):
            if d[u] == np.inf:
                continue
            for k in range(indptr[u], indptr[u + 1]):
                v = indices[k]
                if d[u] + weights[k] == d[v] and d[v] > 0.0:
                    if pred[r, v] != -9999 and pred[r, v] != u:
                        return pred, True
                    pred[r, v] = u
    return pred, False


@numba.njit(cache=True, nogil=True)
def nearest_sites(
    points: np.ndarray, sites: np.ndarray, by_x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per point (rows ``(x, y)``), the index of the nearest site, and whether that answer is
    unsure: another site within a hair of the nearest (a relative 1e-9 of the squared
    distance, or 1e-6 m^2), or no site compared (NaN coordinates). Elsewhere it is the nearest
    site under any rounding of the distances, a KD-tree's answer included.

    ``by_x``: the sites' order by x. From a point's place in it a sweep walks right, then
    left, each stopping once ``dx^2`` alone exceeds the second-nearest squared distance found:
    the sites left out are farther than both, so best and second are a brute force's."""
    nearest = np.full(len(points), -1, dtype=np.int64)
    unsure = np.zeros(len(points), dtype=np.bool_)
    xs, ys = sites[by_x, 0].copy(), sites[by_x, 1].copy()
    for i in range(len(points)):
        px, py = points[i, 0], points[i, 1]
        best = second = np.inf
        at = -1
        start = np.searchsorted(xs, px)
        for step in (1, -1):
            k = start if step == 1 else start - 1
            while 0 <= k < len(xs):
                dx = px - xs[k]
                if dx * dx > second:
                    break
                dy = py - ys[k]
                d2 = dx * dx + dy * dy
                if d2 < best:
                    best, second, at = d2, best, k
                elif d2 < second:
                    second = d2
                k += step
        if at >= 0:
            nearest[i] = by_x[at]
        unsure[i] = at < 0 or not second - best > 1e-9 * best + 1e-6
    return nearest, unsure
