"""Private iterative elimination: PIE-NI (Algorithm 4) and PIE-k (Algorithm 5).

A user's per-query CGP budget ``rho_i`` (1/km^2) is split into ``c`` parts. In round ``j``
every still-active user releases a fresh Gaussian estimate with part ``r_{i,j}``; the server
combines the user's releases so far into an estimate of ``phi(x_i)`` with a confidence
half-width ``h``, and eliminates users whose interval settles the question. Eliminated users
keep the parts they did not spend (the *privacy saving*); users still active after ``c``
rounds have spent all of ``rho_i`` and their combined release is distributed exactly like the
one-shot baseline's, so PIE loses no utility on them.

A *valid triple* ``(M, g, h)`` for a 1-Lipschitz ``phi`` (km -> km) is implemented as a small
class that simulates the users' side (:class:`PointPrivatization`: ``M`` releases the location,
``g = phi(weighted mean)``; :class:`DistancePrivatization`: ``M`` releases ``phi(x)``,
``g = weighted mean``). With the variance-weighted mean of releases with parts
``r_1..r_j`` the error is ``N(0, I / (2 rho_bar_j))``, ``rho_bar_j = sum_{s<=j} r_s``, so
``h = lambda(d, beta) / sqrt(2 rho_bar_j)`` with ``lambda`` the exact chi quantile
(:func:`mdpsim.privacy.accounting.gaussian_norm_bound`; ``d = 2`` for points, ``1`` for
distances). Each (user, round) event gets ``beta_0 / (c |G_0|)``; the union bound gives
the guarantees of Lemmas 5.2 and 5.3 with probability ``1 - beta_0``.

Units: locations in km inside this module (the query modules convert from metres), ``rho``
in 1/km^2, ``phi`` values and half-widths in km.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mdpsim._core.validation import (
    check_choice,
    check_positive_int,
    check_probability,
    check_scalar,
)
from mdpsim.errors import InputError
from mdpsim.privacy.accounting import (
    chi_quantile,
    gaussian_norm_bound,
    gaussian_release,
)
from mdpsim.queries.budget_split import (  # noqa: F401  (split_budget re-exported)
    MAX_PARTS,
    Split,
    split_budget,
    split_kept,
)
from mdpsim.queries.locations import (  # noqa: F401  (re-exported: the kinds import them here)
    DistanceTo,
    distance_to,
    locations_in_km,
    point_in_km,
)


@functools.cache
def _compiled():
    """The compiled kernels' module (``mdpsim.queries._kernels``), imported on the first
    query (numba's import is not paid by ``import mdpsim``)."""
    from mdpsim.queries import _kernels

    return _kernels


# --------------------------------------------------------------------------- valid triples
class _Triple(ABC):
    """Shared state: the variance-weighted sum of each user's releases and its rho total."""

    dim: int

    def __init__(self, values_km: np.ndarray, *, rng: np.random.Generator) -> None:
        self._values = values_km
        self._rng = rng
        n = len(values_km)
        self.weighted_sum = np.zeros((n, self.dim))
        self.rho_total = np.zeros(n)

    def release(self, users: np.ndarray, rho: np.ndarray) -> None:
        """Users ``users`` each release one Gaussian estimate with budget ``rho`` (1/km^2)."""
        noisy = gaussian_release(self._values[users].reshape(len(users), -1), rho, rng=self._rng)
        self.weighted_sum[users] += rho[:, None] * noisy
        self.rho_total[users] += rho

    def trial_rounds(
        self, users: np.ndarray, parts: np.ndarray, std_km: np.ndarray, lam: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``len(parts)`` rounds of :meth:`release` by ``users`` with the ``(rounds, users)``
        budgets ``parts`` and their noise stds, drawn in one go and not kept: the running
        weighted sums ``(rounds, users, dim)`` and rho totals ``(rounds, users)`` after each
        round, the very floats the rounds one by one would hold (:meth:`keep` one of them),
        with the combined releases (:meth:`mean`) and half-widths (:func:`half_width_km` of
        ``lam``) after each round (``_kernels.trial_sums``)."""
        noise = self._rng.standard_normal((*parts.shape, self.dim))
        return _compiled().trial_sums(
            self._values[users],
            self.weighted_sum[users],
            self.rho_total[users],
            parts,
            std_km,
            noise,
            lam,
        )

    def band_elimination(
        self, split: Split, lam: float, point: np.ndarray, band: tuple[float, float]
    ) -> Elimination:
        """PIE-NI's rounds of ``split`` with the rule of ``band = (nu_low, nu_high)``, compiled
        (``_kernels.band_elimination``; ``point`` the :meth:`band_point`). The normals of
        several rounds are drawn at once (at most :data:`TRIAL_DRAWS`), a round's users take
        theirs in order, what the rounds left is kept for the next, and the rng is set back at
        the end to have drawn exactly what they used: the streams and every float are those
        of one round at a time."""
        n, c, j, left = split.n, len(split.parts), 0, len(split.users)
        record = (  # Elimination's s0, s1, active, rounds and spent
            np.zeros(n, dtype=bool),
            np.zeros(n, dtype=bool),
            np.zeros(n, dtype=bool),
            np.zeros(n, dtype=np.int64),
            np.zeros(n),
        )
        cols, rule = np.arange(left), (lam, *band)
        state: Mapping[str, Any] = {}  # the rng's, before the first draw that may be left
        noise, used = _NO_POINT, 0
        while j < c and left:
            span = max(min(c - j, TRIAL_DRAWS // (left * self.dim)), 1)
            if span > 1 and not state:  # only such a draw may leave normals unused
                state, used = self.rng_state(), 0
            fresh = self._rng.standard_normal(span * left * self.dim)
            noise = np.concatenate((noise, fresh)) if len(noise) else fresh
            taken, j, left = _compiled().band_elimination(
                self._values, self.weighted_sum, self.rho_total,
                (split.users, split.parts, split.cum, split.std_km),
                noise, rule, point, (j, left, cols), record,
            )  # fmt: skip
            noise, used = noise[taken:], used + taken
        if len(noise):
            self.rewind(state, used)
        return Elimination(*record, j)

    def band_point(self) -> np.ndarray | None:
        """What :meth:`band_elimination` needs to estimate ``phi`` itself: nothing (an empty
        array) when the estimate is the combined release, the point when it is the distance
        to a point (:class:`DistanceTo`); None when ``phi`` is any other function."""
        return None

    def rng_state(self) -> Mapping[str, Any]:
        """The rng's state, for :meth:`rewind`."""
        return self._rng.bit_generator.state

    def rewind(self, state: Mapping[str, Any], normals: int) -> None:
        """Set the rng back to ``state`` and draw exactly ``normals`` normals (the rounds drew
        more than they kept)."""
        self._rng.bit_generator.state = state
        self._rng.standard_normal(normals)

    def keep(self, users: np.ndarray, weighted_sum: np.ndarray, rho_total: np.ndarray) -> None:
        """Make one round of :meth:`trial_rounds` the users' state."""
        self.weighted_sum[users] = weighted_sum
        self.rho_total[users] = rho_total

    def mean(self, users: np.ndarray) -> np.ndarray:
        """The combined release (km): ``N(value, I / (2 rho_total))``."""
        return self.weighted_sum[users] / self.rho_total[users][:, None]

    def estimate(self, users: np.ndarray) -> np.ndarray:
        """``g``: the users' estimates of ``phi(x)`` (km)."""
        return self.estimate_of(self.mean(users))

    @abstractmethod
    def estimate_of(self, mean: np.ndarray) -> np.ndarray:
        """``g`` of combined releases ``(m, dim)`` (km) -> ``(m,)`` km."""

    @abstractmethod
    def true_values(self, users: np.ndarray) -> np.ndarray:
        """The users' exact ``phi(x)`` (km), what a query's error compares against."""

    def bound(self, users: np.ndarray, beta: float) -> np.ndarray:
        """Half-width ``h`` (km): ``|g - phi(x)| <= h`` with probability ``1 - beta``."""
        return self.half_width(users, gaussian_norm_bound(self.dim, beta))

    def half_width(self, users: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """:meth:`bound` from its chi quantile ``lam = lambda(dim, beta)`` (the elimination
        rounds share one beta, so they look the quantile up once)."""
        return half_width_km(self.rho_total[users], lam)


def half_width_km(rho_total: np.ndarray, lam) -> np.ndarray:
    """``h = lam / sqrt(2 rho_total)`` (km) of combined releases with ``rho_total`` (1/km^2)."""
    return lam / np.sqrt(2.0 * rho_total)


class PointPrivatization(_Triple):
    """``(M(., .; f_id), g_0, h_0)``: users release ``x + N(0, I/(2r))``; ``g_0 = phi(mean)``.

    ``phi`` maps ``(m, 2)`` km points to ``(m,)`` km values and must be 1-Lipschitz for the
    Euclidean norm. The release is CGP for the l2 metric and therefore also for any metric
    that dominates it (road distance >= straight-line distance).
    """

    dim = 2

    def __init__(
        self, locations_km, phi: Callable[[np.ndarray], np.ndarray], *, rng: np.random.Generator
    ) -> None:
        super().__init__(np.asarray(locations_km, dtype=float), rng=rng)
        self.phi = phi

    def estimate_of(self, mean: np.ndarray) -> np.ndarray:
        return self.phi(mean)

    def band_point(self) -> np.ndarray | None:
        if not isinstance(self.phi, DistanceTo) or self._values.shape[1:] != (2,):
            return None
        point = self.phi.point_km
        return point if point.shape == (2,) and point.dtype == np.float64 else None

    def true_values(self, users: np.ndarray) -> np.ndarray:
        return self.phi(self._values[users])


class DistancePrivatization(_Triple):
    """``(M(., .; phi), g_1, h_1)``: users release ``phi(x) + N(0, 1/(2r))``; ``g_1`` averages.

    ``phi_values_km`` are the users' true ``phi(x_i)`` (computed on the user's device);
    ``phi`` must be 1-Lipschitz for the metric whose privacy is claimed.
    """

    dim = 1

    def __init__(self, phi_values_km, *, rng: np.random.Generator) -> None:
        super().__init__(np.asarray(phi_values_km, dtype=float).reshape(-1, 1), rng=rng)

    def estimate_of(self, mean: np.ndarray) -> np.ndarray:
        return mean[:, 0]

    def band_point(self) -> np.ndarray | None:
        return _NO_POINT

    def true_values(self, users: np.ndarray) -> np.ndarray:
        return self._values[users, 0]


Triple = PointPrivatization | DistancePrivatization
_NO_POINT = np.empty(0)


# --------------------------------------------------------------------------- results
@dataclass
class Elimination:
    """What PIE-NI / PIE-k return (all arrays have one entry per user).

    ``s0``: eliminated as ``phi > nu_high`` (PIE-NI) or as not among the k smallest (PIE-k);
    ``s1``: eliminated as ``phi < nu_low`` (PIE-NI only); ``active``: ``G_jhat``, users never
    eliminated; ``rounds``: releases made by each user; ``spent``: rho (1/km^2) each spent,
    rounded up; ``iterations``: ``jhat``.
    """

    s0: np.ndarray
    s1: np.ndarray
    active: np.ndarray
    rounds: np.ndarray
    spent: np.ndarray
    iterations: int


def _start(triple: Triple, rho, c, scheme, beta0) -> tuple[Split, float]:
    """The rounds' budget split and the chi quantile ``lambda(dim, beta_each)`` of each
    (user, round) event's share of ``beta0``."""
    rho = np.asarray(rho, dtype=float)
    if rho.shape != (len(triple.rho_total),):
        raise InputError(f"rho_per_km2 must have one value per user ({len(triple.rho_total)})")
    c = _rounds(c)  # before the cache's lookup
    split = split_kept(rho.tobytes(), len(rho), c, scheme)
    if not split.releasable:  # as gaussian_release refuses it, before any release
        raise InputError("rho_per_km2 must be finite and > 0 for every user released")
    beta0 = _probability(beta0, "beta0")
    return split, chi_quantile(triple.dim, beta0 / (c * max(len(split.users), 1)))


def _rounds(c) -> int:
    """``c``, checked as a number of rounds in ``1..MAX_PARTS`` (an int in range as is)."""
    if type(c) is int and 1 <= c <= MAX_PARTS:
        return c
    return check_scalar(c, "c", kind=int, min=1, max=MAX_PARTS)


def _probability(value, name: str) -> float:
    """``value``, checked as a probability in ``(0, 1)`` (a float in range as is)."""
    if type(value) is float and 0.0 < value < 1.0:
        return value
    return check_probability(value, name)


#: Elimination rounds drawn in one go while (users x rounds) stays below this: fewer, larger
#: numpy calls; a round that eliminates somebody before the last sends the draws after it back.
TRIAL_DRAWS = 2048

#: One round's rule on ``(rounds, users)`` estimates and half-widths: who settles as s0, s1.
Settle = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _eliminate(
    triple: Triple,
    split: Split,
    lam: float,
    settle: Settle,
    *,
    keep_above: int,
) -> Elimination:
    """The elimination rounds shared by PIE-NI and PIE-k: each round the active users release
    with their part, and ``settle`` takes out whom their estimates settle, until ``c`` rounds
    or at most ``keep_above`` users are left (PIE-NI's compiled rounds, when its triple
    allows them: :meth:`_Triple.band_elimination`).

    Several rounds are drawn at once (:meth:`_Triple.trial_rounds`, at most
    :data:`TRIAL_DRAWS` draws); when a round but the last of them settles somebody, the rng is
    set back and draws exactly the rounds up to it, so the streams and every float are those
    of one round at a time.
    """
    c, n = len(split.parts), split.n
    s0, s1 = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    rounds, spent = np.zeros(n, dtype=np.int64), np.zeros(n)
    users, parts, std, cum = split.users, split.parts, split.std_km, split.cum  # the active's
    j = 0
    while j < c and len(users) > keep_above:
        span = max(min(c - j, TRIAL_DRAWS // (len(users) * triple.dim)), 1)
        state = triple.rng_state() if span > 1 else {}
        batch = (users, parts[j : j + span], std[j : j + span], lam)
        sums, totals, out0, out1, first = _settled_rounds(triple, batch, settle)
        r = first if 0 <= first < span - 1 else span - 1
        if r < span - 1:  # the rounds after r were drawn for users r takes out: draw again
            triple.rewind(state, (r + 1) * len(users) * triple.dim)
        triple.keep(users, sums[r], totals[r])
        j += r + 1
        rounds[users], spent[users] = j, cum[j - 1]  # active users took every round so far
        if first == r:  # somebody settles in round r
            s0[users[out0[r]]] = True
            s1[users[out1[r]]] = True
            stay = ~(out0[r] | out1[r])
            users, parts, std, cum = users[stay], parts[:, stay], std[:, stay], cum[:, stay]
    active = np.zeros(n, dtype=bool)
    active[users] = True
    return Elimination(s0, s1, active, rounds, spent, j)


def _settled_rounds(
    triple: Triple, batch: tuple, settle: Settle
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """:meth:`_Triple.trial_rounds` of ``batch`` and ``settle`` on their estimates: the sums,
    totals, who settles as s0 and s1 per round, and the first round that settles somebody
    (-1: none)."""
    sums, totals, mean, h = triple.trial_rounds(*batch)
    est = triple.estimate_of(mean.reshape(-1, triple.dim)).reshape(totals.shape)
    out0, out1 = settle(est, h)
    settled = (out0 | out1).any(axis=1)
    return sums, totals, out0, out1, int(settled.argmax()) if settled.any() else -1


def pie_ni(
    triple: Triple,
    rho_per_km2,
    *,
    nu_low: float,
    nu_high: float,
    c: int = 4,
    scheme: str = "even",
    beta0: float = 0.025,
) -> Elimination:
    """PIE-NI (Algorithm 4): settle ``phi(x_i) < nu_low`` or ``> nu_high`` per user.

    Users with ``rho = 0`` do not take part. With probability ``1 - beta0`` every user in
    ``s1`` has ``phi < nu_low`` and every user in ``s0`` has ``phi > nu_high`` (Lemma 5.2).
    ``nu_low = -inf`` gives one-sided elimination (KDE).
    """
    if not nu_low <= nu_high:
        raise InputError(f"nu_low={nu_low} must be <= nu_high={nu_high}")
    split, lam = _start(triple, rho_per_km2, c, scheme, beta0)

    def settle(est: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return est - h > nu_high, est + h < nu_low

    point = triple.band_point()
    if point is not None:
        return triple.band_elimination(split, lam, point, (float(nu_low), float(nu_high)))
    return _eliminate(triple, split, lam, settle, keep_above=0)


def pie_k(
    triple: Triple,
    rho_per_km2,
    *,
    k: int,
    c: int = 4,
    scheme: str = "even",
    beta0: float = 0.025,
) -> Elimination:
    """PIE-k (Algorithm 5): keep the users that may hold one of the k smallest ``phi``.

    Each round keeps the users whose interval's left end is at most the k-th smallest right
    end (their interval meets that of ``t_k``). With probability ``1 - beta0`` the true k
    smallest are in every ``G_j`` (Lemma 5.3). Stops after ``c`` rounds or at ``k`` users.
    """
    k = check_positive_int(k, "k")
    split, lam = _start(triple, rho_per_km2, c, scheme, beta0)

    def settle(est: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        right_k = np.partition(est + h, k - 1, axis=1)[:, k - 1 : k]
        out = est - h > right_k
        return out, np.zeros_like(out)

    return _eliminate(triple, split, lam, settle, keep_above=k)


# --------------------------------------------------------------------------- query plumbing
METHODS = ("BM0", "BM1", "PM0", "PM1")


@dataclass
class QueryAnswer:
    """A query's answer and what it cost each user.

    The query functions release noisy data as they run: pass budgets that every user can
    afford (``PopulationFilter.affordable``, or let :class:`QueryBudgeter` allocate) and
    charge ``spent`` afterwards; ``spent <= rho`` always.

    ``value``: the answer (a count, a KDE value, user indices, a bool); ``spent``: CGP rho
    (1/km^2) each user paid, rounded up, zero for users not asked; ``participants``: users
    asked (``rho > 0``); ``elimination``: PIE's record for PM methods, else ``None``.
    """

    value: object
    spent: np.ndarray
    participants: np.ndarray
    method: str
    elimination: Elimination | None = None


def budgets_for(rho_per_km2, n: int) -> np.ndarray:
    """Per-user budgets (a scalar is broadcast) in 1/km^2: finite and >= 0."""
    rho = np.asarray(rho_per_km2, dtype=float)
    rho = (rho if rho.shape == (n,) else np.broadcast_to(rho, (n,))).copy()
    if not _compiled().all_finite_nonnegative(rho):
        raise InputError("rho_per_km2 must be finite and >= 0 for every user (per km^2)")
    return rho


def make_triple(method: str, locations_km: np.ndarray, phi, rng: np.random.Generator) -> Triple:
    """Point privatization for ``*0`` methods, distance privatization for ``*1`` methods."""
    if method.endswith("0"):
        return PointPrivatization(locations_km, phi, rng=rng)
    return DistancePrivatization(phi(locations_km), rng=rng)


def release_once(triple: Triple, rho: np.ndarray) -> np.ndarray:
    """The baselines: every user with ``rho > 0`` releases once with all of it; returns spend."""
    users = (rho > 0).nonzero()[0]
    if len(users):
        triple.release(users, rho[users])
    return np.where(rho > 0, rho, 0.0)


@dataclass(frozen=True)
class Released:
    """What one query's users released: the triple, who was asked, whose estimate still decides
    the answer (all asked users for BM, PIE's active users for PM) and what each spent."""

    method: str
    triple: Triple
    asked: np.ndarray
    deciding: np.ndarray
    spent: np.ndarray
    elimination: Elimination | None

    def answer(self, value: object) -> QueryAnswer:
        """The query's answer with this release's costs."""
        return QueryAnswer(value, self.spent, self.asked, self.method, self.elimination)


Eliminate = Callable[[Triple, np.ndarray, float], Elimination]


def release(
    method: str, triple: Triple, rho: np.ndarray, *, beta: float, eliminate: Eliminate
) -> Released:
    """The skeleton every query shares once its triple is built: ``BM*`` releases once with
    the whole budget; ``PM*`` runs ``eliminate(triple, rho, beta0)`` with ``beta0 = beta / 4``
    (PIE-NI or PIE-k with the query's thresholds)."""
    asked = rho > 0
    if method.startswith("BM"):
        spent = release_once(triple, rho)
        return Released(method, triple, asked, asked.nonzero()[0], spent, None)
    elim = eliminate(triple, rho, 0.25 * _probability(beta, "beta"))
    return Released(method, triple, asked, elim.active.nonzero()[0], elim.spent, elim)


def release_locations(
    method: str,
    locations_m,
    rho_per_km2,
    phi: Callable[[np.ndarray], np.ndarray],
    *,
    rng: np.random.Generator,
    beta: float,
    eliminate: Eliminate,
) -> Released:
    """A query over user locations: check the method and budgets, build the triple for
    ``phi`` (km -> km), then :func:`release`."""
    check_choice(method, "method", METHODS)
    xy = locations_in_km(locations_m)
    rho = budgets_for(rho_per_km2, len(xy))
    return release_km(method, xy, rho, phi, rng=rng, beta=beta, eliminate=eliminate)


def release_km(
    method: str,
    xy_km: np.ndarray,
    rho: np.ndarray,
    phi: Callable[[np.ndarray], np.ndarray],
    *,
    rng: np.random.Generator,
    beta: float,
    eliminate: Eliminate,
) -> Released:
    """:func:`release_locations` of a checked method, locations (km) and budgets
    (:func:`locations_in_km`, :func:`budgets_for`), as a query that checked them calls it."""
    triple = make_triple(method, xy_km, phi, rng)
    return release(method, triple, rho, beta=beta, eliminate=eliminate)


def priv_sav(spent, rho_per_km2) -> float:
    """PrivSav: mean over asked users of the unspent fraction ``(rho_i - spent_i) / rho_i``."""
    rho = np.asarray(rho_per_km2, dtype=float)
    asked = rho > 0
    if not asked.any():
        return 0.0
    return float(np.mean((rho[asked] - np.asarray(spent)[asked]) / rho[asked]))
