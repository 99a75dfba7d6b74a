"""The attack contract, its registry, and how an attack's estimates are scored.

An attack is the honest-but-curious server's inference. It sees only what the server sees:

* once, at the start, a :class:`Context`: the domain (secrets, outputs, distances, prior),
  the number of user slots, and public data (each secret's one-tick reach on the roads, traces
  of a public population, and the true mobility only if the scenario grants it);
* at every (re)generation of the mechanism a :class:`Release`: the fitted mechanism (its matrix
  over its own secrets, their global indices, its guarantees, its info such as the DistA-LP
  uploads) and which upload each user slot sent;
* at every tick an :class:`Observation`: per user slot the reported output index (-1: no
  report) and the pseudonym the report arrived under.

A slot is the row a report arrives in; an attack may treat a slot as one person only while its
pseudonym stays the same (a changed pseudonym is a new person to the server). Attacks never
see true positions: they return estimates, and :func:`score` compares them with the truth.

``observe`` returns the estimates that became available at that tick (a forward filter: one
about this tick; a fixed-lag smoother: one about an earlier tick), ``finish`` the rest (the
Viterbi trace, significant places, linkage). Every estimate is scored into the same metric
family, one value per user (:data:`METRICS`): expected error (km), top-1 hit, posterior entropy
(bits), and, where it applies, posterior leakage per km, plus attack-specific extras.

Attacks register like mechanisms: ``@register("name")``, ``make(name, **params)``,
``available()``. Parameters are keyword-only and validated in ``__init__``.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from mdpsim._core.component import Component
from mdpsim._core.registry import Catalog, Registry
from mdpsim.attacks.scores import (
    Scores as Scores,  # re-exported: scorers and callers import it here
)
from mdpsim.attacks.scores import _nans
from mdpsim.privacy.guarantees import Composition, PureMDP

if TYPE_CHECKING:
    from mdpsim.geo.domain import Domain
    from mdpsim.mechanisms.base import Mechanism
    from mdpsim.privacy.release import CertifiedRelease


#: The metric family every attack reports, one value per user (NaN where it does not apply).
METRICS = {
    "error_km": "expected error: posterior-weighted distance to the truth (Shokri et al.)",
    "guess_error_km": "distance from the attack's point estimate to the truth",
    "hit": "top-1 hit: the most likely secret is the true one (rate when averaged)",
    "entropy_bits": "posterior entropy: the attack's uncertainty (lower = more certain)",
    "leakage_per_km": "posterior leakage: max over secret pairs of |log odds change| / distance",
}


def attack_column(label: str, metric: str) -> str:
    """The tick and per-user column of attack ``label``'s ``metric`` (``bayes_hit``)."""
    return f"{label}_{metric}"


#: A report's leakage above ``eps * (1 + BOUND_RTOL)`` breaks the Bayes bound and is flagged.
BOUND_RTOL = 1e-9


# ---------------------------------------------------------------------- what an attack sees
@dataclass(frozen=True, eq=False)
class Context:
    """Public knowledge handed to an attack once, before the first tick.

    Attributes
    ----------
    domain
        The full domain: secrets, outputs, ``dist_xx``/``dist_xy`` (km), public ``prior``.
    n_users
        Number of user slots (the length of every per-slot array).
    reach_km
        Per secret, the farthest road distance a user can be one tick later (road graph and
        speed, both public), or ``None`` if unknown.
    public_traces
        ``(T, M)`` secret indices of a public population's walks (e.g. an open mobility data
        set of other people), or ``None``.
    true_transitions
        The true one-tick transition matrix (``N x N``, rows sum to 1), only when the scenario
        hands the true mobility to the adversary; ``None`` otherwise.
    seed
        Seed for any randomness of the attack.
    tick_seconds, start_hour
        The public clock: simulated seconds per tick and the hour of day at tick 0
        (:func:`mdpsim._core.clock.hour_of_tick` turns a tick into an hour of day).
    public_prior
        A public prior over the secrets (``N``, sums to 1) the tracking attack starts from
        instead of the domain's: the people model's relevance map and diary
        (:mod:`mdpsim.simulation.public_prior`), only when the scenario grants it
        (``[attacks] people_prior``); ``None`` otherwise.
    """

    domain: Domain
    n_users: int
    reach_km: np.ndarray | None = None
    public_traces: np.ndarray | None = None
    true_transitions: object | None = None
    seed: int = 0
    tick_seconds: float = 60.0
    start_hour: float = 0.0
    public_prior: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Release:
    """A mechanism the server (re)generated at ``tick``.

    ``mechanism`` is fitted: ``matrix_`` has one row per secret of the domain (the mechanism
    contract: row ``i`` is secret ``i``), ``report_guarantee`` (what one report may leak) and
    its own ``info_``. ``uploads[u]`` is user (slot) u's upload in the mechanism's own record
    (:class:`~mdpsim.mechanisms.base.Uploads`: -1, none), or ``None`` when the mechanism
    takes no uploads. ``certified``: the release the reports are drawn from (the server's
    copy of the certified matrix and guarantee, docs/plugins.md); when given, ``matrix`` and
    ``report_epsilon_per_km`` are read from it, not from the mechanism instance.
    """

    tick: int
    mechanism: Mechanism
    uploads: np.ndarray | None = None
    certified: CertifiedRelease | None = None

    @property
    def matrix(self) -> np.ndarray:
        """The released matrix ``Pr[y | x]``, ``(N, K)``: row ``i`` is secret ``i``."""
        if self.certified is not None:
            return self.certified.matrix
        return self.mechanism.matrix_

    @property
    def report_epsilon_per_km(self) -> float | None:
        """The pure eps of one report, or ``None`` if the report guarantee is not pure."""
        held = None if self.certified is None else self.certified.report_guarantee
        g = self.mechanism.report_guarantee if held is None else held
        parts = g.parts if isinstance(g, Composition) else (g,)
        return g.epsilon_per_km if all(isinstance(p, PureMDP) for p in parts) else None


@dataclass(frozen=True, eq=False)
class Observation:
    """One tick's reports: ``outputs[u]`` (-1: none) under ``pseudonyms[u]``, per slot u."""

    tick: int
    outputs: np.ndarray
    pseudonyms: np.ndarray

    @cached_property
    def reporting(self) -> np.ndarray:
        """Slots that reported."""
        return np.nonzero(self.outputs >= 0)[0]


# ---------------------------------------------------------------------- what an attack returns
@dataclass(frozen=True, eq=False)
class TabulatedPosterior:
    """Posteriors that are rows of a per-output table: user i's is ``table[index[i]]``.

    ``risk_km[x, k] = sum_i table[k, i] d(x, x_i)`` is the expected distance from a truth x
    under posterior k, tabulated once per release, so the scorer's expected error is one
    lookup per user instead of a gathered row and a dot product (docs/attacks.md, Speed).
    """

    table: np.ndarray  # (K, N)
    index: np.ndarray  # (R,)
    risk_km: np.ndarray  # (N, K)

    @property
    def rows(self) -> np.ndarray:
        """The ``(R, N)`` posterior rows."""
        return self.table[self.index]


@dataclass(frozen=True, eq=False)
class LocationEstimate:
    """Beliefs about where ``users`` (slots) were at ``tick``.

    ``posterior`` is ``(R, N)``: one row per user over all secrets (sums to 1; float32 or
    float64), a :class:`TabulatedPosterior`, or ``None`` for point-only attacks. ``guess`` is
    the attack's point estimate per user: a secret index (``space="x"``) or an output index
    (``space="y"``).
    ``leakage_per_km`` per user, where it applies (a single report's posterior leakage).
    ``top`` (the most likely secret) and ``entropy_bits`` may be given when the attack has
    them already (e.g. tabulated per output); the scorer computes them otherwise.
    """

    tick: int
    users: np.ndarray
    guess: np.ndarray
    posterior: np.ndarray | TabulatedPosterior | None = None
    space: str = "x"
    leakage_per_km: np.ndarray | None = None
    top: np.ndarray | None = None
    entropy_bits: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class PlacesEstimate:
    """Each pseudonym's inferred significant places, ranked (home first); -1 pads a row.

    ``places`` is ``(R, k)`` secret indices, ``mass`` the attack's weight of each place and
    ``entropy_bits`` the entropy of each pseudonym's visit distribution. The scorer matches an
    inferred place to a true one within ``match_km``; true places are where the user stayed
    ``min_stay_ticks`` ticks in a row, ranked by total time there (the first is home).
    """

    pseudonyms: np.ndarray
    places: np.ndarray
    mass: np.ndarray
    entropy_bits: np.ndarray
    match_km: float
    min_stay_ticks: int


@dataclass(frozen=True, eq=False)
class LinkEstimate:
    """Re-identification across two periods: which period-A pseudonym each B pseudonym is.

    ``posterior`` is ``(R_b, R_a)``, rows sum to 1 over ``pseudonyms_a``; ``linked`` is the
    chosen A pseudonym of each B pseudonym.
    """

    period_a: tuple[int, int]
    period_b: tuple[int, int]
    pseudonyms_a: np.ndarray
    pseudonyms_b: np.ndarray
    linked: np.ndarray
    posterior: np.ndarray


Estimate = LocationEstimate | PlacesEstimate | LinkEstimate


# ---------------------------------------------------------------------- the contract
class Attack(Component, ABC):
    """Base class of the server's attacks. Subclasses set parameters in ``__init__``."""

    component_kind: ClassVar[str] = "attack"

    def start(self, context: Context) -> None:
        """Receive the public knowledge; called once before the first tick."""
        self.context = context

    def release(self, release: Release) -> None:  # an optional hook
        """A mechanism was (re)generated; called before that tick's observation."""

    @abstractmethod
    def observe(self, obs: Observation) -> Sequence[Estimate]:
        """Take one tick's reports; return the estimates available now (often one)."""

    def finish(self) -> Sequence[Estimate]:
        """The run is over: return the estimates that needed all of it."""
        return []


_ATTACKS: Registry[Attack] = Registry("attack")
#: Class decorator: make an attack available as ``make(name, ...)``.
register = _ATTACKS.register
#: Names of all registered attacks, in registration order.
available = _ATTACKS.available
#: Construct a registered attack, e.g. ``make("tracking", method="smooth", lag_ticks=3)``.
make = _ATTACKS.make


# ---------------------------------------------------------------------- what the run checks
def estimates_problem(estimates: Any, domain, n_users: int, ticks) -> str | None:
    """Why what an attack's ``observe`` / ``finish`` returned is not a list of estimates the
    scorer can read (``ticks``: the ticks observed so far), or ``None``. The run checks a
    plug-in's every return with it (mdpsim.attacks.suite), and so does ``check_attack``."""
    if not isinstance(estimates, list | tuple):
        return f"{type(estimates).__name__}, not a list of estimates"
    for n, est in enumerate(estimates):
        problem = _estimate_problem(est, domain, n_users, ticks)
        if problem is not None:
            return f"estimate {n}: {problem}"
    return None


#: how far a plug-in's posterior row may sum from 1
POSTERIOR_SUM_TOL = 1e-4


def _estimate_problem(est: Any, domain, n_users: int, ticks) -> str | None:
    if estimate_key(type(est)) in SCORERS:  # places, linkage, home_work, uniqueness, ...
        return None  # read by their own scorers, which check what they need
    if not isinstance(est, LocationEstimate):
        kinds = ", ".join(key.rpartition(".")[2] for key in SCORERS)
        return f"{type(est).__name__}, not a LocationEstimate or one of {kinds}"
    if est.tick not in ticks:
        return f"tick {est.tick!r} is not a tick observed so far"
    return (
        _users_problem(est.users, n_users)
        or _guess_problem(est, domain)
        or _posterior_problem(est.posterior, len(est.users), domain.n_x)
        or _per_user_fields_problem(est)
    )


def _users_problem(users: Any, n_users: int) -> str | None:
    """Why ``users`` is not a 1-D array of slots in ``[0, n_users)``, or ``None``."""
    if not isinstance(users, np.ndarray) or users.ndim != 1 or users.dtype.kind not in "iu":
        return "users is not a 1-D integer array"
    if len(users) and (users.min() < 0 or users.max() >= n_users):
        return f"users outside [0, {n_users})"
    return None


def _guess_problem(est: LocationEstimate, domain) -> str | None:
    """Why the space or the guesses (one index of that space per user) are wrong, or ``None``."""
    users, guess = est.users, est.guess
    if est.space not in ("x", "y"):
        return f"space {est.space!r}, not 'x' or 'y'"
    size = domain.n_x if est.space == "x" else domain.n_y
    if not isinstance(guess, np.ndarray) or guess.shape != users.shape:
        got = np.shape(guess) if isinstance(guess, np.ndarray) else type(guess).__name__
        return f"{got} guesses for {len(users)} users"
    if guess.dtype.kind not in "iu":
        return f"guesses of dtype {guess.dtype}, not integer indices"
    if len(guess) and (guess.min() < 0 or guess.max() >= size):
        return f"guesses outside [0, {size}) (space {est.space!r})"
    return None


def _posterior_problem(post: Any, n_rows: int, n_x: int) -> str | None:
    """Why ``post`` is not ``None``, a tabulated posterior or ``(n_rows, n_x)`` rows of
    probabilities, or ``None``."""
    if isinstance(post, np.ndarray):
        if post.shape != (n_rows, n_x) or post.dtype.kind != "f":
            want = f"({n_rows}, {n_x}) floats"
            return f"a posterior of shape {post.shape} ({post.dtype}), not {want}"
        if not np.all(np.isfinite(post)) or (post.size and post.min() < 0):
            return "a posterior with negative or non-finite entries"
        worst = np.abs(post.sum(axis=1) - 1.0).max(initial=0.0)
        if worst > POSTERIOR_SUM_TOL:
            return (
                f"posterior rows that do not sum to 1 (off by up to {float(worst):.3g}, "
                f"tolerance {POSTERIOR_SUM_TOL:g})"
            )
    elif isinstance(post, TabulatedPosterior):
        return _tabulated_problem(post, n_rows, n_x)
    elif post is not None:
        return f"a posterior of type {type(post).__name__}"
    return None


def _tabulated_problem(post: TabulatedPosterior, n_rows: int, n_x: int) -> str | None:
    """Why a tabulated posterior's table, risk table or index do not fit (the scorer's
    compiled gather reads them unchecked when numba's bounds checks are off)."""
    table, risk, index = (np.asarray(a) for a in (post.table, post.risk_km, post.index))
    k = table.shape[0] if table.ndim == 2 else -1
    if table.shape != (k, n_x) or risk.shape != (n_x, k):
        return (
            f"a tabulated posterior with table {table.shape} and risk_km {risk.shape}, not "
            f"(K, {n_x}) and ({n_x}, K)"
        )
    if index.shape != (n_rows,) or index.dtype.kind not in "iu":
        return (
            f"a tabulated posterior index of shape {index.shape} ({index.dtype}), not {n_rows} ints"
        )
    if n_rows and (index.min() < 0 or index.max() >= k):
        return f"a tabulated posterior index outside [0, {k})"
    return None


def _per_user_fields_problem(est: LocationEstimate) -> str | None:
    """Why an optional per-user field is not one value per user, or ``None``."""
    for field_name in ("leakage_per_km", "top", "entropy_bits"):
        value = getattr(est, field_name)
        if value is not None and np.shape(value) != est.users.shape:
            return f"{field_name} of shape {np.shape(value)} for {len(est.users)} users"
    return None


# ---------------------------------------------------------------------- scoring
@dataclass
class Truth:
    """What the scorer knows and the attacks do not: true positions and pseudonyms per tick."""

    positions: dict[int, np.ndarray] = field(default_factory=dict)
    pseudonyms: dict[int, np.ndarray] = field(default_factory=dict)
    report_epsilon: dict[int, float | None] = field(default_factory=dict)

    def record(self, tick: int, positions: np.ndarray, pseudonyms: np.ndarray, eps) -> None:
        """Keep one tick's truth (copies)."""
        self.positions[tick] = np.array(positions, dtype=np.int64)
        self.pseudonyms[tick] = np.array(pseudonyms, dtype=np.int64)
        self.report_epsilon[tick] = eps

    def trace(self) -> np.ndarray:
        """``(T, U)`` true positions of every slot over the recorded ticks, in tick order."""
        return np.stack([self.positions[t] for t in sorted(self.positions)])

    def users_of(self, pseudonyms: np.ndarray, ticks: tuple[int, int]) -> np.ndarray:
        """The slot behind each pseudonym seen in ``ticks`` (first..last); -1 if unseen."""
        owner: dict[int, int] = {}
        for t in range(ticks[0], ticks[1] + 1):
            for slot, p in enumerate(self.pseudonyms.get(t, ())):
                owner.setdefault(int(p), slot)
        return np.array([owner.get(int(p), -1) for p in pseudonyms], dtype=np.int64)


def entropy_bits(posterior: np.ndarray) -> np.ndarray:
    """Shannon entropy (bits) of every row of a row-stochastic array (0 log 0 = 0)."""
    p = np.asarray(posterior)
    if p.dtype.kind != "f":
        p = p.astype(float)
    log_p = np.maximum(p, np.finfo(p.dtype).tiny)  # one temporary, logged in place
    np.log(log_p, out=log_p)
    return np.einsum("...x,...x->...", p, log_p) / _MINUS_LN2  # = -sum / ln 2, bit for bit


_MINUS_LN2 = -np.log(2.0)


#: Scorers of the whole-run estimates, registered beside their attacks (places, linkage):
#: ``estimate_key(type)`` -> ``scorer(estimate, truth, domain)`` (:func:`register_scorer`).
SCORERS: Catalog[Callable[[Any, Truth, Any], Scores]] = Catalog("whole-run estimate")


def estimate_key(estimate_type: type) -> str:
    """The name an estimate type's scorer is filed under: ``module.QualifiedName``."""
    return f"{estimate_type.__module__}.{estimate_type.__qualname__}"


def register_scorer(estimate_type: type):
    """Decorator: ``scorer(estimate, truth, domain) -> Scores`` scores ``estimate_type``."""
    return SCORERS.register(estimate_key(estimate_type))


def score(estimate: Estimate, truth: Truth, domain) -> Scores:
    """Compare an estimate with the truth; the metric family of :data:`METRICS` and extras."""
    if isinstance(estimate, LocationEstimate):
        return _score_location(estimate, truth, domain)
    if estimate_key(type(estimate)) not in SCORERS:
        raise TypeError(f"not an estimate: {type(estimate).__name__}")
    return SCORERS.get(estimate_key(type(estimate)))(estimate, truth, domain)


#: A location estimate's metrics, in their columns' order (the last only where it applies).
_LOCATION_METRICS = (
    "guess_error_km", "error_km", "hit", "entropy_bits", "leakage_per_km", "bound_violation"
)  # fmt: skip


def _score_location(est: LocationEstimate, truth: Truth, domain) -> Scores:
    secrets = truth.positions[est.tick][est.users]
    eps = truth.report_epsilon.get(est.tick)
    scores = _score_compiled(est, secrets, eps, domain)
    return _score_location_numpy(est, secrets, eps, domain) if scores is None else scores


def _score_compiled(est: LocationEstimate, secrets: np.ndarray, eps, domain) -> Scores | None:
    """The scores in one compiled pass (``_kernels.location_scores``: the table, its finite
    totals and counts), or ``None`` when the guesses, the tops or a tabulated posterior are
    not int64/float64 arrays (a plug-in's own types: the numpy formula scores them)."""
    post, guess = est.posterior, est.guess
    leak = est.leakage_per_km
    n_metrics = 6 if leak is not None and eps is not None else 5
    table = np.empty((n_metrics, len(secrets)))
    dist = domain.dist_xx if est.space == "x" else domain.dist_xy
    ent = _NO_VALUES
    if post is None:  # a point estimate: its error is its guess's, certainty unknown
        risk, col = dist, guess
        top = guess if est.space == "x" else domain.y_in_x[guess]
    else:
        if isinstance(post, TabulatedPosterior):
            risk, col = post.risk_km, post.index
            if not (_is(col, _INT64) and _is(risk, _FLOAT64) and risk.ndim == 2):
                return None
        else:
            risk, col = _NO_ROWS, _NO_INDEX
            table[1] = _expected_error_km(post, secrets, domain)
        top = est.top if est.top is not None else _rows(post).argmax(axis=1)
        ent = est.entropy_bits if est.entropy_bits is not None else entropy_bits(_rows(post))
        ent = np.asarray(ent, dtype=float)
    if not (_is(guess, _INT64) and _is(top, _INT64)):
        return None
    totals, counts = np.empty(n_metrics), np.empty(n_metrics, dtype=np.int64)
    _compiled().location_scores(
        secrets, guess, dist, risk, col, top, ent,
        _NO_VALUES if leak is None else np.asarray(leak, dtype=float),
        eps * (1 + BOUND_RTOL) if n_metrics == 6 else np.inf, table, totals, counts,
    )  # fmt: skip
    return Scores.of_table(
        est.tick, est.users, _LOCATION_METRICS[:n_metrics], table, totals, counts,
        guess=guess, space=est.space,
    )  # fmt: skip


def _is(values, dtype: np.dtype) -> bool:
    """Whether ``values`` is a numpy array of ``dtype``."""
    return isinstance(values, np.ndarray) and values.dtype == dtype


def _score_location_numpy(est: LocationEstimate, secrets: np.ndarray, eps, domain) -> Scores:
    """The scores metric by metric in numpy, of any estimate the run accepted."""
    n = len(est.users)
    dist = domain.dist_xx if est.space == "x" else domain.dist_xy
    guess_error = dist[secrets, est.guess]
    if est.posterior is not None:
        post = est.posterior
        error = _expected_error_km(post, secrets, domain)
        top = est.top if est.top is not None else _rows(post).argmax(axis=1)
        ent = est.entropy_bits if est.entropy_bits is not None else entropy_bits(_rows(post))
        rows = [guess_error, error, (top == secrets).astype(float), np.asarray(ent, dtype=float)]
    else:  # a point estimate: its error is its expected error, certainty unknown
        hit = est.guess == secrets if est.space == "x" else domain.y_in_x[est.guess] == secrets
        rows = [guess_error, guess_error, hit.astype(float), _nans(n)]
    leak = est.leakage_per_km
    rows.append(_nans(n) if leak is None else np.asarray(leak, dtype=float))
    if leak is not None and eps is not None:
        rows.append((rows[-1] > eps * (1 + BOUND_RTOL)).astype(float))
    return Scores.of_rows(
        est.tick, est.users, _LOCATION_METRICS[: len(rows)], rows, guess=est.guess, space=est.space
    )


_INT64, _FLOAT64 = np.dtype(np.int64), np.dtype(np.float64)
#: what the compiled scorer reads for an input not given
_NO_ROWS, _NO_INDEX, _NO_VALUES = np.empty((0, 0)), np.empty(0, np.int64), np.empty(0)


@functools.cache
def _compiled():
    """The compiled kernels' module, imported on the first score (``import mdpsim`` loads no
    numba)."""
    from mdpsim.attacks import _kernels

    return _kernels


def _rows(posterior) -> np.ndarray:
    return posterior.rows if isinstance(posterior, TabulatedPosterior) else posterior


#: Rows of the expected error's distance gather at a time (1 MB at 1,000 float32 secrets)
_SCORE_ROWS = 256


def _expected_error_km(posterior, secrets: np.ndarray, domain) -> np.ndarray:
    """``sum_x post[u, x] d(truth_u, x)`` for every row u (Shokri et al.'s expected error)."""
    if isinstance(posterior, TabulatedPosterior):
        return posterior.risk_km[secrets, posterior.index]
    post = np.ascontiguousarray(posterior)  # rows: every reduction below is contiguous
    dist = domain.dist_xx32 if post.dtype == np.float32 else domain.dist_xx
    if len(post) <= _SCORE_ROWS:  # one block
        rows = dist[secrets].astype(post.dtype, copy=False)
        return np.einsum("ux,ux->u", post, rows).astype(float)
    out = np.empty(len(post))
    # in blocks of rows: the gathered distance rows stay in the cache (each row's sum is the
    # same whatever the block: 10,000 users x 1,000 secrets gathered 40 MB at once)
    for a in range(0, len(post), _SCORE_ROWS):
        rows = dist[secrets[a : a + _SCORE_ROWS]].astype(post.dtype, copy=False)
        out[a : a + _SCORE_ROWS] = np.einsum("ux,ux->u", post[a : a + _SCORE_ROWS], rows)
    return out
