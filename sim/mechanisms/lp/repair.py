"""Turn an almost-mDP matrix (an LP solution) into an exactly mDP one, with proof.

LP solvers meet constraints only to an absolute tolerance (~1e-7), so entries near 1e-6 of
an LP solution can break ``Z[i,k] <= exp(eps d(i,j)) Z[j,k]`` by a large *relative* margin.
The repair (derivation in docs/lp.md):

1. **Envelope.** Per column, the log-space Lipschitz envelope at ``eps_env``:

   * ``side="upper"`` (default): ``log U[i,k] = max_j (log Z[j,k] - eps_env d(i,j))``,
     the smallest eps_env-mDP column ``>= Z``. Zeros are filled in from their neighbours.
   * ``side="lower"``: ``log U[i,k] = min_j (log Z[j,k] + eps_env d(i,j))``, the largest
     eps_env-mDP column ``<= Z``. A column with a zero anywhere becomes all zero.

   Both are exactly eps_env-mDP for any metric ``d`` (triangle inequality). They are
   computed as multi-source shortest paths in log space (one Dijkstra call over a graph with
   one super-source per column) on the constraint pairs, which is exact when the pairs chain
   (``Domain.constraint_pairs``), or on all pairs when ``pairs`` is ``None``.
2. **Normalise.** ``Z' = U / s`` with row sums ``s``. Since every column of ``U`` is
   eps_env-mDP, so is ``s`` (``s_i <= exp(eps_env d) s_j``), hence for every i, j, k::

       Z'[i,k] / Z'[j,k] = (U[i,k] / U[j,k]) (s_j / s_i)
                         <= exp(eps_env d(i,j)) * min(exp(eps_env d(i,j)), max s / min s).

   ``RepairResult.certified_epsilon`` is the resulting bound
   ``eps_env + min(eps_env, ln(max s / min s) / d_min)``, with ``d_min`` the smallest
   distance between distinct secrets: the repaired matrix is eps-mDP for every eps at or
   above it. With ``eps_env = eps / 2`` this holds for ANY input (the generic bound).

Callers verify the result exactly (``mdpsim.privacy.verifier``) before releasing it;
:func:`repair_verified` does both and raises :class:`PrivacyViolation` on failure.
:func:`release_verified` is THE release loop of every LP-based mechanism (optimal LP, LP-A,
COPT, DistA-LP): repair at ``eps (1 - margin)``, verify at ``eps``; on failure the margin
grows tenfold (``next_margin``: from ``FIRST_MARGIN`` = 1e-6, the default of every LP-based
mechanism, up to ``MAX_MARGIN``), re-solving the LP at the new margin if the caller can.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from mdpsim._core.validation import check_epsilon, check_margin, check_positive_int
from mdpsim.errors import InputError
from mdpsim.privacy.verifier import PrivacyViolation, VerifyResult, verify

SIDES = ("upper", "lower")
MAX_MARGIN = 0.5  # eps_env = eps / 2: the repair is eps-mDP for any input (module docstring)
# The first margin tried: the LP at eps (1 - 1e-6) gives away ~1e-6 (relative) of the optimum's
# loss and verified in every measured case (docs/lp.md, "Adaptive margin"); 1e-3 gave 0.1-0.2 %.
FIRST_MARGIN = 1e-6
MARGIN_GROWTH = 10  # a failed exact check multiplies the margin by this (up to MAX_MARGIN)
_COLUMN_CHUNK = 256
_NEG_TOL = 1e-6  # solver round-off below 0 that is read as 0


@dataclass(frozen=True)
class RepairResult:
    """A repaired matrix and what is proven about it.

    ``matrix`` (N x K, rows sum to 1), ``epsilon_envelope`` (the eps_env used, per km),
    ``certified_epsilon`` (per km, the proven bound of the module docstring),
    ``row_sum_min`` / ``row_sum_max`` (of the envelope before normalising),
    ``max_change`` (largest absolute change of an entry) and ``verification`` (the exact
    check at the caller's epsilon, or ``None`` if it was not run).
    """

    matrix: np.ndarray
    epsilon_envelope: float
    certified_epsilon: float
    row_sum_min: float
    row_sum_max: float
    max_change: float
    verification: VerifyResult | None = None


def lipschitz_envelope(
    matrix, dist, epsilon: float, *, pairs=None, side: str = "upper"
) -> np.ndarray:
    """The per-column log-space eps-Lipschitz envelope of ``matrix`` (not normalised).

    Parameters
    ----------
    matrix
        N x K non-negative finite matrix (round-off down to -1e-6 is read as 0).
    dist
        N x N distances in km between the rows' secrets (symmetric, > 0 off the diagonal).
    epsilon
        eps_env per km.
    pairs
        (P, 2) secret pairs whose distances chain to every other pair (e.g.
        ``Domain.constraint_pairs``); ``None`` uses all pairs.
    side
        ``"upper"`` (smallest envelope above ``matrix``) or ``"lower"`` (largest below).
    """
    Z = _as_matrix(matrix)
    D = np.asarray(dist, dtype=np.float64)
    n, k = Z.shape
    if D.shape != (n, n):
        raise InputError(f"dist must be {n} x {n} (km) for a matrix with {n} rows")
    if side not in SIDES:
        raise InputError(f"side={side!r} must be one of {', '.join(SIDES)}")
    check_epsilon(epsilon)
    a, b = _pair_arrays(pairs, n)
    w = D[a, b]
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise InputError("dist must be finite and > 0 between distinct secrets")
    sign = 1.0 if side == "upper" else -1.0
    out = np.empty_like(Z)
    for start in range(0, k, _COLUMN_CHUNK):
        block = Z[:, start : start + _COLUMN_CHUNK]
        out[:, start : start + block.shape[1]] = _envelope_block(block, a, b, epsilon * w, sign)
    return out


def repair(
    matrix, dist, epsilon_envelope: float, *, pairs=None, side: str = "upper"
) -> RepairResult:
    """Envelope at ``epsilon_envelope``, then normalise rows (module docstring, steps 1-2)."""
    Z = _as_matrix(matrix)
    U = lipschitz_envelope(Z, dist, epsilon_envelope, pairs=pairs, side=side)
    sums = U.sum(axis=1)
    if not np.all(sums > 0):
        raise PrivacyViolation(
            f"repair: row {int(np.argmin(sums))} of the envelope is all zero; the input has "
            "no column that is positive everywhere it must be (use side='upper')"
        )
    repaired = U / sums[:, None]
    d_min = _min_distance(np.asarray(dist, dtype=np.float64), pairs)
    spread = math.log(float(sums.max()) / float(sums.min()))
    certified = epsilon_envelope + min(epsilon_envelope, spread / d_min)
    return RepairResult(
        matrix=repaired,
        epsilon_envelope=float(epsilon_envelope),
        certified_epsilon=float(certified),
        row_sum_min=float(sums.min()),
        row_sum_max=float(sums.max()),
        max_change=float(np.abs(repaired - Z).max()),
    )


def repair_verified(
    matrix, dist, epsilon: float, *, margin: float, pairs=None, side: str = "upper"
) -> RepairResult:
    """Repair at ``eps_env = epsilon (1 - margin)`` and verify exactly at ``epsilon``.

    Returns the result with ``verification`` set; raises :class:`PrivacyViolation` if the
    exact check (with ``pairs`` if given, which must chain) fails. ``margin`` in (0, 0.5];
    at 0.5 the bound holds for any input.
    """
    check_margin(margin, MAX_MARGIN)
    result = repair(matrix, dist, epsilon * (1 - margin), pairs=pairs, side=side)
    check = verify(result.matrix, dist, epsilon, pairs=pairs)
    if not check.passed:
        raise PrivacyViolation(
            f"repair at margin {margin:g} does not verify: {check} (certified bound "
            f"{result.certified_epsilon:.9g}/km)"
        )
    return RepairResult(**{**result.__dict__, "verification": check})


@dataclass(frozen=True)
class VerifiedRelease:
    """A matrix that passed the exact verifier, and how it got there.

    ``matrix`` (rows sum to 1 unless released unrepaired), ``margin`` (the last one tried),
    ``rounds`` (envelope repairs run; 0: released as given), ``first`` (the check of the
    input, if ``check_first``), ``verification`` (the check that passed), ``max_lifted_mass``
    (largest envelope row sum minus 1 over the rounds) and ``max_change`` (largest absolute
    change of an entry in the last round).
    """

    matrix: np.ndarray
    margin: float
    rounds: int
    first: VerifyResult | None
    verification: VerifyResult
    max_lifted_mass: float
    max_change: float

    @property
    def info(self) -> dict:
        """The repair's ``info_`` entries."""
        first = self.first or self.verification
        return {
            "pre_repair_epsilon": first.smallest_epsilon,
            "pre_repair_violation_ratio": first.violation_ratio,
            "repair_rounds": self.rounds,
            "repair_margin": self.margin,
            "repair_max_lifted_mass": self.max_lifted_mass,
        }


def release_verified(
    matrix,
    dist,
    epsilon: float,
    *,
    margin: float,
    pairs=None,
    side: str = "upper",
    resolve: Callable[[float], np.ndarray] | None = None,
    rounds_per_margin: int = 1,
    check_first: bool = False,
    who: str = "release",
) -> VerifiedRelease:
    """The one verified-release loop: a matrix that passes ``verify`` at ``epsilon``, or raise.

    With ``check_first`` the input is released as it is if it already verifies. Otherwise
    each round repairs the current matrix at ``eps_env = epsilon (1 - margin)`` (envelope on
    ``pairs``, which must chain; ``None``: all pairs) and verifies the result exactly at
    ``epsilon``. After ``rounds_per_margin`` failed rounds the margin grows (``next_margin``:
    tenfold, from at least ``FIRST_MARGIN``, up to ``MAX_MARGIN``); ``resolve(margin)``, if
    given, then supplies a new input (the LP re-solved at ``epsilon (1 - margin)``), else the
    rounds continue from the last repair. At ``MAX_MARGIN`` one repair is eps-mDP for ANY
    input (module docstring), so :class:`PrivacyViolation` (naming ``who``) is raised only if
    the verifier disagrees with that proof: nothing unverified is ever returned.
    """
    theta = check_margin(margin, MAX_MARGIN, include_boundaries="both")
    check_positive_int(rounds_per_margin, "rounds_per_margin")
    current = _as_matrix(matrix)
    first = verify(current, dist, epsilon, pairs=pairs) if check_first else None
    if first is not None and first.passed:
        return VerifiedRelease(current, theta, 0, first, first, 0.0, 0.0)
    rounds, lifted = 0, 0.0
    while True:
        for _ in range(rounds_per_margin):
            result = repair(current, dist, epsilon * (1 - theta), pairs=pairs, side=side)
            check = verify(result.matrix, dist, epsilon, pairs=pairs)
            rounds += 1
            lifted = max(lifted, result.row_sum_max - 1.0)
            if check.passed:
                return VerifiedRelease(
                    result.matrix, theta, rounds, first, check, lifted, result.max_change
                )
            current = result.matrix
        if theta >= MAX_MARGIN:
            raise PrivacyViolation(
                f"{who}: no exactly verified matrix after {rounds} repairs up to margin "
                f"{MAX_MARGIN}: {check} (certified bound {result.certified_epsilon:.9g}/km)"
            )
        theta = next_margin(theta)
        if resolve is not None:
            current = _as_matrix(resolve(theta))


def next_margin(margin: float) -> float:
    """The margin after a failed exact check: ``MARGIN_GROWTH`` times larger, at least
    ``FIRST_MARGIN``, at most ``MAX_MARGIN``."""
    return min(max(MARGIN_GROWTH * margin, FIRST_MARGIN), MAX_MARGIN)


def envelope_parents(matrix, a, b, weight) -> tuple[np.ndarray, np.ndarray]:
    """Upper envelope (``side="upper"``) over edges ``(a, b)`` of lengths ``weight``, with parents.

    ``weight`` is ``eps d(a, b)`` (no unit). Returns ``(U, parent)``, both N x K:
    ``parent[i, k]`` is the secret j next to i on the path that attains ``U[i, k]`` (so
    ``U[i, k] = U[j, k] e^{-weight(i, j)}``), or -1 where ``U[i, k]`` is ``matrix[i, k]``
    itself. The optimal LP generates its constraints from these parents.
    """
    Z = _as_matrix(matrix)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.float64)
    U, parent = np.empty_like(Z), np.empty(Z.shape, dtype=np.int64)
    for start in range(0, Z.shape[1], _COLUMN_CHUNK):
        cols = slice(start, start + _COLUMN_CHUNK)
        U[:, cols], parent[:, cols] = _envelope_block(Z[:, cols], a, b, weight, 1.0, parents=True)
    return U, parent


def _envelope_block(Z: np.ndarray, a, b, weight, sign: float, *, parents: bool = False):
    """Multi-source Dijkstra in log space for a block of columns.

    Node ``c`` (one per column) is a super-source with an arc to each secret j of length
    ``-sign log Z[j,c] + shift_c >= 1``; secrets are joined by arcs ``eps d(a,b)``. The
    distance from source c to secret i is ``min_j (-sign log Z[j,c] + eps d(i,j)) + shift_c``.
    With ``parents`` also returns each entry's predecessor secret (-1: the super-source).
    """
    n, k = Z.shape
    with np.errstate(divide="ignore"):
        logs = np.log(Z)
    cost = -sign * logs  # +inf where Z == 0 (upper: no arc; lower: handled below)
    finite = np.isfinite(cost)
    shift = 1.0 - np.min(np.where(finite, cost, np.inf), axis=0)  # per column
    shift = np.where(np.isfinite(shift), shift, 0.0)
    jj, cc = np.nonzero(finite)
    src = np.concatenate([a, b, n + cc])
    dst = np.concatenate([b, a, jj])
    length = np.concatenate([weight, weight, cost[jj, cc] + shift[cc]])
    graph = sparse.csr_array((length, (src, dst)), shape=(n + k, n + k))
    sources = n + np.arange(k)
    if parents:
        found, pred = csgraph.dijkstra(
            graph, directed=True, indices=sources, return_predecessors=True
        )
    else:
        found = csgraph.dijkstra(graph, directed=True, indices=sources)
    dist = found[:, :n].T
    out = np.exp(-sign * (dist - shift[None, :]))
    if sign < 0:  # lower envelope: a zero anywhere in a column zeroes the column
        out[:, ~np.all(finite, axis=0)] = 0.0
    if not parents:
        return out
    pred = pred[:, :n].T
    return out, np.where((pred >= 0) & (pred < n), pred, -1)


def _pair_arrays(pairs, n: int) -> tuple[np.ndarray, np.ndarray]:
    if pairs is None:
        a, b = np.triu_indices(n, k=1)
        return a, b
    p = np.asarray(pairs, dtype=np.int64)
    if (
        p.ndim != 2
        or p.shape[1] != 2
        or np.any(p < 0)
        or np.any(p >= n)
        or np.any(p[:, 0] == p[:, 1])
    ):
        raise InputError(f"pairs must be a (P, 2) array of distinct indices in [0, {n})")
    return p[:, 0], p[:, 1]


def _min_distance(D: np.ndarray, pairs) -> float:
    a, b = _pair_arrays(pairs, len(D))
    return float(D[a, b].min()) if len(a) else math.inf


def _as_matrix(matrix) -> np.ndarray:
    Z = np.array(matrix, dtype=np.float64)
    if Z.ndim != 2 or not np.all(np.isfinite(Z)):
        raise InputError("matrix must be a finite 2-D array (N x K)")
    if np.any(Z < -_NEG_TOL):
        raise InputError(f"matrix has entries below -{_NEG_TOL:g} (min {Z.min():.3g})")
    return np.maximum(Z, 0.0)
