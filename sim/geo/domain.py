"""Privacy domains: secret locations X, output locations Y, a metric in km, and a prior.

A :class:`Domain` is plain data: coordinates in metres, distance matrices in kilometres
(float64, read-only, built once and shared), the prior over X, and the *constraint pairs*:
the pairs of secrets whose mDP constraints imply all the others by chaining (docs/design.md §1).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, get_args

import numpy as np
from scipy.spatial import cKDTree

from mdpsim.errors import InputError
from mdpsim.geo.metric_checks import check_distances
from mdpsim.geo.routing import CHAIN_RTOL, RoadSegments

Metric = Literal["road", "l1", "l2", "linf"]
METRICS: tuple[str, ...] = get_args(Metric)
LP_ORDER = {"l1": 1.0, "l2": 2.0, "linf": math.inf}


@dataclass(frozen=True, eq=False)
class Domain:
    """Secrets X, outputs Y, metric and prior.

    Attributes
    ----------
    x_xy, y_xy
        Coordinates in metres (projected CRS), shapes ``(N, 2)`` and ``(K, 2)``.
    dist_xx, dist_xy
        Distances in km between secrets, and from secrets to outputs.
    prior
        Probability vector over X.
    metric
        ``"road"``, ``"l1"``, ``"l2"`` or ``"linf"``.
    y_in_x
        For each output, the index of the secret at the same place, or -1.
    graph
        The road graph the domain was built on (shared, not copied), or ``None``.
    x_anchor, y_anchor
        For road domains: ``(segment, node, offset_m)`` per point, locating it on the roads.
    rows_in_parent
        For a :meth:`restrict`-ed domain, the secret indices in the domain it came from.
    """

    x_xy: np.ndarray
    y_xy: np.ndarray
    dist_xx: np.ndarray
    dist_xy: np.ndarray
    prior: np.ndarray
    metric: str
    y_in_x: np.ndarray
    graph: object = field(default=None, repr=False)
    x_anchor: tuple | None = field(default=None, repr=False)
    y_anchor: tuple | None = field(default=None, repr=False)
    _road_pairs: np.ndarray | None = field(default=None, repr=False)
    rows_in_parent: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        n, k = len(self.x_xy), len(self.y_xy)
        if self.dist_xx.shape != (n, n) or self.dist_xy.shape != (n, k):
            raise ValueError("distance matrices do not match the point sets")
        if self.prior.shape != (n,):
            raise ValueError("prior must have one entry per secret")
        check_distances(self.dist_xx, "dist_xx", fix="a Domain's metrics are all symmetric")
        for arr in (self.x_xy, self.y_xy, self.dist_xx, self.dist_xy, self.prior, self.y_in_x):
            arr.setflags(write=False)

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_network(
        cls,
        G,
        *,
        n_points: int | None = None,
        spacing_m: float | None = None,
        n_outputs: int | None = None,
        metric: str = "road",
        seed: int = 0,
        segments: RoadSegments | None = None,
    ) -> Domain:
        """Secrets on a road network.

        With neither ``n_points`` nor ``spacing_m``, X is the set of intersections (graph
        nodes). With ``n_points``, exactly that many points are spread evenly along the edges
        (a seeded random phase); with ``spacing_m``, one point every ``spacing_m`` metres.
        Y is X unless ``n_outputs`` asks for a coarser set of points along the edges.
        ``segments``: ``RoadSegments.of(G)`` when already built (a caller placing the points of
        many seeds on one graph it never changes reads the graph once).
        """
        _check_metric(metric)
        if n_points is not None and spacing_m is not None:
            raise InputError("give n_points or spacing_m, not both")
        segments = RoadSegments.of(G) if segments is None else segments
        rng = np.random.default_rng(seed)
        if n_points is None and spacing_m is None:
            x_place = segments.at_nodes()
        else:
            x_place = segments.spread(n_points=n_points, spacing_m=spacing_m, rng=rng, name="X")
        if n_outputs is None:
            y_place = x_place
        else:
            y_place = segments.spread(n_points=n_outputs, spacing_m=None, rng=rng, name="Y")
        check_memory(len(x_place[0]), None if y_place is x_place else len(y_place[0]))
        x_xy = segments.xy(x_place)
        y_xy = x_xy if y_place is x_place else segments.xy(y_place)  # one array, as from_points
        y_in_x = (
            np.arange(len(x_xy)) if y_place is x_place else _match_points(x_xy, y_xy, tol_m=1e-6)
        )
        road_pairs = None
        if metric == "road":
            dist_xx, dist_xy, road_pairs = segments.road_distances(x_place, y_place)
        else:
            dist_xx, dist_xy = lp_distances(x_xy, x_xy, metric), lp_distances(x_xy, y_xy, metric)
        n = len(x_xy)
        return cls(
            x_xy=x_xy,
            y_xy=y_xy,
            dist_xx=dist_xx,
            dist_xy=dist_xy,
            prior=np.full(n, 1.0 / n),
            metric=metric,
            y_in_x=np.asarray(y_in_x, dtype=np.int64),
            graph=G,
            x_anchor=x_place,
            y_anchor=y_place,
            _road_pairs=road_pairs,
        )

    @classmethod
    def grid(cls, G, *, cell_m: float, metric: str = "l2") -> Domain:
        """Cell centres of a regular grid over the network's bounding box (lp metrics only)."""
        _check_metric(metric)
        if metric == "road":
            raise InputError("Domain.grid: metric='road' needs points on roads; use l1, l2, linf")
        if not (cell_m > 0 and math.isfinite(cell_m)):
            raise InputError(f"cell_m={cell_m!r} must be a positive number of metres")
        xs = np.array([d["x"] for _, d in G.nodes(data=True)])
        ys = np.array([d["y"] for _, d in G.nodes(data=True)])
        return cls.from_bbox((xs.min(), ys.min(), xs.max(), ys.max()), cell_m=cell_m, metric=metric)

    @classmethod
    def from_bbox(cls, bbox_m: tuple, *, cell_m: float, metric: str = "l2") -> Domain:
        """Cell centres of a regular grid over ``(xmin, ymin, xmax, ymax)`` in metres."""
        xmin, ymin, xmax, ymax = map(float, bbox_m)
        nx_cells = max(1, math.ceil((xmax - xmin) / cell_m))
        ny_cells = max(1, math.ceil((ymax - ymin) / cell_m))
        if nx_cells * ny_cells > 40_000:
            raise InputError(
                f"cell_m={cell_m} gives {nx_cells * ny_cells:,} cells (limit 40,000); "
                "use a larger cell_m"
            )
        cx = xmin + (np.arange(nx_cells) + 0.5) * cell_m
        cy = ymin + (np.arange(ny_cells) + 0.5) * cell_m
        gx, gy = np.meshgrid(cx, cy, indexing="xy")
        return cls.from_points(np.column_stack([gx.ravel(), gy.ravel()]), metric=metric)

    @classmethod
    def from_points(
        cls,
        x_xy,
        y_xy=None,
        *,
        metric: str = "l2",
        prior=None,
    ) -> Domain:
        """A domain of arbitrary points in the plane (metres) under an lp metric."""
        _check_metric(metric)
        if metric == "road":
            raise InputError("Domain.from_points supports l1, l2, linf; use from_network for road")
        x_xy = _as_points(x_xy, "x_xy")
        y_xy = x_xy if y_xy is None else _as_points(y_xy, "y_xy")
        n = len(x_xy)
        prior_arr = np.full(n, 1.0 / n) if prior is None else _as_prior(prior, n)
        same = y_xy is x_xy
        check_memory(n, None if same else len(y_xy))
        return cls(
            x_xy=x_xy,
            y_xy=y_xy,
            dist_xx=lp_distances(x_xy, x_xy, metric),
            dist_xy=lp_distances(x_xy, y_xy, metric),
            prior=prior_arr,
            metric=metric,
            y_in_x=np.arange(n) if same else _match_points(x_xy, y_xy, tol_m=1e-6),
        )

    # ----------------------------------------------------------------- derived views
    @property
    def n_x(self) -> int:
        """Number of secrets N."""
        return len(self.x_xy)

    @property
    def n_y(self) -> int:
        """Number of outputs K."""
        return len(self.y_xy)

    @property
    def memory_bytes(self) -> int:
        """Bytes held by the domain's arrays (distance matrices dominate)."""
        arrays: tuple[np.ndarray, ...] = (
            self.x_xy,
            self.y_xy,
            self.dist_xx,
            self.dist_xy,
            self.prior,
            self.y_in_x,
        )
        if self._road_pairs is not None:
            arrays += (self._road_pairs,)
        unique = {id(a): a for a in arrays}  # dist_xy is dist_xx when Y = X
        return sum(a.nbytes for a in unique.values())

    def with_prior(self, prior=None, *, points_xy=None, smoothing: float = 0.0) -> Domain:
        """The same domain (arrays shared) with a new prior.

        Either an explicit ``prior`` vector, or ``points_xy``: each point counts for its nearest
        secret; ``smoothing`` adds that pseudo-count to every secret.
        """
        if (prior is None) == (points_xy is None):
            raise InputError("with_prior: give exactly one of prior or points_xy")
        if prior is None:
            pts = _as_points(points_xy, "points_xy")
            if not (smoothing >= 0 and math.isfinite(smoothing)):
                raise InputError(f"smoothing={smoothing!r} must be finite and >= 0")
            _, idx = cKDTree(self.x_xy).query(pts)
            counts = np.bincount(idx, minlength=self.n_x).astype(float) + smoothing
            prior = counts / counts.sum()
        return _replace(self, prior=_as_prior(prior, self.n_x))

    def restrict(self, rows) -> Domain:
        """The sub-domain on the secrets ``rows`` (same outputs Y, prior renormalised)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.ndim != 1 or len(rows) == 0 or len(np.unique(rows)) != len(rows):
            raise InputError("restrict: rows must be a non-empty list of distinct secret indices")
        if rows.min() < 0 or rows.max() >= self.n_x:
            raise InputError(f"restrict: rows must lie in [0, {self.n_x})")
        prior = self.prior[rows]
        prior = prior / prior.sum() if prior.sum() > 0 else np.full(len(rows), 1.0 / len(rows))
        position = np.full(self.n_x, -1)
        position[rows] = np.arange(len(rows))
        y_in_x = np.where(self.y_in_x >= 0, position[np.maximum(self.y_in_x, 0)], -1)
        return Domain(
            x_xy=self.x_xy[rows],
            y_xy=self.y_xy,
            dist_xx=self.dist_xx[np.ix_(rows, rows)],
            dist_xy=self.dist_xy[rows],
            prior=prior,
            metric=self.metric,
            y_in_x=y_in_x,
            graph=self.graph,
            rows_in_parent=rows if self.rows_in_parent is None else self.rows_in_parent[rows],
        )

    @cached_property
    def dist_xx32(self) -> np.ndarray:
        """``dist_xx`` in float32 (read-only, built on first use): the scorer's distance rows
        for float32 posteriors, gathered at half the memory traffic."""
        out = self.dist_xx.astype(np.float32)
        out.setflags(write=False)
        return out

    @cached_property
    def prior_cdf(self) -> np.ndarray:
        """The prior's running sum scaled to end at 1 (read-only), as
        ``Generator.choice(n_x, p=prior)`` builds it on every call."""
        cdf = self.prior.cumsum()
        cdf /= cdf[-1]
        cdf.setflags(write=False)
        return cdf

    def draw_secret(self, rng: np.random.Generator) -> int:
        """One secret drawn from the prior: the draw ``rng.choice(n_x, p=prior)`` makes, and
        the same stream state after it (tests/sim/test_domain.py), without that call's
        per-call checks and running sum (a query point is drawn per query)."""
        return int(self.prior_cdf.searchsorted(rng.random(), side="right"))

    @cached_property
    def constraint_pairs(self) -> np.ndarray:
        """Pairs ``(i, j)``, ``i < j``, whose mDP constraints imply every other pair.

        For the road metric these are the pairs joined by a shortest path that passes no
        other secret (for X = all intersections: the graph edges). For lp norms a pair is
        dropped when some third secret k has ``d(i,k) + d(k,j) = d(i,j)``. Chaining the
        kept constraints along such paths gives the dropped ones exactly (docs/design.md §1).
        """
        if self._road_pairs is not None:
            return self._road_pairs
        return implied_free_pairs(self.dist_xx)

    @property
    def verified_pairs(self) -> np.ndarray | None:
        """The pairs the exact verifier checks a matrix on (``verify(..., pairs=)``): road
        metric, :attr:`constraint_pairs` (few, exact by chaining); lp norms, ``None`` (every
        pair: almost every pair chains there, so the full check costs no more)."""
        return self.constraint_pairs if self.metric == "road" else None

    def summary_lines(self) -> list[str]:
        """Human-readable lines for the CLI."""
        pairs = self.constraint_pairs
        n = self.n_x
        return [
            f"secrets |X|      {self.n_x:,}",
            f"outputs |Y|      {self.n_y:,}",
            f"metric           {self.metric} (km)",
            f"diameter         {float(self.dist_xx.max()):.3f} km",
            f"nearest pair     {float(_min_offdiag(self.dist_xx)) * 1000:.2f} m",
            f"constraint pairs {len(pairs):,} of {n * (n - 1) // 2:,}",
            f"memory           {self.memory_bytes / 2**20:,.1f} MiB",
        ]


# --------------------------------------------------------------------- lp metrics
def distance_bytes(n_x: int, n_y: int | None = None) -> int:
    """Bytes of a domain's float64 distance matrices: X-X, and X-Y unless Y = X (``None``)."""
    return 8 * n_x * (n_x + (n_y or 0))


def check_memory(n_x: int, n_y: int | None = None) -> None:
    """Refuse a domain whose distance matrices alone exceed this machine's physical memory
    (a lower bound on what building it needs; mechanisms need more)."""
    need, total = distance_bytes(n_x, n_y), physical_memory_bytes()
    if total is not None and need > total:
        sizes = f"n_points={n_x:,}" + (f", n_outputs={n_y:,}" if n_y else "")
        raise InputError(
            f"{sizes}: the distance matrices alone need {_size(need)}, more than this "
            f"machine's {_size(total)} of memory; use fewer points"
        )


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 2**30:,.1f} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:,.1f} MiB"


def physical_memory_bytes() -> int | None:
    """Installed memory (``sysconf``), or ``None`` where the platform does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def farthest_points(dist: np.ndarray, first: int, m: int) -> np.ndarray:
    """``m`` indices by farthest-point (k-centre) sampling: ``first``, then each the farthest
    (by ``dist``) from those before it."""
    order = [int(first)]
    nearest = dist[first].copy()
    for _ in range(m - 1):
        order.append(int(np.argmax(nearest)))
        np.minimum(nearest, dist[order[-1]], out=nearest)
    return np.asarray(order, dtype=np.int64)


def lp_distances(a_xy: np.ndarray, b_xy: np.ndarray, metric: str) -> np.ndarray:
    """Pairwise lp distances in km between point sets given in metres."""
    from scipy.spatial.distance import cdist

    p = LP_ORDER[metric]
    if math.isinf(p):
        out = cdist(a_xy, b_xy, metric="chebyshev")
    else:
        out = cdist(a_xy, b_xy, metric="minkowski", p=p)
    return out / 1000.0


def implied_free_pairs(dist: np.ndarray) -> np.ndarray:
    """Pairs ``i < j`` with no third point ``k`` such that ``d(i,k) + d(k,j) <= d(i,j)``.

    Exact check over all triples, chunked by ``i`` (O(N^3) time, O(N^2) memory).
    """
    n = len(dist)
    keep = []
    for i in range(n - 1):
        via = dist[i][:, None] + dist  # via[k, j] = d(i,k) + d(k,j)
        via[i, :] = np.inf
        np.fill_diagonal(via, np.inf)  # k == j
        shortcut = via.min(axis=0) <= dist[i] * (1 + CHAIN_RTOL)
        js = np.nonzero(~shortcut[i + 1 :])[0] + i + 1
        keep.append(np.column_stack([np.full(len(js), i), js]))
    if not keep:
        return np.empty((0, 2), dtype=np.int64)
    return np.concatenate(keep).astype(np.int64)


# --------------------------------------------------------------------- helpers
def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise InputError(
            f"metric={metric!r} is not supported; use one of {', '.join(METRICS)} "
            "(lp norms: p = 1, 2, inf)"
        )


def _as_points(xy, name: str) -> np.ndarray:
    arr = np.asarray(xy, dtype=float)
    if arr.ndim != 2 or arr.shape[1] != 2 or len(arr) == 0:
        raise InputError(f"{name} must be a non-empty array of shape (n, 2) in metres")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name} contains NaN or inf")
    return np.array(arr)


def _as_prior(prior, n: int) -> np.ndarray:
    arr = np.asarray(prior, dtype=float)
    if arr.shape != (n,):
        raise InputError(f"prior must have {n} entries (one per secret), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or arr.sum() <= 0:
        raise InputError("prior must be finite, non-negative and not all zero")
    return arr / arr.sum()


def _match_points(x_xy: np.ndarray, y_xy: np.ndarray, *, tol_m: float) -> np.ndarray:
    d, idx = cKDTree(x_xy).query(y_xy)
    return np.where(d <= tol_m, idx, -1).astype(np.int64)


def _min_offdiag(dist: np.ndarray) -> float:
    if len(dist) < 2:
        return math.inf
    masked = dist + np.diag(np.full(len(dist), np.inf))
    return float(masked.min())


def _replace(domain: Domain, **changes) -> Domain:
    import dataclasses

    new = dataclasses.replace(domain, **changes)
    if "constraint_pairs" in domain.__dict__:
        new.__dict__["constraint_pairs"] = domain.__dict__["constraint_pairs"]
    return new
