"""Benders decomposition of the integrated WEM+LP (DistA-LP §IV-C, eq. 29-35).

The integrated LP couples the users' blocks only through the shared WEM weights ``w``:

    min  sum_k alpha_k w_k + sum_m c_m . z_m
    s.t. h_lo_m + G_m w <= A_m z_m <= h_up_m + G_m w,   z_m >= 0,   0 <= w <= w_upper.

*Master*: ``min alpha . w + sum_m v_m`` over ``w`` and per-user cost estimates ``v_m >= 0``,
subject to the cuts found so far. *Subproblem m* (independent, solved in parallel): the block
LP with ``w`` fixed. If it is optimal with row duals ``y``, weak duality gives the optimality
cut ``v_m >= sum_r y_r (h_r + G_r w)`` (``h_r`` the bound the dual's sign selects). If it is
infeasible, a phase-1 LP (minimise artificial slack) gives duals ``y`` with
``sum_r y_r (h_r + G_r w) <= 0`` for every ``w`` that makes the block feasible: the
feasibility cut. The master's value is a lower bound, the best feasible ``(w, z)`` an upper
bound; the loop stops when ``(UB - LB) / max(|UB|, 1e-12) <= gap`` or at ``max_iter``.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from mdpsim._core.validation import check_positive_int
from mdpsim.errors import InputError, SolverError
from mdpsim.mechanisms.lp.highs import HighsLP
from mdpsim.mechanisms.lp.wem import BlockLP, wem_options

# Phase-1 slack below this counts as feasible (HiGHS's primal tolerance is 1e-9).
_FEAS_TOL = 1e-8
_INFEASIBLE = ("Infeasible", "Primal infeasible or unbounded")  # HiGHS model status texts


@dataclass(frozen=True)
class Cut:
    """``v_m >= const + coeff . w`` (optimality) or ``const + coeff . w <= 0`` (feasibility)."""

    user: int
    optimality: bool
    const: float
    coeff: np.ndarray


@dataclass(frozen=True)
class BendersResult:
    """The incumbent ``(w, z)`` with its bounds and counters."""

    w: np.ndarray
    z: list[np.ndarray]
    objective: float
    lower_bound: float
    gap: float
    converged: bool
    iterations: int
    n_optimality_cuts: int
    n_feasibility_cuts: int
    seconds: float

    @property
    def info(self) -> dict:
        return {
            "benders_objective": self.objective,
            "benders_lower_bound": self.lower_bound,
            "benders_gap": self.gap,
            "benders_converged": self.converged,
            "benders_iterations": self.iterations,
            "benders_optimality_cuts": self.n_optimality_cuts,
            "benders_feasibility_cuts": self.n_feasibility_cuts,
            "benders_seconds": self.seconds,
        }


class _Subproblem:
    """One user's block LP with ``w`` fixed; keeps its HiGHS model for warm starts."""

    def __init__(self, user: int, block: BlockLP) -> None:
        self.user = user
        self.block = block
        self.n_rows = block.A.shape[0]
        self.G_T = block.G.T.tocsr()
        self.h = HighsLP(
            block.cost_z, block.A, block.h_lo, block.h_up,
            options=wem_options(), name=f"Benders subproblem of user {user}",
        )  # fmt: skip
        self.phase1: HighsLP | None = None

    def solve(self, w: np.ndarray) -> tuple[Cut, np.ndarray | None, float]:
        """A cut at ``w``, the block's ``z`` (``None`` if infeasible) and its cost."""
        shift = self.block.G @ w
        lo, up = self.block.h_lo + shift, self.block.h_up + shift
        self.h.set_row_bounds(lo, up)
        sol = self.h.solve(accept=_INFEASIBLE + ("Unknown",))
        if sol.status == "Unknown":  # warm start went astray (seen after 0 s): once, cold
            self.h.clear_basis()
            sol = self.h.solve(accept=_INFEASIBLE)
        if sol.status in _INFEASIBLE:
            return self._feasibility_cut(lo, up), None, np.inf
        z = sol.x
        cut = self._cut(sol.row_dual, optimality=True)
        return cut, z, float(self.block.cost_z @ z)

    def _cut(self, y: np.ndarray, *, optimality: bool) -> Cut:
        b = self.block
        bound = np.where(y > 0, b.h_lo, np.where(y < 0, b.h_up, 0.0))
        y = np.where(np.isfinite(bound), y, 0.0)  # a dual on an infinite side is round-off
        bound = np.where(np.isfinite(bound), bound, 0.0)
        return Cut(self.user, optimality, float(y @ bound), self.G_T @ y)

    def _feasibility_cut(self, lo: np.ndarray, up: np.ndarray) -> Cut:
        if self.phase1 is None:
            b, m = self.block, self.n_rows
            eye = sparse.identity(m, format="csr")
            A = sparse.hstack([b.A, eye, -eye], format="csr")
            cost = np.concatenate([np.zeros(b.n_z), np.ones(2 * m)])
            self.phase1 = HighsLP(
                cost, A, lo, up, options=wem_options(), name=f"Benders phase-1 of user {self.user}"
            )
        else:
            self.phase1.set_row_bounds(lo, up)
        sol = self.phase1.solve()
        value = sol.objective
        if value <= _FEAS_TOL:
            raise SolverError(
                f"Benders subproblem of user {self.user}: HiGHS reported infeasible but the "
                f"phase-1 slack is only {value:.3g}"
            )
        return self._cut(sol.row_dual, optimality=False)


class _Master:
    """``min alpha . w + sum v`` over the cuts so far (rows added incrementally)."""

    def __init__(self, blocks: list[BlockLP]) -> None:
        alpha = np.sum([b.alpha for b in blocks], axis=0)
        w_upper = np.min([b.w_upper for b in blocks], axis=0)
        self.K, n_users = len(alpha), len(blocks)
        cost = np.concatenate([alpha, np.ones(n_users)])
        lower = np.zeros(self.K + n_users)
        upper = np.concatenate([w_upper, np.full(n_users, np.inf)])
        # Start from the blocks' necessary conditions on w: fewer feasibility cuts.
        rows = sparse.vstack([b.w_rows for b in blocks], format="csr")
        rows = sparse.hstack([rows, sparse.csr_matrix((rows.shape[0], n_users))], format="csr")
        lo = np.concatenate([b.w_lo for b in blocks])
        up = np.concatenate([b.w_up for b in blocks])
        self.h = HighsLP(
            cost, rows, lo, up, col_lower=lower, col_upper=upper,
            options=wem_options(), name="Benders master",
        )  # fmt: skip
        self.alpha = alpha

    def add(self, cuts: list[Cut]) -> None:
        """One row per cut: ``v_m - coeff . w >= const`` or ``coeff . w <= -const``."""
        n_cols = self.h.shape[1]
        rows = np.zeros((len(cuts), n_cols))
        lo, up = np.full(len(cuts), -np.inf), np.full(len(cuts), np.inf)
        for r, cut in enumerate(cuts):
            if cut.optimality:
                rows[r, : self.K] = -cut.coeff
                rows[r, self.K + cut.user] = 1.0
                lo[r] = cut.const
            else:
                rows[r, : self.K] = cut.coeff
                up[r] = -cut.const
        self.h.add_rows(lo, up, sparse.csr_array(rows))

    def solve(self) -> tuple[np.ndarray, float]:
        sol = self.h.solve()
        return np.maximum(sol.x[: self.K], 0.0), sol.objective


def solve_benders(
    blocks: list[BlockLP],
    *,
    gap: float = 1e-6,
    max_iter: int = 500,
    workers: int = 1,
    time_limit_s: float | None = None,
) -> BendersResult:
    """Solve the integrated WEM+LP of ``blocks`` by Benders decomposition.

    Parameters
    ----------
    blocks
        One :class:`~mdpsim.mechanisms.lp.wem.BlockLP` per user, all with the same outputs.
    gap
        Stop when ``(UB - LB) / max(|UB|, 1e-12) <= gap``.
    max_iter
        Iteration cap; at the cap the incumbent is returned with ``converged=False``.
    workers
        Threads solving the subproblems; the result does not depend on it.
    time_limit_s
        Wall-clock cap in seconds, treated like ``max_iter``.

    Raises ``SolverError`` if the master becomes infeasible (no ``w`` fits every block) or
    no feasible incumbent exists when a cap is hit.
    """
    if not blocks:
        raise InputError("solve_benders: need at least one block")
    if not (0 < gap < 1):
        raise InputError(f"gap={gap!r} must be in (0, 1)")
    max_iter = check_positive_int(max_iter, "max_iter")
    workers = check_positive_int(workers, "workers")
    start = time.perf_counter()
    subs = [_Subproblem(m, b) for m, b in enumerate(blocks)]
    master = _Master(blocks)
    alpha = master.alpha
    best: tuple[float, np.ndarray, list] | None = None
    lower, n_opt, n_feas, it, rel_gap = -np.inf, 0, 0, 0, np.inf
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while it < max_iter:
            it += 1
            w, lower = master.solve()
            results = list(pool.map(_Subproblem.solve, subs, [w] * len(subs)))
            cuts = [cut for cut, _, _ in results]
            if all(z is not None for _, z, _ in results):
                value = float(alpha @ w) + sum(c for _, _, c in results)
                if best is None or value < best[0]:
                    best = (value, w.copy(), [z for _, z, _ in results])
            n_opt += sum(c.optimality for c in cuts)
            n_feas += sum(not c.optimality for c in cuts)
            if best is not None:
                rel_gap = (best[0] - lower) / max(abs(best[0]), 1e-12)
                if rel_gap <= gap:
                    break
            if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
                break
            master.add(cuts)
    if best is None:
        raise SolverError(f"Benders: no feasible weights w after {it} iterations")
    return BendersResult(
        w=best[1],
        z=best[2],
        objective=best[0],
        lower_bound=lower,
        gap=max(rel_gap, 0.0),
        converged=rel_gap <= gap,
        iterations=it,
        n_optimality_cuts=n_opt,
        n_feasibility_cuts=n_feas,
        seconds=time.perf_counter() - start,
    )
