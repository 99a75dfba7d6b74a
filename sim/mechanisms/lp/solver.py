"""The optimal eps-mDP LP's solver: output and constraint generation on its dual (HiGHS).

Variables ``Z[i,k]``; minimise ``sum_ik cost[i,k] Z[i,k]`` with ``cost = pi_i c(x_i, y_k)``,
subject to row sums 1, ``Z >= 0`` and, for each constraint pair ``(i, j)`` of the domain
(pairs whose constraints chain to all others, docs/design.md §1) and each output k, both
``Z[i,k] <= e^{eps d} Z[j,k]`` and ``Z[j,k] <= e^{eps d} Z[i,k]`` (``2 P K`` constraints).

Solved through its dual by output and constraint generation (docs/lp.md): a restricted dual
over a subset S of the outputs has one row per ``Z[i,k]`` (k in S), one free column ``u_i``
per row sum and one column ``f >= 0`` per mDP constraint in the model; ``Z`` is read off its
row duals. Few outputs carry mass and only ~N constraints per used output bind, so the model
starts with one output and no constraint. Inner loop: add the constraints the current ``Z``
breaks (chosen by the Lipschitz envelope of each column: the edge of the path that attains
it) and re-solve warm (primal simplex from the last basis) until no constraint of the FULL
set is broken for the outputs in S. Outer loop: price the outputs outside S against the
row-sum duals (cheap Laplace rays first, then exactly: ``outputs.ConePricer``) and add
the most attractive ones; stop when none has a negative reduced cost. The result is then
optimal for the full LP to the same tolerance a single HiGHS call on it would meet.

``release_optimal`` is the release of every mechanism built on it (``lp``, ``lp_a``,
``lp_medoids``): solve at ``eps (1 - margin)``, repair, verify exactly at ``eps``
(``repair.release_verified``). The mechanisms live in ``optimal.py`` and ``medoids.py``; the
coarse-to-fine warm start (``coarse_to_fine.py``) builds on this module too, which is why it is
a module of its own.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
from scipy import sparse

from mdpsim.errors import SolverError
from mdpsim.mechanisms.lp.highs import HighsLP, HighsOptions
from mdpsim.mechanisms.lp.outputs import ConePricer, laplace_rays, tight_constraints
from mdpsim.mechanisms.lp.repair import VerifiedRelease, envelope_parents, release_verified

MAX_LOG_GAIN = float(np.log(1e9))
PRIMAL_SIMPLEX = 4  # HiGHS simplex_strategy: added columns keep the basis primal feasible
DUAL_SIMPLEX = 1  # ... but after a seeded start or added outputs the dual simplex is faster
FEASIBILITY_TOL = 1e-9  # HiGHS's default 1e-7 left 4e-7 relative error at gains ~1e6 (docs)
_COLUMN_CHUNK = 256  # outputs per block of the violation check (bounded memory)
_OUTPUTS_PER_ROUND = 5  # at least this many outputs added per pricing round (docs/lp.md)
RAY_BATCH = 50
_GROWTH = 4  # ... or a quarter of the outputs already in the model


@dataclasses.dataclass(frozen=True)
class OptimalSolution:
    """The LP optimum found by constraint generation (NOT repaired).

    ``objective`` (km, the dual's value, equal to the primal optimum), ``status`` (HiGHS
    model status of the last solve), ``iterations`` (simplex, all rounds), ``rounds``
    (solves of the restricted model), ``seconds`` (wall time), ``generated`` (mDP constraints
    in the final model, of ``full`` in the whole LP), ``outputs`` (outputs in the final
    model), ``priced`` (exact pricing LPs solved) and ``binding`` (``(M, 3)`` rows
    ``(i, j, k)``: the constraints ``Z[i,k] <= e^{eps d} Z[j,k]`` with a positive dual at the
    optimum; a warm start), ``row_duals`` (the ``N`` duals ``u`` of the row sums at the
    optimum; with the pricing they give the Lagrangian lower bound of ``lp_multilevel``).
    """

    objective: float
    status: str
    iterations: int
    rounds: int
    seconds: float
    generated: int
    full: int
    outputs: int
    priced: int
    binding: np.ndarray
    row_duals: np.ndarray


def directed_constraints(pairs: np.ndarray, pair_dist_km: np.ndarray, epsilon: float):
    """Both directions of each pair: ``(src, dst, gain)`` for ``Z[src,k] <= gain Z[dst,k]``.

    Pairs with ``eps d > MAX_LOG_GAIN`` are left out: their gain ``e^{eps d}`` would pass
    HiGHS's largest matrix value, and their constraints bind only on probabilities below
    ``e^{-MAX_LOG_GAIN}`` (1e-9, the solver's own tolerance). The release step restores them
    exactly: the envelope repair runs over every chaining pair and the exact verifier checks.
    """
    pair_dist_km = np.asarray(pair_dist_km, dtype=np.float64)
    kept = epsilon * pair_dist_km <= MAX_LOG_GAIN
    pairs = np.asarray(pairs, dtype=np.int64)[kept]
    gain = np.exp(epsilon * pair_dist_km[kept])
    src = np.concatenate([pairs[:, 0], pairs[:, 1]])
    dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
    return src, dst, np.concatenate([gain, gain])


def mdp_rows(src_cols, dst_cols, gain, n_cols: int) -> sparse.csr_array:
    """The mDP rows ``z[src_cols[r]] - gain[r] z[dst_cols[r]] <= 0`` of an LP over ``n_cols``
    columns, one row per entry (the one builder of the LP family's constraint rows)."""
    m = len(src_cols)
    rows = np.repeat(np.arange(m), 2)
    cols = np.column_stack([src_cols, dst_cols]).ravel()
    vals = np.column_stack([np.ones(m), -np.asarray(gain, dtype=float)]).ravel()
    return sparse.csr_array((vals, (rows, cols)), shape=(m, n_cols))


def simplex_options(options: HighsOptions | None, **extra) -> HighsOptions:
    """``options`` (default ``HighsOptions()``) for the simplex: feasibility tolerances
    ``FEASIBILITY_TOL`` where unset, HiGHS settings ``extra`` unless ``options.extra`` sets them
    (the optimal LP's and the Stackelberg LP's settings)."""
    opts = options or HighsOptions()
    return dataclasses.replace(
        opts,
        solver="simplex",
        primal_feasibility_tolerance=opts.primal_feasibility_tolerance or FEASIBILITY_TOL,
        dual_feasibility_tolerance=opts.dual_feasibility_tolerance or FEASIBILITY_TOL,
        extra={**extra, **opts.extra},
    )


def solve_optimal(
    weighted_cost: np.ndarray,
    pairs: np.ndarray,
    pair_dist_km: np.ndarray,
    epsilon: float,
    *,
    options: HighsOptions | None = None,
    warm: np.ndarray | None = None,
    dual_restarts: bool = False,
    start_outputs: np.ndarray | None = None,
    max_outputs: int | None = None,
    ray_dist_km: np.ndarray | None = None,
) -> tuple[np.ndarray, OptimalSolution]:
    """The raw LP optimum (NOT repaired, only eps-mDP up to the solver's tolerance).

    ``weighted_cost`` is N x K, ``pairs`` (P, 2) chaining pairs with distances
    ``pair_dist_km``. Solved to feasibility tolerances ``FEASIBILITY_TOL`` unless
    ``options`` sets them. ``warm`` (``OptimalSolution.binding`` of an earlier solve on the same
    domain, e.g. at another epsilon) seeds the model with those constraints and their outputs.
    ``options``: ``time_limit_s`` bounds the whole solve, ``threads`` is passed on.
    ``dual_restarts``: when the model is seeded (``warm``), its first solve and the solves after
    added outputs by the dual simplex (faster for the exact LP's subset-seeded solves, slower
    for cold solves and for ``lp_medoids``' few outputs at N = 2,000; docs/lp.md).
    ``start_outputs``: outputs in the first model (besides those of ``warm``).
    ``max_outputs``: stop adding outputs once the model holds that many, and price by the
    Laplace rays only (no exact pricing): the result is then the optimum over the outputs in
    the model, a feasible mechanism but NOT the full LP's optimum (``lp_medoids``' priced
    outputs, docs/lp.md). ``ray_dist_km`` (N x K, km; with ``start_outputs`` and no
    output generation): every output outside the model also gets one column of FIXED
    shape, its Laplace ray ``w_k exp(-eps d(x_i, y_k))`` (eps-mDP over all pairs by the
    triangle inequality), ``w_k >= 0`` chosen by the LP (``lp_medoids``' Laplace outputs,
    docs/lp.md, "Laplace outputs"); the rays enter as rows of the dual when their reduced
    cost is negative. Returns the
    N x K matrix and the :class:`OptimalSolution`; raises ``SolverError`` if a solve is not
    optimal or the time limit passes.
    """
    start = time.perf_counter()
    cost = np.ascontiguousarray(weighted_cost, dtype=np.float64)
    n, k = cost.shape
    src, dst, gain = directed_constraints(pairs, pair_dist_km, epsilon)
    opts = simplex_options(options)
    tol = opts.dual_feasibility_tolerance or FEASIBILITY_TOL  # broken mDP constraint; rc < 0
    lookup = _ConstraintIndex(src, dst, n)
    model = _RestrictedDual(cost, src, dst, gain, opts)
    pricer = ConePricer(cost, src, dst, gain, dataclasses.replace(opts, time_limit_s=None))
    rays = laplace_rays(np.asarray(pairs, dtype=np.int64), pair_dist_km, n, epsilon)

    def time_left() -> float | None:
        if opts.time_limit_s is None:
            return None
        left = opts.time_limit_s - (time.perf_counter() - start)
        if left <= 0:
            raise SolverError(
                f"HiGHS stopped with model status 'Time limit reached' after {model.rounds} "
                f"solves ({opts.time_limit_s:g} s limit)"
            )
        return left

    con = np.zeros(0, dtype=np.int64)
    col = np.zeros(0, dtype=np.int64)
    if warm is not None and len(warm):
        warm = np.asarray(warm, dtype=np.int64)
        con = lookup.find(warm[:, 0], warm[:, 1])
        known = (con >= 0) & (warm[:, 2] >= 0) & (warm[:, 2] < k)
        con, col = con[known], warm[known, 2]
    extra = np.zeros(0, dtype=np.int64) if start_outputs is None else start_outputs
    first = np.unique(np.concatenate([col, np.asarray(extra, dtype=np.int64)]))
    if not len(first):
        first = np.array([int(np.argmin(cost.sum(axis=0)))])
    model.add_outputs(first)
    model.add_constraints(con, col)
    dual_restarts = dual_restarts and bool(len(con))  # only a seeded solve (docs/lp.md)
    model.dual_next = dual_restarts
    dropped = np.zeros(k, dtype=bool)  # each output leaves the model at most once
    rays_of = None if ray_dist_km is None else _LaplaceColumns(ray_dist_km, cost, epsilon)
    while True:
        Z_S, u = _converge(model, lookup, tol, time_left)
        if rays_of is not None:
            new = rays_of.attractive(u, model.outputs, model.ray_outputs, tol)
            if len(new):
                model.add_rays(new, rays_of.column(new), rays_of.cost(new))
                model.dual_next = True
                continue
            break
        outside = np.setdiff1d(np.arange(k), model.outputs)
        left = time_left()
        if left is not None:
            pricer.model.set_option("time_limit", left)
        room = None if max_outputs is None else max_outputs - len(model.outputs)
        if room is not None and room <= 0:
            break
        new, seeds = _attractive_outputs(
            cost, u, outside, rays, pricer, tol, len(model.outputs), exact=room is None
        )
        if room is not None:
            new, seeds = new[:room], seeds[:, :room]
        if not len(new):
            break
        idle = model.outputs[(Z_S.sum(axis=0) <= tol) & ~dropped[model.outputs]]
        dropped[model.drop_outputs(idle)] = True
        model.add_outputs(new)
        model.dual_next = dual_restarts  # added rows (and their seeds)
        for pos, out in enumerate(new):
            tight = tight_constraints(seeds[:, pos], src, dst, gain)
            model.add_constraints(tight, np.full(len(tight), out))

    Z = np.zeros((n, k))
    Z[:, model.outputs] = Z_S
    if rays_of is not None and len(model.ray_outputs):
        Z[:, model.ray_outputs] += rays_of.column(model.ray_outputs) * np.maximum(
            model.ray_weight, 0.0
        )
    bound = model.flow > 0
    result = OptimalSolution(
        objective=model.objective,
        status=model.status,
        iterations=model.iterations + pricer.iterations,
        rounds=model.rounds,
        seconds=time.perf_counter() - start,
        generated=len(model.con),
        full=len(src) * k,
        outputs=len(model.outputs),
        priced=pricer.solves,
        binding=np.column_stack([src[model.con[bound]], dst[model.con[bound]], model.col[bound]]),
        row_duals=u,
    )
    return Z, result


def _converge(model: _RestrictedDual, lookup, tol: float, time_left):
    """Re-solve the restricted dual, adding broken constraints, until none is broken.

    Returns ``Z`` over the model's outputs (N x S) and the row-sum duals ``u``. Candidates
    first come from the columns' Lipschitz envelopes (the last edge of each path that holds
    an entry up); when those are all in, every constraint is checked directly.
    """
    src, dst, gain = model.src, model.dst, model.gain
    while True:
        Z_S, u = model.solve(time_left())
        con, pos = _envelope_cuts(Z_S, src, dst, gain, lookup, tol)
        col = model.outputs[pos]
        new = ~model.has(con, col)
        con, col = con[new], col[new]
        if not len(con):
            con, pos = _violated(Z_S, src, dst, gain, model.in_model[:, model.outputs], tol)
            col = model.outputs[pos]
        if not len(con):
            return Z_S, u
        model.add_constraints(con, col)


def _attractive_outputs(
    cost, u, outside, rays, pricer: ConePricer, tol: float, n_in: int, *, exact: bool = True
):
    """The ``max(_OUTPUTS_PER_ROUND, n_in // _GROWTH)`` outputs (at most) with the most
    negative reduced cost, and a ray of C for each (N x len) that attains it.

    Laplace rays first (a negative one proves the output attractive); only when none is
    negative are the outputs priced exactly (unless ``exact`` is false). An empty answer with
    ``exact`` proves ``u`` dual feasible for every output outside the model.
    """
    if not len(outside):
        return outside, np.zeros((len(u), 0))
    rc = (cost[:, outside] - u[:, None]).T @ rays
    best = rc.argmin(axis=1)
    rc_best = rc[np.arange(len(outside)), best]
    seeds = rays[:, best]
    if exact and not np.any(rc_best < -tol):
        rc_best, seeds = pricer.reduced_costs(outside, u, tol)
    order = np.argsort(rc_best)[: max(_OUTPUTS_PER_ROUND, n_in // _GROWTH)]
    order = order[rc_best[order] < -tol]
    return outside[order], seeds[:, order]


class _RestrictedDual:
    """The dual of the optimal LP over a subset of outputs and constraints (one HiGHS model).

    Maximise ``sum u`` subject to, for each output k in the model and secret i,
    ``u_i - sum_{src=i} f + sum_{dst=i} gain f <= cost[i,k]`` (row ``slot(k) N + i``), with
    a column ``f >= 0`` per constraint in the model. The row duals are ``Z[i,k]``. Adding
    constraints adds columns (the basis stays primal feasible: primal simplex continues);
    adding outputs adds rows.
    """

    def __init__(self, cost, src, dst, gain, options: HighsOptions) -> None:
        self.cost, self.src, self.dst, self.gain = cost, src, dst, gain
        n, k = cost.shape
        opts = dataclasses.replace(
            options, extra={**options.extra, "simplex_strategy": PRIMAL_SIMPLEX}
        )
        self.lp = HighsLP(
            np.ones(n),
            sparse.csc_array((0, n)),
            -np.inf,
            0.0,
            col_lower=-np.inf,
            sense="max",
            options=opts,
        )
        self.outputs = np.zeros(0, dtype=np.int64)
        self.in_model = np.zeros((len(src), k), dtype=bool)
        self.con = np.zeros(0, dtype=np.int64)  # model columns n, n+1, ...: constraint, output
        self.col = np.zeros(0, dtype=np.int64)
        self.flow = np.zeros(0)
        self.rounds = self.iterations = 0
        self.objective, self.status = np.nan, ""
        self.dual_next = False  # the next solve by the dual simplex, then primal again
        self.ray_outputs = np.zeros(0, dtype=np.int64)  # rows after the outputs' rows
        self.ray_weight = np.zeros(0)

    def add_rays(self, outputs, columns: np.ndarray, costs: np.ndarray) -> None:
        """One dual row ``sum_i z[i] u_i <= cost`` per fixed-shape column ``z`` (N x m)."""
        rows = sparse.csr_array(columns.T)
        extra = sparse.csr_array((rows.shape[0], self.lp.shape[1] - rows.shape[1]))
        self.lp.add_rows(-np.inf, costs, sparse.hstack([rows, extra]))
        self.ray_outputs = np.concatenate([self.ray_outputs, outputs])

    def has(self, con, col) -> np.ndarray:
        return self.in_model[con, col]

    def add_outputs(self, outputs) -> None:
        outputs = np.asarray(outputs, dtype=np.int64)
        if len(self.ray_outputs):
            raise RuntimeError("outputs added after Laplace columns (their rows come first)")
        n = self.cost.shape[0]
        rows = sparse.csr_array(sparse.vstack([sparse.eye(n)] * len(outputs)))
        extra = sparse.csr_array((rows.shape[0], self.lp.shape[1] - n))
        self.lp.add_rows(-np.inf, self.cost[:, outputs].T.ravel(), sparse.hstack([rows, extra]))
        self.outputs = np.concatenate([self.outputs, outputs])

    def drop_outputs(self, outputs) -> np.ndarray:
        """Remove outputs (their rows and constraint columns); returns those removed."""
        outputs = np.asarray(outputs, dtype=np.int64)
        if not len(outputs):
            return outputs
        n = self.cost.shape[0]
        slots = np.flatnonzero(np.isin(self.outputs, outputs))
        cols = np.flatnonzero(np.isin(self.col, outputs))
        self.lp.delete(rows=(slots[:, None] * n + np.arange(n)).ravel(), cols=n + cols)
        keep = ~np.isin(self.col, outputs)
        self.in_model[self.con[~keep], self.col[~keep]] = False
        self.con, self.col = self.con[keep], self.col[keep]
        self.outputs = np.delete(self.outputs, slots)
        return outputs

    def add_constraints(self, con, col) -> None:
        """Add ``Z[src,k] <= gain Z[dst,k]`` for each (constraint, output) not yet in."""
        con, col = np.asarray(con, dtype=np.int64), np.asarray(col, dtype=np.int64)
        first = np.unique(con * self.cost.shape[1] + col, return_index=True)[1]
        con, col = con[first], col[first]
        new = ~self.in_model[con, col]
        con, col = con[new], col[new]
        m = len(con)
        if not m:
            return
        n = self.cost.shape[0]
        slot = np.empty(self.cost.shape[1], dtype=np.int64)
        slot[self.outputs] = np.arange(len(self.outputs))
        rows = np.column_stack([slot[col] * n + self.src[con], slot[col] * n + self.dst[con]])
        vals = np.column_stack([-np.ones(m), self.gain[con]]).ravel()
        block = sparse.csc_array(
            (vals, rows.ravel(), 2 * np.arange(m + 1)), shape=(self.lp.shape[0], m)
        )
        self.lp.add_cols(np.zeros(m), block)
        self.in_model[con, col] = True
        self.con = np.concatenate([self.con, con])
        self.col = np.concatenate([self.col, col])

    def solve(self, time_limit_s: float | None):
        """Solve warm; returns ``Z`` (N x outputs, row duals) and ``u`` (row-sum duals)."""
        if time_limit_s is not None:
            self.lp.set_option("time_limit", time_limit_s)
        self.lp.set_option("simplex_strategy", DUAL_SIMPLEX if self.dual_next else PRIMAL_SIMPLEX)
        self.dual_next = False
        try:
            sol = self.lp.solve()
        except SolverError as err:
            # Numerical trouble in the warm basis (gains up to 1e9): "Solve error", or
            # "Unbounded", which this dual cannot be (its primal holds Z[:, k] = 1 for one k).
            if not any(f"'{s}'" in str(err) for s in ("Solve error", "Unbounded", "Unknown")):
                raise
            self.lp.clear_basis()
            sol = self.lp.solve()
        n = self.cost.shape[0]
        self.rounds += 1
        self.iterations += sol.iterations
        self.objective, self.status, self.flow = sol.objective, sol.status, sol.x[n:]
        split = len(self.outputs) * n
        self.ray_weight = sol.row_dual[split:]
        return sol.row_dual[:split].reshape(len(self.outputs), n).T, sol.x[:n]


class _LaplaceColumns:
    """The Laplace ray of each output, ``exp(-eps d(x_i, y_k))``, and its cost and pricing."""

    def __init__(self, dist_km: np.ndarray, cost: np.ndarray, epsilon: float) -> None:
        self.dist, self.weighted, self.epsilon = dist_km, cost, epsilon

    def column(self, outputs) -> np.ndarray:
        return np.exp(-self.epsilon * self.dist[:, outputs])

    def cost(self, outputs) -> np.ndarray:
        return np.einsum("ik,ik->k", self.weighted[:, outputs], self.column(outputs))

    def attractive(self, u, free, taken, tol: float) -> np.ndarray:
        """Outputs (not free, not yet in) whose ray has a reduced cost below ``-tol``."""
        out = np.setdiff1d(np.arange(self.dist.shape[1]), np.concatenate([free, taken]))
        rc = np.empty(len(out))
        for start in range(0, len(out), _COLUMN_CHUNK):
            block = out[start : start + _COLUMN_CHUNK]
            rc[start : start + len(block)] = np.einsum(
                "ik,ik->k", self.weighted[:, block] - u[:, None], self.column(block)
            )
        order = np.argsort(rc)[:RAY_BATCH]
        return np.sort(out[order[rc[order] < -tol]])


class _ConstraintIndex:
    """Position of the directed constraint ``(i, j)`` in ``src``/``dst`` (-1 if absent)."""

    def __init__(self, src: np.ndarray, dst: np.ndarray, n: int) -> None:
        self.n = n
        keys = src * n + dst
        self.order = np.argsort(keys)
        self.keys = keys[self.order]

    def find(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        if not len(self.keys):
            return np.full(len(i), -1, dtype=np.int64)
        keys = np.asarray(i, dtype=np.int64) * self.n + np.asarray(j, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[pos] == keys, self.order[pos], -1)


def _envelope_cuts(Z, src, dst, gain, lookup: _ConstraintIndex, tol: float):
    """Constraints on the paths that attain each column's upper envelope where it passes Z.

    Where ``U[i,k] > Z[i,k] + tol`` and the envelope comes from neighbour j, the constraint
    ``Z[j,k] <= e^{eps d} Z[i,k]`` is the one that holds ``Z[i,k]`` up. Returns the
    constraint indices and their outputs.
    """
    half = len(src) // 2  # each pair twice: (a, b) in the first half, (b, a) in the second
    upper, parent = envelope_parents(
        np.maximum(Z, 0.0), src[:half], dst[:half], np.log(gain[:half])
    )
    i, col = np.nonzero((upper > Z + tol) & (parent >= 0))
    con = lookup.find(parent[i, col], i)
    return con[con >= 0], col[con >= 0]


def _violated(Z, src, dst, gain, in_model, tol: float):
    """Every constraint not yet in the model that ``Z`` breaks by more than ``tol``."""
    cons, cols = [], []
    for start in range(0, Z.shape[1], _COLUMN_CHUNK):
        block = slice(start, start + _COLUMN_CHUNK)
        excess = Z[src, block] - gain[:, None] * Z[dst, block]
        con, col = np.nonzero((excess > tol) & ~in_model[:, block])
        cons.append(con)
        cols.append(col + start)
    return np.concatenate(cons), np.concatenate(cols)


def release_optimal(
    weighted_cost: np.ndarray,
    dist_xx: np.ndarray,
    pairs: np.ndarray,
    epsilon: float,
    *,
    margin: float,
    side: str = "upper",
    options: HighsOptions | None = None,
    warm: np.ndarray | None = None,
    dual_restarts: bool = False,
    start_outputs: np.ndarray | None = None,
    max_outputs: int | None = None,
    ray_dist_km: np.ndarray | None = None,
) -> tuple[VerifiedRelease, OptimalSolution]:
    """Solve at ``eps (1 - margin)``, then :func:`~mdpsim.mechanisms.lp.repair.release_verified`
    (repair, verify at ``eps``; on failure re-solve at the next margin, seeded with the
    constraints that bound before). ``options``, ``warm``, ``dual_restarts``,
    ``start_outputs``, ``max_outputs``: as in :func:`solve_optimal`.

    ``pairs`` must chain (``Domain.constraint_pairs``). Returns the verified release and the
    last LP solution.
    """
    pair_dist = dist_xx[pairs[:, 0], pairs[:, 1]]
    last: list[OptimalSolution] = []

    def solve_at(theta: float) -> np.ndarray:
        seed = last[-1].binding if last else warm
        raw, sol = solve_optimal(
            weighted_cost,
            pairs,
            pair_dist,
            epsilon * (1 - theta),
            options=options,
            warm=seed,
            dual_restarts=dual_restarts,
            start_outputs=start_outputs,
            max_outputs=max_outputs,
            ray_dist_km=ray_dist_km,
        )
        last.append(sol)
        return raw

    released = release_verified(
        solve_at(margin),
        dist_xx,
        epsilon,
        margin=margin,
        pairs=pairs,
        side=side,
        resolve=solve_at,
        who="optimal LP",
    )
    return released, last[-1]
