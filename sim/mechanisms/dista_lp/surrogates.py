"""Coefficient surrogates of DistA-LP and their alternating fit (paper §IV-A, Appendix C).

A block ``A`` (``n x K``, rows = the user's permuted neighbourhood) is seen as a surface over
the index grid: entry ``(i, k)`` sits at ``(x, y) = (k / (K-1), i / (n-1))`` in ``[0, 1]^2``
(paper Eq. 57, ``f(i, j; Theta)``). Four families, one class each (:data:`SURROGATES`, by
name; :func:`make_surrogate` builds one):

* ``gaussian``: ``a exp(-(x-cx)^2/(2 sx^2) - (y-cy)^2/(2 sy^2)) + b`` (6 parameters, ``a >= 0``);
* ``polynomial``: ``sum beta_pq L_p(2x-1) L_q(2y-1)``, Legendre products with ``p + q <= 3``
  (10 parameters), fitted with a ridge penalty;
* ``rbf``: ``sum alpha_c exp(-|(x,y) - mu_c|^2 / (2 sigma^2)) + b``, centres fixed on a public
  4 x 4 grid (18 parameters: 16 weights, the bandwidth, the offset);
* ``svd``: rank-``r`` truncated SVD, ``Theta = (s, U_r, V_r)`` (``r (n + K + 1)`` parameters).

The parametric families are fitted by Nelder-Mead on the entrywise l1 loss (box-bounded), the
permutation by greedy pairwise swaps accepted only when the total weighted l1 loss drops, each
accepted swap followed by a warm-started refit (the alternating scheme). The SVD surrogate is
permutation-equivariant (``E A E^T`` has the singular vectors ``E U``, ``E V``), so its loss does
not depend on the permutation and no swap can lower it: its swap search is skipped.

Each family also says which coordinates *raise* the surface (``level_mask``): those get the
biased noise of the release (down for distances, up for losses); the others get symmetric noise.
A new family is a new class here, registered with :func:`register_family`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from numpy.polynomial import legendre
from scipy.optimize import minimize

from mdpsim._core.registry import Catalog
from mdpsim.errors import InputError

_POLY_TERMS = ((0, 0), (1, 0), (0, 1), (2, 0), (0, 2), (1, 1), (3, 0), (0, 3), (2, 1), (1, 2))
_RBF_GRID = 4
_RIDGE = 1e-3
_NM_MAXFEV = 400
_SWAP_TOL = 1e-12


def _grid(n_rows: int, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Index-grid coordinates ``(x, y)`` of every entry, each ``(n_rows, n_cols)``."""
    y = np.linspace(0.0, 1.0, n_rows)
    x = np.linspace(0.0, 1.0, n_cols) if n_cols > 1 else np.zeros(1)
    return np.meshgrid(x, y)


def _axes(n_rows: int, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """The grid's coordinates per axis, ``y`` (rows) and ``x`` (columns)."""
    y = np.linspace(0.0, 1.0, n_rows)
    x = np.linspace(0.0, 1.0, n_cols) if n_cols > 1 else np.zeros(1)
    return y, x


@dataclass(frozen=True)
class Surrogate(ABC):
    """A surrogate family for blocks of one shape (``n_rows x n_cols``)."""

    #: The family's name (set by :func:`register_family`).
    family: ClassVar[str] = "?"
    #: True when the fit loss does not depend on the row order (SVD): no swap search.
    permutation_invariant: ClassVar[bool] = False
    #: True when the release soft-thresholds the biased coordinates (SVD's singular values,
    #: ``tau = svd_tau_c * b``).
    soft_threshold: ClassVar[bool] = False

    n_rows: int
    n_cols: int

    def __post_init__(self) -> None:
        if self.n_rows < 2 or self.n_cols < 1:
            raise InputError("a surrogate needs at least 2 rows and 1 column")

    @classmethod
    def for_block(cls, n_rows: int, n_cols: int, *, rank: int) -> Surrogate:
        """The family's surrogate of an ``n_rows x n_cols`` block; ``rank`` is the configured
        SVD rank (a family without a rank has no use for it)."""
        return cls(n_rows, n_cols)

    @classmethod
    def check_rank(cls, rank: int, n_neighbours: int) -> None:
        """Refuse a configured rank the family cannot use on blocks of ``n_neighbours`` rows
        (a family without a rank takes any)."""
        return None

    def right_factor(self, theta: np.ndarray) -> np.ndarray | None:
        """The right factor ``V`` (``n_cols x r``) of a factored family's parameters, else
        None (the upload attack reads it from an SVD upload)."""
        return None

    @property
    @abstractmethod
    def n_params(self) -> int:
        """Length of the parameter vector ``theta``."""

    @property
    @abstractmethod
    def level_mask(self) -> np.ndarray:
        """Coordinates whose increase raises the surface (they get the biased noise)."""

    @abstractmethod
    def bounds(self, scale: float) -> tuple[np.ndarray, np.ndarray]:
        """Public range of every coordinate, for blocks whose entries are at most ``scale``."""

    @abstractmethod
    def evaluate(self, theta: np.ndarray) -> np.ndarray:
        """The reconstructed block ``f(.; theta)``, shape ``(n_rows, n_cols)``."""

    @abstractmethod
    def fit(self, block: np.ndarray, *, scale: float, start: np.ndarray | None = None):
        """Parameters minimising the l1 loss to ``block`` (plus the family's ridge), in range."""


#: The surrogate families by name, in the order they are offered.
SURROGATES: Catalog[type[Surrogate]] = Catalog("surrogate family")


def register_family(name: str) -> Callable[[type[Surrogate]], type[Surrogate]]:
    """Class decorator: register a surrogate family under ``name``."""

    def register(cls: type[Surrogate]) -> type[Surrogate]:
        cls.family = name
        return SURROGATES.register(name)(cls)

    return register


def make_surrogate(family: str, n_rows: int, n_cols: int, *, rank: int = 5) -> Surrogate:
    """The surrogate of ``family`` for ``n_rows x n_cols`` blocks (``rank``: SVD's)."""
    if family not in SURROGATES:
        raise InputError(f"family={family!r} must be one of {tuple(SURROGATES)}")
    return SURROGATES.get(family).for_block(n_rows, n_cols, rank=rank)


@dataclass(frozen=True)
class _NelderMead(Surrogate):
    """A parametric family: Nelder-Mead on the l1 loss from a data-driven start."""

    def fit(self, block: np.ndarray, *, scale: float, start: np.ndarray | None = None):
        """A warm ``start`` (a refit after a swap) gets a quarter of the evaluation budget."""
        block = np.asarray(block, dtype=float)
        lo, hi = self.bounds(scale)
        x0 = self._initial(block, scale) if start is None else np.asarray(start, dtype=float)
        x0 = np.clip(x0, lo, hi)
        norm = max(float(np.mean(np.abs(block))), 1e-12)
        ridge = self._ridge_mask()
        maxfev = _NM_MAXFEV * (1 + self.n_params // 6) // (1 if start is None else 4)

        def loss(theta):
            pen = _RIDGE * float(np.sum((theta * ridge) ** 2)) / norm
            return float(np.mean(np.abs(block - self.evaluate(theta)))) + pen

        res = minimize(
            loss,
            x0,
            method="Nelder-Mead",
            bounds=list(zip(lo, hi, strict=True)),
            options={"maxfev": maxfev, "xatol": 1e-6, "fatol": 0},
        )
        best = res.x if res.fun <= loss(x0) else x0
        return np.clip(best, lo, hi)

    def _ridge_mask(self) -> np.ndarray:
        """The coordinates the ridge penalises (none unless the family says so)."""
        return np.zeros(self.n_params)

    @abstractmethod
    def _initial(self, block: np.ndarray, scale: float) -> np.ndarray:
        """A data-driven start of the fit."""


@register_family("svd")
@dataclass(frozen=True)
class SVDSurrogate(Surrogate):
    """Rank-``rank`` truncated SVD: ``theta = (s, U_r, V_r)``."""

    permutation_invariant = True
    soft_threshold = True

    rank: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.rank <= min(self.n_rows, self.n_cols):
            raise InputError(
                f"rank={self.rank!r} must be in 1..{min(self.n_rows, self.n_cols)} for a "
                f"{self.n_rows} x {self.n_cols} block"
            )

    @classmethod
    def for_block(cls, n_rows: int, n_cols: int, *, rank: int) -> Surrogate:
        return cls(n_rows, n_cols, rank=rank)

    @classmethod
    def check_rank(cls, rank: int, n_neighbours: int) -> None:
        if rank > n_neighbours:
            raise InputError(f"rank={rank} must be <= n_neighbours={n_neighbours}")

    def right_factor(self, theta: np.ndarray) -> np.ndarray:
        return self.split_svd(np.asarray(theta, dtype=float))[2]

    @property
    def n_params(self) -> int:
        return self.rank * (self.n_rows + self.n_cols + 1)

    @property
    def level_mask(self) -> np.ndarray:
        m = np.zeros(self.n_params, dtype=bool)
        m[: self.rank] = True  # singular values
        return m

    def bounds(self, scale: float) -> tuple[np.ndarray, np.ndarray]:
        s = float(scale)
        r = self.rank
        lo, hi = np.full(self.n_params, -1.0), np.full(self.n_params, 1.0)
        lo[:r], hi[:r] = 0.0, s * np.sqrt(self.n_rows * self.n_cols)
        return lo, hi

    def evaluate(self, theta: np.ndarray) -> np.ndarray:
        s, u, v = self.split_svd(np.asarray(theta, dtype=float))
        return (u * s) @ v.T

    def split_svd(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(s, U, V)`` views of an SVD parameter vector."""
        r, n, k = self.rank, self.n_rows, self.n_cols
        return theta[:r], theta[r : r + n * r].reshape(n, r), theta[r + n * r :].reshape(k, r)

    def fit(self, block: np.ndarray, *, scale: float, start: np.ndarray | None = None):
        """The truncated SVD, canonical signs (``start`` is not needed: it is exact)."""
        block = np.asarray(block, dtype=float)
        lo, hi = self.bounds(scale)
        u, s, vt = np.linalg.svd(block, full_matrices=False)
        r = self.rank
        u, s, v = u[:, :r], s[:r], vt[:r].T
        flip = np.sign(v[np.argmax(np.abs(v), axis=0), np.arange(r)])  # canonical signs
        flip[flip == 0] = 1.0
        return np.clip(np.concatenate([s, (u * flip).ravel(), (v * flip).ravel()]), lo, hi)


@register_family("gaussian")
@dataclass(frozen=True)
class GaussianSurrogate(_NelderMead):
    """``a exp(-(x-cx)^2/(2 sx^2) - (y-cy)^2/(2 sy^2)) + b``: ``theta = (cx, cy, sx, sy, a, b)``."""

    @property
    def n_params(self) -> int:
        return 6

    @property
    def level_mask(self) -> np.ndarray:
        m = np.zeros(self.n_params, dtype=bool)
        m[4:6] = True  # amplitude a >= 0 and offset b
        return m

    def bounds(self, scale: float) -> tuple[np.ndarray, np.ndarray]:
        s = float(scale)
        lo = np.array([-0.5, -0.5, 0.05, 0.05, 0.0, -2 * s])
        hi = np.array([1.5, 1.5, 3.0, 3.0, 2 * s, 2 * s])
        return lo, hi

    def evaluate(self, theta: np.ndarray) -> np.ndarray:
        cx, cy, sx, sy, a, b = np.asarray(theta, dtype=float)
        y, x = _axes(self.n_rows, self.n_cols)
        gy, gx = np.exp(-((y - cy) ** 2) / (2 * sy**2)), np.exp(-((x - cx) ** 2) / (2 * sx**2))
        return a * np.outer(gy, gx) + b

    def _initial(self, block: np.ndarray, scale: float) -> np.ndarray:
        """Moments: the peak's position, a broad spread, the range and the floor."""
        lo_v, hi_v = float(block.min()), float(block.max())
        row, col = np.unravel_index(np.argmax(block), block.shape)
        x, y = _grid(self.n_rows, self.n_cols)
        return np.array([x[row, col], y[row, col], 0.4, 0.4, hi_v - lo_v, lo_v])


@dataclass(frozen=True)
class _Linear(_NelderMead):
    """A family linear in most coordinates, a sum of products ``g(y) h(x)`` of per-axis
    factors (``_basis``, made once); its start is a ridge least-squares fit."""

    _basis: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "_basis", self._make_basis(*_axes(self.n_rows, self.n_cols)))

    @abstractmethod
    def _make_basis(self, y: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The per-axis factors on the grid's coordinates."""

    def design(self) -> np.ndarray:
        """Columns = the block (raveled) of each linear coefficient."""
        eye = np.eye(self.n_params)
        return np.stack([self.evaluate(eye[i]).ravel() for i in range(self.n_params)], axis=1)


@register_family("polynomial")
@dataclass(frozen=True)
class PolynomialSurrogate(_Linear):
    """``sum beta_pq L_p(2x-1) L_q(2y-1)`` over ``p + q <= 3``, with a ridge on ``beta``."""

    @property
    def n_params(self) -> int:
        return len(_POLY_TERMS)

    @property
    def level_mask(self) -> np.ndarray:
        m = np.zeros(self.n_params, dtype=bool)
        m[0] = True  # intercept: L_0 L_0 = 1
        return m

    def bounds(self, scale: float) -> tuple[np.ndarray, np.ndarray]:
        s = float(scale)
        lo, hi = np.full(self.n_params, -4 * s), np.full(self.n_params, 4 * s)
        lo[0], hi[0] = -2 * s, 2 * s
        return lo, hi

    def _make_basis(self, y: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return legendre.legvander(2 * y - 1, 3), legendre.legvander(2 * x - 1, 3)

    def evaluate(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        ly, lx = self._basis
        coef = np.zeros((4, 4))  # coef[q, p] multiplies L_q(y) L_p(x)
        for (p, q), beta in zip(_POLY_TERMS, theta, strict=True):
            coef[q, p] = beta
        return ly @ coef @ lx.T

    def _ridge_mask(self) -> np.ndarray:
        m = np.zeros(self.n_params)
        m[1:] = 1.0
        return m

    def _initial(self, block: np.ndarray, scale: float) -> np.ndarray:
        return _ridge_lstsq(self.design(), block.ravel(), self._ridge_mask())


@register_family("rbf")
@dataclass(frozen=True)
class RBFSurrogate(_Linear):
    """``sum alpha_c exp(-|(x,y) - mu_c|^2 / (2 sigma^2)) + b``, centres on a 4 x 4 grid:
    ``theta = (alpha (16), sigma, b)``."""

    @property
    def n_params(self) -> int:
        return _RBF_GRID**2 + 2

    @property
    def level_mask(self) -> np.ndarray:
        m = np.zeros(self.n_params, dtype=bool)
        m[: _RBF_GRID**2] = True  # weights (kernels are > 0)
        m[-1] = True  # offset
        return m

    def bounds(self, scale: float) -> tuple[np.ndarray, np.ndarray]:
        s = float(scale)
        lo, hi = np.full(self.n_params, -4 * s), np.full(self.n_params, 4 * s)
        lo[-2], hi[-2] = 0.1, 1.0
        lo[-1], hi[-1] = -2 * s, 2 * s
        return lo, hi

    def _make_basis(self, y: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = (np.arange(_RBF_GRID) + 0.5) / _RBF_GRID
        return (y[:, None] - c) ** 2, (x[:, None] - c) ** 2  # squared offsets per axis

    def evaluate(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        k = _RBF_GRID**2
        alpha, sigma, b = theta[:k], theta[k], theta[k + 1]
        dy2, dx2 = self._basis
        ey, ex = np.exp(-dy2 / (2 * sigma**2)), np.exp(-dx2 / (2 * sigma**2))
        # centre (cy_a, cx_b) has weight alpha[a * G + b]: kernel = ey[:, a] * ex[:, b]
        return ey @ alpha.reshape(_RBF_GRID, _RBF_GRID) @ ex.T + b

    def design(self) -> np.ndarray:
        """The weights' columns at bandwidth 0.3, then the offset's."""
        eye = np.eye(self.n_params)
        k = _RBF_GRID**2
        cols = [self.evaluate(np.r_[eye[i, :k], 0.3, 0.0]).ravel() for i in range(k)]
        return np.stack([*cols, np.ones(self.n_rows * self.n_cols)], axis=1)

    def _ridge_mask(self) -> np.ndarray:
        m = np.zeros(self.n_params)
        m[: _RBF_GRID**2] = 1.0
        return m

    def _initial(self, block: np.ndarray, scale: float) -> np.ndarray:
        k = _RBF_GRID**2
        coef = _ridge_lstsq(self.design(), block.ravel(), np.r_[np.ones(k), 0.0])
        return np.r_[coef[:k], 0.3, coef[k]]


#: The family names, in the order they are offered.
FAMILIES = tuple(SURROGATES)


def _ridge_lstsq(design: np.ndarray, target: np.ndarray, ridge_mask: np.ndarray) -> np.ndarray:
    lam = _RIDGE * len(target)
    gram = design.T @ design + lam * np.diag(ridge_mask)
    return np.linalg.solve(gram, design.T @ target)


# ---------------------------------------------------------------------- alternating scheme
@dataclass(frozen=True)
class FitResult:
    """The permutation and parameters found by the alternating scheme.

    ``perm[r]`` is the true local row shown at permuted position ``r``; ``losses`` is the total
    weighted l1 loss after the initial fit and after every accepted swap (non-increasing).
    """

    perm: np.ndarray
    thetas: dict[str, np.ndarray]
    losses: tuple[float, ...]
    n_swaps: int


def _permute(block: np.ndarray, perm: np.ndarray, square: bool) -> np.ndarray:
    return block[np.ix_(perm, perm)] if square else block[perm]


def _swap_losses(block, fitted, perm, square, pairs) -> np.ndarray:
    """l1 loss of the block after each candidate swap of permuted positions ``pairs``."""
    perms = np.tile(perm, (len(pairs), 1))
    rows = np.arange(len(pairs))
    perms[rows, pairs[:, 0]], perms[rows, pairs[:, 1]] = perm[pairs[:, 1]], perm[pairs[:, 0]]
    moved = block[perms[:, :, None], perms[:, None, :]] if square else block[perms]
    return np.abs(moved - fitted[None]).sum(axis=(1, 2))


def fit_blocks(
    blocks: dict[str, np.ndarray],
    surrogates: dict[str, Surrogate],
    scales: dict[str, float],
    *,
    rng: np.random.Generator,
    n_swap_iter: int = 15,
) -> FitResult:
    """Alternating fit of one shared row permutation and one surrogate per block.

    ``blocks`` in true neighbourhood order; ``"dx"`` is square and permuted on both axes, the
    others on rows only. Block losses are weighted by ``1 / ||A_t||_1`` (relative l1), so that
    the tiny prior-weighted loss block counts as much as the distance blocks.
    """
    n = len(next(iter(blocks.values())))
    perm = rng.permutation(n)
    weights = {t: 1.0 / max(float(np.abs(a).sum()), 1e-300) for t, a in blocks.items()}
    square = {t: t == "dx" for t in blocks}
    thetas = {
        t: surrogates[t].fit(_permute(a, perm, square[t]), scale=scales[t])
        for t, a in blocks.items()
    }

    def total(th) -> float:
        return sum(
            weights[t]
            * float(np.abs(_permute(a, perm, square[t]) - surrogates[t].evaluate(th[t])).sum())
            for t, a in blocks.items()
        )

    losses = [total(thetas)]
    if all(s.permutation_invariant for s in surrogates.values()):
        return FitResult(perm, thetas, tuple(losses), 0)
    pairs = np.array([(i, j) for i in range(n) for j in range(i + 1, n)])
    n_swaps = 0
    for _ in range(n_swap_iter):
        cand = sum(
            (
                weights[t]
                * _swap_losses(a, surrogates[t].evaluate(thetas[t]), perm, square[t], pairs)
                for t, a in blocks.items()
            ),
            start=np.zeros(len(pairs)),
        )
        best = int(np.argmin(cand))
        if not cand[best] < losses[-1] * (1 - _SWAP_TOL):
            break
        i, j = pairs[best]
        perm = perm.copy()
        perm[i], perm[j] = perm[j], perm[i]
        refit = {
            t: surrogates[t].fit(_permute(a, perm, square[t]), scale=scales[t], start=thetas[t])
            for t, a in blocks.items()
        }
        thetas = refit if total(refit) <= cand[best] else thetas
        losses.append(total(thetas))
        n_swaps += 1
    return FitResult(perm, thetas, tuple(losses), n_swaps)
