"""Small helpers around HiGHS (``highspy``) for the LP-based mechanisms.

One class, :class:`HighsLP`, holds a HiGHS instance for a linear program given as scipy
sparse matrices::

    minimise    c @ x              (or maximise, ``sense="max"``)
    subject to  row_lower <= A @ x <= row_upper
                col_lower <=   x   <= col_upper

It can grow by columns and rows and shrink (``add_cols``, ``add_rows``, ``delete``; for
column and row generation, the next ``solve`` starts from the last basis), change row bounds
(``set_row_bounds``), solves warm from a :class:`highspy.HighsBasis` of a model with the same shape
(``solve(basis=...)``), and returns a :class:`LPSolution` with primal values, row
activities, duals and the basis. A status other than optimal raises
:class:`~mdpsim.errors.SolverError` carrying HiGHS's model status, unless the caller lists that
status in ``accept`` (Benders subproblems accept ``"Infeasible"`` and read ``dual_ray``);
the message starts with the model's ``name``. Every LP of the package goes through this
class (the optimal LP, its pricing, COPT/WEM+LP, Benders, PAnDA, interp's anchor LP).

Options (:class:`HighsOptions`): time limit (s), threads, algorithm (``"choose"``,
``"simplex"``, ``"ipm"``, ``"pdlp"``), primal/dual feasibility tolerances, presolve, and any
other HiGHS option by name in ``extra``. Infinity is ``numpy.inf`` on the way in.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import ClassVar

import highspy
import numpy as np
from scipy import sparse

from mdpsim._core.validation import check_optional
from mdpsim.errors import InputError, SolverError

SOLVERS = ("choose", "simplex", "ipm", "pdlp")


_banner_silenced = False
# HiGHS starts one global task scheduler per process, with the thread count of the first
# solve, and fails any later solve that asks for another count (model status 'Not Set').
# The count the scheduler runs with now (0: HiGHS's default), or None before the first solve.
_scheduler_threads: int | None = None


def quiet_highs() -> highspy.Highs:
    """A ``highspy.Highs``, without the banner HiGHS prints to stdout on its first construction.

    The banner would otherwise land in the middle of benchmark tables and CLI output.
    """
    global _banner_silenced
    if _banner_silenced:
        return highspy.Highs()
    sys.stdout.flush()
    saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    _banner_silenced = True
    return h


@dataclass(frozen=True)
class HighsOptions:
    """HiGHS settings; ``None`` keeps HiGHS's default.

    ``time_limit_s`` in seconds; ``threads`` the number of HiGHS worker threads;
    ``solver`` one of ``SOLVERS``; ``extra`` maps further HiGHS option names to values.
    """

    time_limit_s: float | None = None
    threads: int | None = None
    solver: str = "choose"
    primal_feasibility_tolerance: float | None = None
    dual_feasibility_tolerance: float | None = None
    presolve: str = "choose"
    log: bool = False
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.solver not in SOLVERS:
            raise InputError(f"solver={self.solver!r} must be one of {', '.join(SOLVERS)}")
        check_optional(self.time_limit_s, "time_limit_s", min=0, finite=False, unit="seconds")
        check_optional(self.threads, "threads", kind=int, min=1)
        if self.presolve not in ("choose", "on", "off"):
            raise InputError(f"presolve={self.presolve!r} must be 'choose', 'on' or 'off'")

    def as_dict(self) -> dict:
        """The HiGHS option names and values this object sets."""
        out = {"solver": self.solver, "presolve": self.presolve, "output_flag": self.log}
        named = {
            "time_limit": self.time_limit_s,
            "threads": self.threads,
            "primal_feasibility_tolerance": self.primal_feasibility_tolerance,
            "dual_feasibility_tolerance": self.dual_feasibility_tolerance,
        }
        out.update({k: v for k, v in named.items() if v is not None})
        out.update(self.extra)
        return out


class HighsSettings:
    """A mechanism's ``time_limit_s`` (s per solve) and ``threads`` for HiGHS (a mixin)."""

    time_limit_s: float | None
    threads: int | None
    #: the name the LP mechanisms used before (copt, wem_lp and benders had time_limit_s)
    retired_params: ClassVar[dict[str, str]] = {"time_limit": "time_limit_s (seconds)"}

    def _set_highs(self, time_limit_s: float | None, threads: int | None) -> None:
        """Keep both, checked now (by :class:`HighsOptions`)."""
        self.time_limit_s, self.threads = time_limit_s, threads
        self._options()

    def _options(self) -> HighsOptions:
        return HighsOptions(time_limit_s=self.time_limit_s, threads=self.threads)


@dataclass
class LPSolution:
    """What one solve returned.

    ``x`` primal values, ``row_activity`` = ``A @ x``, ``row_dual`` / ``col_dual`` the duals
    (HiGHS sign convention), ``objective``, ``status`` (HiGHS model status text),
    ``iterations`` (simplex + IPM), ``seconds`` (wall time of the solve), ``basis`` (a
    ``highspy.HighsBasis`` for warm starts, or ``None`` after IPM without crossover),
    ``dual_ray`` (only for an accepted ``"Infeasible"`` status, if HiGHS has one).
    """

    x: np.ndarray
    row_activity: np.ndarray
    row_dual: np.ndarray
    col_dual: np.ndarray
    objective: float
    status: str
    iterations: int
    seconds: float
    basis: object | None
    dual_ray: np.ndarray | None = None


class HighsLP:
    """A linear program held by one HiGHS instance (see the module docstring)."""

    def __init__(
        self,
        c,
        A,
        row_lower,
        row_upper,
        *,
        col_lower=0.0,
        col_upper=np.inf,
        sense: str = "min",
        options: HighsOptions | None = None,
        name: str = "LP",
    ) -> None:
        if sense not in ("min", "max"):
            raise InputError(f"sense={sense!r} must be 'min' or 'max'")
        c = np.ascontiguousarray(c, dtype=np.float64)
        A = sparse.csc_array(A, dtype=np.float64)
        n_rows, n_cols = A.shape
        if c.shape != (n_cols,):
            raise InputError(f"c has shape {c.shape}; the matrix has {n_cols} columns")
        self.options = options or HighsOptions()
        self.name = name
        self._h = quiet_highs()
        self._h.setOptionValue("output_flag", False)
        for option, value in self.options.as_dict().items():
            self._set_option(option, value)
        lp = highspy.HighsLp()
        lp.num_col_ = n_cols
        lp.num_row_ = n_rows
        lp.sense_ = highspy.ObjSense.kMaximize if sense == "max" else highspy.ObjSense.kMinimize
        lp.col_cost_ = c
        lp.col_lower_ = _bound(col_lower, n_cols, "col_lower")
        lp.col_upper_ = _bound(col_upper, n_cols, "col_upper")
        lp.row_lower_ = _bound(row_lower, n_rows, "row_lower")
        lp.row_upper_ = _bound(row_upper, n_rows, "row_upper")
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.num_col_ = n_cols
        lp.a_matrix_.num_row_ = n_rows
        lp.a_matrix_.start_ = A.indptr.astype(np.int32)
        lp.a_matrix_.index_ = A.indices.astype(np.int32)
        lp.a_matrix_.value_ = A.data
        _check(self._h.passModel(lp), "passModel")

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns) of the current model."""
        return self._h.getNumRow(), self._h.getNumCol()

    def add_cols(self, cost, A_cols, lower=0.0, upper=np.inf) -> None:
        """Append columns with objective ``cost`` and matrix entries ``A_cols`` (rows x new)."""
        C = sparse.csc_array(A_cols, dtype=np.float64)
        if C.shape[0] != self.shape[0]:
            raise InputError(f"new columns have {C.shape[0]} rows; the model has {self.shape[0]}")
        m = C.shape[1]
        status = self._h.addCols(
            m,
            np.ascontiguousarray(cost, dtype=np.float64),
            _bound(lower, m, "lower"),
            _bound(upper, m, "upper"),
            *_compressed(C),
        )
        _check(status, "addCols")

    def add_rows(self, lower, upper, A_rows) -> None:
        """Append rows ``lower <= A_rows @ x <= upper`` (``A_rows`` is new rows x columns)."""
        R = sparse.csr_array(A_rows, dtype=np.float64)
        if R.shape[1] != self.shape[1]:
            raise InputError(f"new rows have {R.shape[1]} columns; the model has {self.shape[1]}")
        m = R.shape[0]
        status = self._h.addRows(
            m,
            _bound(lower, m, "lower"),
            _bound(upper, m, "upper"),
            *_compressed(R),
        )
        _check(status, "addRows")

    def delete(self, *, rows=(), cols=()) -> None:
        """Remove rows and columns by index (later indices shift down).

        The last basis is kept for the next ``solve`` if what remains of it is still a basis
        (as many basic columns and rows as rows), e.g. when the deleted rows are basic and
        the deleted columns nonbasic; otherwise HiGHS starts from scratch.
        """
        n_rows, n_cols = self.shape
        rows = np.unique(np.asarray(rows, dtype=np.int32))
        cols = np.unique(np.asarray(cols, dtype=np.int32))
        basis = self._h.getBasis()
        keep_rows = np.ones(n_rows, dtype=bool)
        keep_rows[rows] = False
        keep_cols = np.ones(n_cols, dtype=bool)
        keep_cols[cols] = False
        if len(cols):
            _check(self._h.deleteCols(len(cols), cols), "deleteCols")
        if len(rows):
            _check(self._h.deleteRows(len(rows), rows), "deleteRows")
        if not basis.valid:
            return
        col_status = [s for s, keep in zip(basis.col_status, keep_cols, strict=True) if keep]
        row_status = [s for s, keep in zip(basis.row_status, keep_rows, strict=True) if keep]
        basic = highspy.HighsBasisStatus.kBasic
        if sum(s == basic for s in col_status) + sum(s == basic for s in row_status) == len(
            row_status
        ):
            basis.col_status, basis.row_status = col_status, row_status
            _check(self._h.setBasis(basis), "setBasis")

    def set_row_bounds(self, lower, upper) -> None:
        """New bounds for every row (the basis is kept: a warm start for the dual simplex)."""
        m = self.shape[0]
        status = self._h.changeRowsBounds(  # type: ignore[attr-defined]  # missing in the stubs
            m, np.arange(m, dtype=np.int32), _bound(lower, m, "lower"), _bound(upper, m, "upper")
        )
        _check(status, "changeRowsBounds")

    def clear_basis(self) -> None:
        """Forget the last basis and factorisation: the next ``solve`` starts from scratch."""
        _check(self._h.clearSolver(), "clearSolver")

    def set_option(self, name: str, value) -> None:
        """Set one HiGHS option by name (e.g. the time left for the next ``solve``)."""
        self._set_option(name, value)

    def solve(self, *, basis=None, accept: tuple[str, ...] = ()) -> LPSolution:
        """Run HiGHS (warm from ``basis`` if given) and return the solution.

        Raises :class:`SolverError` unless the model status is ``"Optimal"`` or in ``accept``.
        """
        if basis is not None:
            _check(self._h.setBasis(basis), "setBasis")
        self._use_scheduler()
        start = time.perf_counter()
        run_status = self._h.run()
        seconds = time.perf_counter() - start
        model_status = self._h.getModelStatus()
        text = self._h.modelStatusToString(model_status)
        if model_status != highspy.HighsModelStatus.kOptimal and text not in accept:
            raise SolverError(
                f"{self.name}: HiGHS stopped with model status {text!r} "
                f"(run status {run_status.name}) "
                f"after {seconds:.2f} s on a {self.shape[0]:,} x {self.shape[1]:,} LP"
            )
        info = self._h.getInfo()
        sol = self._h.getSolution()
        basis_out = self._h.getBasis()
        dual_ray = None
        if text == "Infeasible":
            _, has_ray, ray = self._h.getDualRay()  # type: ignore[attr-defined]  # not in the stubs
            dual_ray = np.asarray(ray, dtype=float) if has_ray else None
        return LPSolution(
            x=np.asarray(sol.col_value, dtype=float),
            row_activity=np.asarray(sol.row_value, dtype=float),
            row_dual=np.asarray(sol.row_dual, dtype=float),
            col_dual=np.asarray(sol.col_dual, dtype=float),
            objective=float(info.objective_function_value),
            status=text,
            iterations=int(max(info.simplex_iteration_count, 0) + max(info.ipm_iteration_count, 0)),
            seconds=seconds,
            basis=basis_out if basis_out.valid else None,
            dual_ray=dual_ray,
        )

    def _use_scheduler(self) -> None:
        """Restart HiGHS's global scheduler when this LP asks for another thread count than
        it runs with (not safe while another Python thread is inside a HiGHS solve)."""
        global _scheduler_threads
        wanted = int(self._h.getOptionValue("threads")[1])
        if _scheduler_threads is not None and _scheduler_threads != wanted:
            self._h.resetGlobalScheduler(True)
        _scheduler_threads = wanted

    def _set_option(self, name: str, value) -> None:
        status = self._h.setOptionValue(name, value)
        if status != highspy.HighsStatus.kOk:
            raise InputError(f"HiGHS rejected option {name}={value!r}")


def _compressed(M) -> tuple:
    """``(nnz, starts, indices, values)`` of a CSC/CSR array, as HiGHS's add calls take them."""
    return M.nnz, M.indptr[:-1].astype(np.int32), M.indices.astype(np.int32), M.data


def _bound(value, n: int, name: str) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,))
    if np.any(np.isnan(arr)):
        raise InputError(f"{name} contains NaN")
    return np.ascontiguousarray(np.clip(arr, -highspy.kHighsInf, highspy.kHighsInf))


def _check(status, what: str) -> None:
    if status == highspy.HighsStatus.kError:
        raise SolverError(f"HiGHS {what} failed with status {status.name}")
