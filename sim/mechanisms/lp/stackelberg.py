"""The optimal user strategy against a Bayes-optimal adversary (a Stackelberg game).

Shokri, Theodorakopoulos, Troncoso, Hubaux and Le Boudec ("Protecting location privacy:
optimal strategy against localization attacks", CCS 2012): the user commits to an obfuscation
``f(y|x)``; the adversary, who knows ``f`` and the public prior ``pi``, answers each output y
with the estimate ``e`` that minimises its expected error. The user's best commitment is the
linear program::

    maximise    sum_y z_y                                       (the adversary's expected error)
    subject to  z_y <= sum_x pi_x d_adv(e, x) f(y|x)           for every output y and estimate e
                sum_x pi_x sum_y f(y|x) d_q(x, y) <= Q          (expected quality loss, km)
                sum_y f(y|x) = 1,  f >= 0
                [PETS 2015] f(y|x) <= e^{eps d(x,x')} f(y|x')   for the chaining pairs, every y

with one value ``z_y`` per output (at the optimum, the adversary's expected error on y times
Pr[y]). Estimates range over the secrets X. The quality metric ``d_q`` and the adversary's error
metric ``d_adv`` are chosen apart (:data:`METRIC_CHOICES`); the mDP constraints use the domain's
own metric (that is what the release is verified against).

Solved by HiGHS (``mdpsim.mechanisms.lp.highs``) by generation, with or without mDP
constraints (:func:`_by_outputs`, docs/games.md). Adversary rows: of the ``N K`` rows (``N``
nonzeros each) only the few estimates the adversary is indifferent between bind per output,
so an output enters with two and each round adds every output's best response to the current
``f`` where it beats the model's ``z_y``; the dual simplex continues from the last basis.
Outputs: the optimum uses few, so the model starts with one and adds those whose exact
pricing says they can raise the objective. mDP rows: an output enters without its ``2 P``
rows, and each round adds those its ``f`` violates. It stops when no row is violated, no best
response beats ``z_y`` and no output outside the model can raise the objective: the
objective is then the optimum, equal to :func:`adversary_error_km` of the matrix.

No LP at all when ``Q`` is at least the loss of the best single output
(:func:`constant_optimum`): reporting that output always leaves the adversary the prior's
cap, which no obfuscation exceeds, and it is eps-mDP for every eps (all rows equal).

Guarantees (docs/games.md): ``make("stackelberg", epsilon=..., quality_km=...)`` is eps-mDP
(the LP is solved at ``eps (1 - margin)``, repaired and verified exactly like the optimal LP,
``repair.release_verified``). Without the mDP constraints the optimum is NOT an mDP mechanism
(its matrix has zeros: infinite eps); :class:`UnconstrainedStackelberg` releases it with the
guarantee kind ``"none"``, which no privacy filter can charge (a run refuses it before the
first tick), so it is a reference point (the frontier, the attack harness), never a release
with a claim.
"""

from __future__ import annotations

import dataclasses
import time
from typing import ClassVar

import numpy as np
from scipy import sparse

from mdpsim._core.validation import check_choice, check_margin, check_scalar
from mdpsim.errors import InputError, SolverError
from mdpsim.geo.domain import lp_distances
from mdpsim.mechanisms.base import Mechanism, register
from mdpsim.mechanisms.lp.highs import HighsLP, HighsOptions, HighsSettings
from mdpsim.mechanisms.lp.repair import MAX_MARGIN, SIDES, release_verified
from mdpsim.mechanisms.lp.solver import (
    DUAL_SIMPLEX,
    FEASIBILITY_TOL,
    directed_constraints,
    mdp_rows,
    simplex_options,
)
from mdpsim.privacy.guarantees import NoGuarantee
from mdpsim.privacy.verifier import verify

#: Quality / adversary metrics: the domain's own, road km, lp km from coordinates, or 0/1.
METRIC_CHOICES = ("domain", "road", "l1", "l2", "linf", "zero_one")
_CUT_RTOL = 1e-9  # a best response beats z_y by more than this (relative to the prior's cap)
_MAX_ROUNDS = 500


def metric_km(domain, metric: str, *, outputs: bool) -> np.ndarray:
    """Distances in km (``zero_one``: 0 at the same place, else 1) from every secret to every
    output (``outputs=True``, N x K) or to every secret (N x N) under ``metric``."""
    check_metric(metric, "metric")
    if metric == "domain" or metric == domain.metric:
        return domain.dist_xy if outputs else domain.dist_xx
    if metric == "road":
        raise InputError(
            f"metric='road' needs a road domain; this domain's metric is {domain.metric!r} "
            "(use 'domain', 'l1', 'l2', 'linf' or 'zero_one')"
        )
    if metric == "zero_one":
        if outputs:
            return (domain.y_in_x[None, :] != np.arange(domain.n_x)[:, None]).astype(float)
        return 1.0 - np.eye(domain.n_x)
    other = domain.y_xy if outputs else domain.x_xy
    return lp_distances(domain.x_xy, other, metric)


def check_metric(metric, name: str) -> str:
    """One of :data:`METRIC_CHOICES`."""
    return check_choice(metric, name, METRIC_CHOICES)


def adversary_error_km(matrix: np.ndarray, prior: np.ndarray, dist_est: np.ndarray) -> float:
    """The Bayes-optimal adversary's expected error, exactly: ``sum_y min_e sum_x pi_x
    Z[x,y] d(e, x)`` with ``dist_est[e, x]`` the error of estimate e when the secret is x."""
    joint = np.asarray(prior, dtype=float)[:, None] * np.asarray(matrix, dtype=float)
    return float((np.asarray(dist_est, dtype=float) @ joint).min(axis=0).sum())


def prior_cap_km(prior: np.ndarray, dist_est: np.ndarray) -> float:
    """The adversary's error from the prior alone (one estimate for every output): no
    obfuscation can leave it more."""
    return float((np.asarray(dist_est) @ np.asarray(prior)).min())


@dataclasses.dataclass(frozen=True)
class StackelbergSolution:
    """The LP optimum (before any repair).

    ``adversary_error_km`` (the LP objective), ``quality_dual`` (km of adversary error per km
    of extra quality loss: a supergradient of the optimum in Q), ``status``, ``rounds``
    (solves), ``iterations`` (simplex), ``seconds``, ``adversary_rows`` (generated, of ``N K``),
    ``mdp_rows`` (mDP constraints in the model).
    """

    adversary_error_km: float
    quality_dual: float
    status: str
    rounds: int
    iterations: int
    seconds: float
    adversary_rows: int
    mdp_rows: int


def constant_optimum(
    prior: np.ndarray, quality_cost_km: np.ndarray, dist_est: np.ndarray, quality_km: float
) -> tuple[np.ndarray, StackelbergSolution] | None:
    """The optimum when ``quality_km`` allows one output for everyone, else ``None``.

    The adversary's error never exceeds the prior's cap (it may ignore the report), and the
    mechanism that always reports the output of least expected loss ``L*`` leaves it exactly
    the cap; so for ``Q >= L*`` that mechanism is optimal, with quality dual 0 (the optimum
    is flat from ``L*`` on: 0 is a supergradient there).
    """
    start = time.perf_counter()
    pi = np.asarray(prior, dtype=np.float64)
    losses = pi @ np.asarray(quality_cost_km, dtype=np.float64)  # (K,): one output for all
    best = int(np.argmin(losses))
    if quality_km < losses[best]:
        return None
    Z = np.zeros(np.shape(quality_cost_km))
    Z[:, best] = 1.0
    cap = prior_cap_km(pi, np.asarray(dist_est, dtype=np.float64))
    sol = StackelbergSolution(adversary_error_km=cap, quality_dual=0.0, status="Optimal",
                              rounds=0, iterations=0, seconds=time.perf_counter() - start,
                              adversary_rows=0, mdp_rows=0)  # fmt: skip
    return Z, sol


def solve_stackelberg(
    prior: np.ndarray,
    quality_cost_km: np.ndarray,
    dist_est: np.ndarray,
    quality_km: float,
    *,
    options: HighsOptions | None = None,
) -> tuple[np.ndarray, StackelbergSolution]:
    """The optimal obfuscation without mDP constraints: the N x K matrix and its record.

    ``quality_cost_km`` (N x K) is ``d_q(x, y)``, ``dist_est`` (N x N) is ``d_adv(e, x)``.
    Outputs and adversary rows by generation, as :func:`solve_stackelberg_mdp` with no mDP
    row (the cone is every ``f >= 0``; the rays are the point masses). Raises
    :class:`InputError` if no mechanism meets ``quality_km``, :class:`SolverError` if HiGHS
    stops short of optimality or the time limit.
    """
    n = np.shape(quality_cost_km)[0]
    none = np.zeros(0, dtype=np.int64)
    return _by_outputs(prior, quality_cost_km, dist_est, quality_km, (none, none, np.zeros(0)),
                       np.eye(n), options, what="mechanism")  # fmt: skip


class _StackelbergBase(HighsSettings):
    """What both forms share: the metrics, the quality bound and the LP's settings."""

    def _init_common(self, quality_km, quality_metric, adversary_metric, time_limit_s, threads):
        if quality_km is None:
            raise InputError("quality_km is required: the bound on the expected quality loss (km)")
        self.quality_km = check_scalar(quality_km, "quality_km", min=0, unit="km")
        self.quality_metric = check_metric(quality_metric, "quality_metric")
        self.adversary_metric = check_metric(adversary_metric, "adversary_metric")
        self._set_highs(time_limit_s, threads)

    def _metrics(self, domain) -> tuple[np.ndarray, np.ndarray]:
        return (
            metric_km(domain, self.quality_metric, outputs=True),
            metric_km(domain, self.adversary_metric, outputs=False),
        )

    def _info(self, domain, matrix, sol: StackelbergSolution) -> dict:
        cost, D = self._metrics(domain)
        return {
            "solver_status": sol.status,
            "lp_adversary_error_km": sol.adversary_error_km,
            "adversary_error_km": adversary_error_km(matrix, domain.prior, D),
            "quality_loss_km": float(domain.prior @ np.einsum("ik,ik->i", matrix, cost)),
            "quality_dual": sol.quality_dual,
            "rounds": sol.rounds,
            "iterations": sol.iterations,
            "solve_seconds": sol.seconds,
            "adversary_rows": sol.adversary_rows,
            "mdp_rows": sol.mdp_rows,
        }


@register("stackelberg")
class Stackelberg(_StackelbergBase, Mechanism):
    """The eps-mDP obfuscation that leaves the Bayes-optimal adversary the most expected error
    at an expected quality loss of at most ``quality_km`` (Shokri, PETS 2015; module docstring).

    Parameters
    ----------
    epsilon
        Budget per km (the mDP constraints, in the domain's metric).
    quality_km
        Bound on the expected quality loss (km; a probability for ``zero_one``).
    quality_metric, adversary_metric
        One of :data:`METRIC_CHOICES` each (default ``"domain"``: the domain's metric).
    margin, side
        Release as the optimal LP: solved at ``epsilon (1 - margin)``, repaired on ``side``,
        verified exactly at ``epsilon`` (``repair.release_verified``). The repair can move the
        quality loss by about the largest change of an entry; ``info_`` holds the released
        matrix's own loss and adversary error.
    time_limit_s, threads
        Seconds for each LP solve (hitting it raises ``SolverError``), HiGHS threads.
    """

    conformance_params: ClassVar[dict] = {"quality_km": 100.0}

    def __init__(
        self,
        epsilon: float,
        *,
        quality_km: float | None = None,
        quality_metric: str = "domain",
        adversary_metric: str = "domain",
        margin: float = 1e-3,
        side: str = "upper",
        time_limit_s: float | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(epsilon)
        self._init_common(quality_km, quality_metric, adversary_metric, time_limit_s, threads)
        self.margin = check_margin(margin, MAX_MARGIN)
        self.side = check_choice(side, "side", SIDES)

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        cost, D = self._metrics(domain)
        pairs = domain.constraint_pairs
        pair_dist = domain.dist_xx[pairs[:, 0], pairs[:, 1]]
        last: list[StackelbergSolution] = []

        def solve_at(theta: float) -> np.ndarray:
            Z, sol = solve_stackelberg_mdp(
                domain.prior,
                cost,
                D,
                self.quality_km,
                pairs=pairs,
                pair_dist_km=pair_dist,
                epsilon=self.epsilon * (1 - theta),
                options=self._options(),
            )
            last.append(sol)
            return Z

        released = release_verified(
            solve_at(self.margin),
            domain.dist_xx,
            self.epsilon,
            margin=self.margin,
            pairs=pairs,
            side=self.side,
            resolve=solve_at,
            who="stackelberg LP",
        )
        info = self._info(domain, released.matrix, last[-1])
        info.update(margin_used=released.margin, repair_max_change=released.max_change)
        return released.matrix, info


class UnconstrainedStackelberg(_StackelbergBase, Mechanism):
    """The optimum with NO mDP constraint (Shokri et al., CCS 2012): the frontier's reference.

    Not registered and not an mDP mechanism: its ``guarantee`` is of kind ``"none"``, which no
    privacy filter charges (``filters.charge_of`` refuses it, so a run with a budget refuses
    it before the first tick). ``info_["measured_epsilon_per_km"]`` is the exact verifier's
    smallest eps of the matrix (usually ``inf``: the optimum has zeros), for reading only.
    Parameters as :class:`Stackelberg`, without ``epsilon``, ``margin`` and ``side``.
    """

    def __init__(
        self,
        *,
        quality_km: float | None = None,
        quality_metric: str = "domain",
        adversary_metric: str = "domain",
        time_limit_s: float | None = None,
        threads: int | None = None,
    ) -> None:
        self._init_common(quality_km, quality_metric, adversary_metric, time_limit_s, threads)

    @property
    def guarantee(self) -> NoGuarantee:
        """No mDP guarantee (kind ``"none"``)."""
        return NoGuarantee(note="optimal against the Bayes adversary only")

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        cost, D = self._metrics(domain)
        Z, sol = solve_stackelberg(domain.prior, cost, D, self.quality_km, options=self._options())
        info = self._info(domain, Z, sol)
        info["measured_epsilon_per_km"] = verify(
            Z, domain.dist_xx, 1.0, pairs=domain.verified_pairs
        ).smallest_epsilon
        return Z, info


ELASTIC_PENALTY = 1e4  # per km of quality loss above Q while the outputs in the model are few


def solve_stackelberg_mdp(
    prior: np.ndarray,
    quality_cost_km: np.ndarray,
    dist_est: np.ndarray,
    quality_km: float,
    *,
    pairs: np.ndarray,
    pair_dist_km: np.ndarray,
    epsilon: float,
    options: HighsOptions | None = None,
) -> tuple[np.ndarray, StackelbergSolution]:
    """:func:`solve_stackelberg` with eps-mDP constraints, by output generation (docs/games.md).

    A restricted model holds a subset S of the outputs (their ``f``, ``z``, adversary rows and
    the mDP rows their ``f`` has violated). Outputs are coupled only through the row sums
    (duals ``u``) and the quality row (dual ``lam``): output y improves the optimum iff ``max
    {min_e a_e . f - (u + lam pi c_y) . f : f in C, sum f = 1} > 0`` (``a_e = pi D[e]``, C the mDP
    cone). Laplace rays (members of C) price every output at once; only when none is
    positive is each output priced exactly (that LP in dual form: outputs differ in its row
    bounds only, so the dual simplex restarts warm). While S is small the quality row is
    elastic (penalty :data:`ELASTIC_PENALTY` per km); a positive slack at the end means no
    mechanism meets ``quality_km``.
    """
    from mdpsim.mechanisms.lp.outputs import laplace_rays

    n = np.shape(quality_cost_km)[0]
    constraints = directed_constraints(pairs, pair_dist_km, epsilon)
    rays = laplace_rays(np.asarray(pairs, dtype=np.int64), pair_dist_km, n, epsilon)
    return _by_outputs(prior, quality_cost_km, dist_est, quality_km, constraints, rays, options,
                       what=f"{epsilon:g}/km-mDP mechanism")  # fmt: skip


def _by_outputs(prior, quality_cost_km, dist_est, quality_km: float, constraints, rays,
                options: HighsOptions | None, *, what: str):  # fmt: skip
    """Output generation (docs/games.md) over the mDP rows ``constraints = (src, dst, gain)``
    (none: no mDP constraint), priced first by ``rays`` (members of the cone, N x R)."""
    constant = constant_optimum(prior, quality_cost_km, dist_est, quality_km)
    if constant is not None:
        return constant
    start = time.perf_counter()
    pi = np.asarray(prior, dtype=np.float64)
    cost = np.asarray(quality_cost_km, dtype=np.float64)
    D = np.asarray(dist_est, dtype=np.float64)
    n, k = cost.shape
    opts = simplex_options(options, simplex_strategy=DUAL_SIMPLEX)
    src, dst, gain = constraints
    master = _OutputMaster(pi, cost, D, quality_km, src, dst, gain, opts)
    pricer = _ExactPricer(pi, D, src, dst, gain, opts)
    ray_adversary = (D @ (pi[:, None] * rays)).min(axis=0)  # (rays,): min_e a_e . r
    tol = _CUT_RTOL * max(prior_cap_km(pi, D), 1e-12)
    first = int(np.argmin((pi[:, None] * cost).sum(axis=0)))
    master.add_outputs([first])
    while True:
        if opts.time_limit_s is not None:
            left = opts.time_limit_s - (time.perf_counter() - start)
            if left <= 0:
                raise SolverError(
                    f"stackelberg LP: time limit {opts.time_limit_s:g} s reached after "
                    f"{master.rounds} solves"
                )
            master.lp.set_option("time_limit", left)
            pricer.lp.set_option("time_limit", left)
        sol = master.converge(tol)
        u, lam = sol.row_dual[:n], sol.row_dual[n]
        outside = np.setdiff1d(np.arange(k), master.outputs)
        if not len(outside):
            break
        b = u[:, None] + lam * pi[:, None] * cost[:, outside]  # (N, outside)
        value = ray_adversary[None, :] - b.T @ rays  # (outside, rays)
        best = value.max(axis=1)
        if not np.any(best > tol):
            best = np.array([pricer.value(b[:, j]) for j in range(len(outside))])
        order = np.argsort(-best)[: max(5, len(master.outputs) // 4)]
        order = order[best[order] > tol]
        if not len(order):
            break
        master.add_outputs(outside[order])
    slack = master.slack(sol)
    if slack > FEASIBILITY_TOL:
        raise InputError(
            f"quality_km={quality_km:g}: no {what} has an expected "
            f"quality loss this low (the least is about {quality_km + slack:.6g} km)"
        )
    Z = master.matrix(sol)
    result = StackelbergSolution(
        adversary_error_km=float(sol.objective + ELASTIC_PENALTY * slack),
        quality_dual=float(abs(lam)),
        status=sol.status,
        rounds=master.rounds,
        iterations=master.iterations + pricer.iterations,
        seconds=time.perf_counter() - start,
        adversary_rows=int(master.have.sum()),
        mdp_rows=master.n_mdp_rows,
    )
    return Z, result


class _OutputMaster:
    """The restricted model over outputs S: per output a block of ``N + 1`` columns
    (``f(., y)``, ``z_y``) with its generated adversary rows and mDP rows; rows ``0..N-1``
    are the row sums, row ``N`` the quality bound (with an elastic slack column, the model's
    first)."""

    def __init__(self, pi, cost, D, quality_km, src, dst, gain, opts: HighsOptions) -> None:
        self.pi, self.cost, self.D = pi, cost, D
        self.src, self.dst, self.gain = src, dst, gain
        n, k = cost.shape
        A = sparse.csc_array(np.r_[np.zeros(n), -1.0][:, None])
        self.lp = HighsLP(
            np.array([-ELASTIC_PENALTY]),
            A,
            np.r_[np.ones(n), -np.inf],
            np.r_[np.ones(n), float(quality_km)],
            sense="max",
            options=opts,
            name="stackelberg LP",
        )
        self.outputs = np.zeros(0, dtype=np.int64)
        self.have = np.zeros((k, n), dtype=bool)
        self.mdp_in: list[np.ndarray] = []  # per slot: which of its 2P mDP rows are in
        self.rounds = self.iterations = 0

    def column(self, slot: int) -> int:
        return 1 + slot * (self.cost.shape[0] + 1)

    def add_outputs(self, outputs) -> None:
        n = self.cost.shape[0]
        for y in np.asarray(outputs, dtype=np.int64):
            slot = len(self.outputs)
            rows = np.r_[np.arange(n), np.full(n, n)]
            vals = np.r_[np.ones(n), self.pi * self.cost[:, y]]
            cols = np.r_[np.arange(n), np.arange(n)]
            block = sparse.csc_array((vals, (rows, cols)), shape=(self.lp.shape[0], n + 1))
            self.lp.add_cols(np.r_[np.zeros(n), 1.0], block, lower=np.r_[np.zeros(n), -np.inf])
            self.outputs = np.r_[self.outputs, y]
            self.mdp_in.append(np.zeros(len(self.src), dtype=bool))
            near = int(np.argmin(self.cost[:, y]))
            prior_best = int(np.argmin(self.D @ self.pi))
            self._adversary_rows(np.array([slot, slot]), np.array([near, prior_best]))

    def _adversary_rows(self, slots, estimates) -> None:
        n = self.cost.shape[0]
        keep = ~self.have[self.outputs[slots], estimates]
        slots, estimates = slots[keep], estimates[keep]
        pairs = np.unique(np.c_[slots, estimates], axis=0)
        if not len(pairs):
            return
        slots, estimates = pairs[:, 0], pairs[:, 1]
        m = len(slots)
        base = np.array([self.column(s) for s in slots])
        data = np.c_[-(self.pi[None, :] * self.D[estimates]), np.ones(m)]
        indices = base[:, None] + np.arange(n + 1)[None, :]
        rows = sparse.csr_array(
            (data.ravel(), indices.ravel(), np.arange(m + 1) * (n + 1)),
            shape=(m, self.lp.shape[1]),
        )
        self.lp.add_rows(np.full(m, -np.inf), np.zeros(m), rows)
        self.have[self.outputs[slots], estimates] = True

    def _add_violated_mdp_rows(self, F: np.ndarray) -> int:
        """Add every mDP row of the model's outputs that ``F`` violates; how many."""
        added = 0
        for slot in range(len(self.outputs)):
            f = F[:, slot]
            bad = (f[self.src] - self.gain * f[self.dst] > FEASIBILITY_TOL) & ~self.mdp_in[slot]
            rows = np.flatnonzero(bad)
            if not len(rows):
                continue
            m = len(rows)
            col = self.column(slot)
            block = mdp_rows(col + self.src[rows], col + self.dst[rows], self.gain[rows],
                             self.lp.shape[1])  # fmt: skip
            self.lp.add_rows(np.full(m, -np.inf), np.zeros(m), block)
            self.mdp_in[slot][rows] = True
            added += m
        return added

    @property
    def n_mdp_rows(self) -> int:
        return int(sum(m.sum() for m in self.mdp_in))

    def converge(self, tol: float):
        """Solve, adding each output's best response where it beats ``z_y`` and the mDP rows
        its ``f`` violates, until neither is left."""
        while True:
            sol = self.lp.solve()
            self.rounds += 1
            self.iterations += sol.iterations
            F, z = self._blocks(sol)
            added = self._add_violated_mdp_rows(F)
            risk = self.D @ (self.pi[:, None] * F)
            best = risk.argmin(axis=0)
            beaten = np.flatnonzero(z - risk[best, np.arange(len(z))] > tol)
            beaten = beaten[~self.have[self.outputs[beaten], best[beaten]]]
            if not len(beaten) and not added:
                return sol
            self._adversary_rows(beaten, best[beaten])

    def _blocks(self, sol) -> tuple[np.ndarray, np.ndarray]:
        n = self.cost.shape[0]
        blocks = sol.x[1:].reshape(len(self.outputs), n + 1)
        return np.maximum(blocks[:, :n].T, 0.0), blocks[:, n]

    def slack(self, sol) -> float:
        return float(max(sol.x[0], 0.0))

    def matrix(self, sol) -> np.ndarray:
        F, _ = self._blocks(sol)
        Z = np.zeros(self.cost.shape)
        Z[:, self.outputs] = F
        return Z / Z.sum(axis=1, keepdims=True)


class _ExactPricer:
    """``max {min_e a_e . f - b . f : f in C, sum f = 1}`` for any ``b``, in dual form::

        minimise mu  s.t.  sum_e w_e = 1;  mu - sum_e w_e a_e[x] + (M^T v)_x >= -b_x  (all x)

    with ``w, v >= 0``; ``b`` enters the row bounds only, so each solve restarts warm."""

    def __init__(self, pi, D, src, dst, gain, opts: HighsOptions) -> None:
        n = len(pi)
        m = len(src)
        a = (pi[None, :] * D).T  # a[x, e]
        rows = np.r_[np.zeros(n, dtype=np.int64), 1 + np.repeat(np.arange(n), n)]
        cols = np.r_[np.arange(n), np.tile(np.arange(n), n)]
        vals = np.r_[np.ones(n), -a.ravel()]
        w_block = sparse.csc_array((vals, (rows, cols)), shape=(n + 1, n))
        v_block = mdp_rows(1 + src, 1 + dst, gain, n + 1).T  # M^T
        mu = sparse.csc_array(np.r_[0.0, np.ones(n)][:, None])
        A = sparse.hstack([w_block, v_block, mu], format="csc")
        c = np.r_[np.zeros(n + m), 1.0]
        self.n = n
        self.lp = HighsLP(
            c,
            A,
            np.r_[1.0, np.zeros(n)],
            np.r_[1.0, np.full(n, np.inf)],
            col_lower=np.r_[np.zeros(n + m), -np.inf],
            options=opts,
            name="stackelberg pricing",
        )
        self.iterations = 0

    def value(self, b: np.ndarray) -> float:
        self.lp.set_row_bounds(np.r_[1.0, -b], np.r_[1.0, np.full(self.n, np.inf)])
        sol = self.lp.solve()
        self.iterations += sol.iterations
        return sol.objective
