"""Hidden-Markov inference over all users at once: forward filter, backward pass, Viterbi, EM.

The hidden state of a user is its secret; the adversary's mobility model is a sparse
row-stochastic kernel ``T[x', x] = Pr[x_t = x | x_{t-1} = x']``; the emission of a tick is
the released matrix's column of the report (``Z[x, y_t]``), or 1 everywhere for no report.
States of all users are columns of one ``(N, U)`` array, so a step is one sparse product.

Beliefs are kept normalised per column; scalings cancel in every ratio used here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import sparse

_VITERBI_USERS = 32  # users per Viterbi block: (N, max in-degree, 32) scratch per tick
_EM_USERS = 64  # users per block of the expected transition counts
_TRANSPOSE_ROWS = 64  # rows per block of a cache-blocked transposed copy
_TRANSPOSE_AT_ONCE_BYTES = 16384  # arrays up to this size are transposed in one copy
#: Normalised beliefs below this are set to 0 (:func:`flush_tiny`).
FLUSH_BELOW = np.float32(2.0**-100)


@dataclass(frozen=True, eq=False)
class Kernel:
    """A row-stochastic transition matrix and its transpose (for predictions)."""

    forward: sparse.csr_matrix  # T
    transposed: sparse.csr_matrix  # T^T: predict = T^T b

    @cached_property
    def float32(self) -> tuple[sparse.csr_matrix, sparse.csr_matrix]:
        """``(transposed, forward)`` in float32, the filter's per-tick products, built once per
        kernel (a reach kernel serves every environment reset on its domain)."""
        return _float32(self.transposed), _float32(self.forward)

    @classmethod
    def of(cls, matrix) -> Kernel:
        """Check and wrap a transition matrix (rows sum to 1)."""
        t = sparse.csr_matrix(matrix, dtype=float)
        t.eliminate_zeros()
        sums = np.asarray(t.sum(axis=1)).ravel()
        if t.shape[0] != t.shape[1] or np.any(np.abs(sums - 1) > 1e-9) or t.data.min() < 0:
            raise ValueError(
                "a transition kernel must be square with non-negative rows summing to 1"
            )
        return cls(forward=t, transposed=t.T.tocsr())

    @property
    def n(self) -> int:
        """Number of states."""
        return self.forward.shape[0]

    def allows(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether each move ``a[i] -> b[i]`` has positive probability."""
        return np.asarray(self.forward[a, b]).ravel() > 0


def _float32(matrix: sparse.csr_matrix) -> sparse.csr_matrix:
    """``matrix.astype(np.float32)``, the same arrays (canonical: sorted indices, duplicates
    summed, as ``astype`` leaves them), built by one constructor call (``astype`` runs two)."""
    data = matrix.data.astype(np.float32)
    out = sparse.csr_matrix((data, matrix.indices.copy(), matrix.indptr.copy()), shape=matrix.shape)
    out.sum_duplicates()
    return out


def normalise(b: np.ndarray, restart) -> np.ndarray:
    """Scale every column of ``b`` to sum 1 in place. A column of mass 0 (its report impossible
    under the belief) restarts from ``restart(dead)``: the ``(N, n_dead)`` columns to use
    instead, e.g. the report alone (called only when some column died)."""
    mass = b.sum(axis=0)
    dead = ~(mass > 0)
    if np.any(dead):
        b[:, dead] = restart(dead)
        mass[dead] = b[:, dead].sum(axis=0)
    b /= mass
    return b


def normalise_rows(b: np.ndarray, restart) -> np.ndarray:
    """:func:`normalise` for beliefs held as rows ``(U, N)``: every row sums to 1 in place; a
    dead row restarts from ``restart(dead)``, the ``(n_dead, N)`` rows to use instead."""
    mass = b.sum(axis=1)
    if not mass.min(initial=np.inf) > 0:  # a row of mass 0 (or NaN) died
        dead = ~(mass > 0)
        b[dead] = restart(dead)
        mass[dead] = b[dead].sum(axis=1)
    b /= mass[:, None]
    return b


def flush_tiny(b: np.ndarray) -> np.ndarray:
    """Set the entries of a normalised belief below :data:`FLUSH_BELOW` (2^-100) to 0, in place.

    float32 sums and products are slow on subnormal numbers (below 2^-126): a few percent
    of them in the beliefs make the prediction's sparse product 4x slower. What is flushed
    holds less than N * 2^-100 of a unit mass (2e-27 at N = 2,000), far below float32
    rounding (6e-8), and kernel weights down to 2^-26 keep the products above 2^-126.
    """
    b[b < FLUSH_BELOW] = 0.0
    return b


def scaled32(likelihood: np.ndarray) -> np.ndarray:
    """float32 copy of a likelihood times the power of two that brings its smallest positive
    entry into [0.5, 1) (or its largest to at most 2^100).

    A report's likelihood times a belief then stays clear of subnormal numbers (see
    :func:`flush_tiny`) where it would otherwise underflow; a power-of-two scale is exact and
    cancels in every normalisation, so the beliefs are the same bits wherever nothing
    underflowed.
    """
    positive = likelihood[likelihood > 0]
    if len(positive) == 0:
        return likelihood.astype(np.float32)
    lowest, highest = np.frexp(positive.min())[1], np.frexp(positive.max())[1]
    shift = max(0, min(-int(lowest), 100 - int(highest)))
    return np.ldexp(likelihood, shift).astype(np.float32)


def transpose(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """C-contiguous copy of ``a.T`` (2-D), built in blocks of a's rows, so that reads and
    writes both stay within a few cache lines (``np.ascontiguousarray(a.T)`` strides through
    one of them)."""
    if out is None:
        out = np.empty(a.shape[::-1], dtype=a.dtype)
    if a.nbytes <= _TRANSPOSE_AT_ONCE_BYTES:  # in cache anyway: one copy
        out[...] = a.T
        return out
    for start in range(0, a.shape[0], _TRANSPOSE_ROWS):
        rows = slice(start, start + _TRANSPOSE_ROWS)
        out[:, rows] = a[rows].T
    return out


def backward_step(kernel: Kernel, beta: np.ndarray, lik: np.ndarray | None) -> np.ndarray:
    """``beta_{t-1} = T (lik_t * beta_t)``, normalised per column."""
    msg = beta if lik is None else lik * beta
    out = kernel.forward @ msg
    return normalise(out, lambda dead: np.ones((len(out), int(dead.sum()))))


_GONE = np.empty(0)  # a forgotten tick's arrays


class Emissions:
    """The reports over time, kept as output indices; emissions are rebuilt on demand.

    ``add(outputs, likelihood, resets)`` appends a tick: per slot the output index (-1: no
    report), the ``(N, K)`` likelihood of the release in force (shared between ticks), and the
    slots starting afresh (a new pseudonym). Ticks keep their index; :meth:`forget_before`
    releases old ticks (what a bounded-memory attack no longer needs), :meth:`since` is a view
    of the recent ones as a run of its own (EM over a window).
    """

    def __init__(self) -> None:
        self.outputs: list[np.ndarray] = []
        self.resets: list[np.ndarray] = []
        self._lik_t: list[np.ndarray] = []  # (K, N) per tick, shared objects between ticks
        self.first_kept = 0

    def __len__(self) -> int:
        return len(self.outputs)

    def add(self, outputs: np.ndarray, likelihood_t: np.ndarray, resets: np.ndarray) -> None:
        """Append one tick (``likelihood_t`` is the transposed ``(K, N)`` likelihood)."""
        self.outputs.append(np.asarray(outputs, dtype=np.int64))
        self.resets.append(np.asarray(resets, dtype=bool))
        self._lik_t.append(likelihood_t)

    def forget_before(self, t: int) -> None:
        """Release ticks ``< t``: their index stays, their arrays become empty (``_GONE``)."""
        for s in range(self.first_kept, min(t, len(self))):
            self.outputs[s] = self.resets[s] = self._lik_t[s] = _GONE
        self.first_kept = max(self.first_kept, min(t, len(self)))

    def since(self, t: int) -> Emissions:
        """Ticks ``t, t+1, ...`` as a run of their own (arrays shared, tick t is its tick 0)."""
        if t < self.first_kept:
            raise ValueError(f"tick {t} was forgotten (kept from {self.first_kept})")
        view = Emissions()
        view.outputs = self.outputs[t:]
        view.resets = self.resets[t:]
        view._lik_t = self._lik_t[t:]
        return view

    def at(self, t: int, users=slice(None)) -> np.ndarray | None:
        """Tick t's ``(N, len(users))`` emission, ones for silent users; ``None`` if all silent."""
        out = self.outputs[t][users]
        silent = out < 0
        if np.all(silent):
            return None
        lik = self._lik_t[t][np.where(silent, 0, out)].T.copy()
        lik[:, silent] = 1.0
        return lik


def viterbi(kernel: Kernel, prior: np.ndarray, emissions: Emissions) -> np.ndarray:
    """Most likely trace of every user, ``(T, U)`` secret indices.

    A user starts afresh (the prior, no transition) at its resets, and when its reports are
    impossible under the kernel.
    """
    n_ticks = len(emissions)
    n_users = len(emissions.outputs[0])
    tt = kernel.transposed  # row x lists the predecessors x' of x
    degree = np.diff(tt.indptr)
    width = int(degree.max())
    slot = np.arange(width)[None, :]
    pad = slot >= degree[:, None]
    pos = np.minimum(tt.indptr[:-1, None] + slot, len(tt.indices) - 1)
    pred = np.where(pad, 0, tt.indices[pos])  # (N, D)
    with np.errstate(divide="ignore"):
        log_w = np.where(pad, -np.inf, np.log(tt.data[pos]))[:, :, None]  # (N, D, 1)
        log_prior = np.log(prior)[:, None]
    pointer_dtype = np.uint8 if width < 256 else np.uint16
    trace = np.empty((n_ticks, n_users), dtype=np.int64)
    for start in range(0, n_users, _VITERBI_USERS):
        users = np.arange(start, min(start + _VITERBI_USERS, n_users))
        c = len(users)
        back = np.zeros((n_ticks, kernel.n, c), dtype=pointer_dtype)
        fresh = np.ones((n_ticks, c), dtype=bool)
        best_at = np.empty((n_ticks, c), dtype=np.int64)
        delta = np.zeros((kernel.n, c))
        for t in range(n_ticks):
            lik = emissions.at(t, users)
            with np.errstate(divide="ignore"):
                loglik = np.zeros((kernel.n, c)) if lik is None else np.log(lik)
            if t == 0:
                new = log_prior + loglik
                fresh[t] = True
            else:
                cand = delta[pred] + log_w  # (N, D, c)
                arg = cand.argmax(axis=1)
                new = np.take_along_axis(cand, arg[:, None, :], axis=1)[:, 0, :] + loglik
                back[t] = arg
                fresh[t] = emissions.resets[t][users] | ~np.isfinite(new.max(axis=0))
                if np.any(fresh[t]):
                    new[:, fresh[t]] = (log_prior + loglik)[:, fresh[t]]
            best_at[t] = new.argmax(axis=0)
            delta = new - new.max(axis=0)  # rescaled: the log values stay bounded
        state = best_at[-1]
        cols = np.arange(c)
        for t in range(n_ticks - 1, -1, -1):
            trace[t, users] = state
            if t > 0:
                step = pred[state, back[t, state, cols]]
                state = np.where(fresh[t], best_at[t - 1], step)
    return trace


def filtered_beliefs(kernel: Kernel, prior: np.ndarray, emissions: Emissions, users) -> list:
    """Forward filter of ``users`` over all ticks: the ``(N, len(users))`` belief per tick."""
    fresh_prior = np.tile(prior[:, None], (1, len(users)))
    beliefs = []
    belief = fresh_prior.copy()
    for t in range(len(emissions)):
        lik = emissions.at(t, users)
        if t > 0:
            belief = kernel.transposed @ belief
            reset = emissions.resets[t][users]
            belief[:, reset] = fresh_prior[:, reset]
        if lik is not None:
            belief *= lik
        belief = normalise(
            belief,
            lambda dead, lik=lik: fresh_prior[:, dead] * (1.0 if lik is None else lik[:, dead]),
        )
        beliefs.append(belief)
    return beliefs


def expected_transitions(
    kernel: Kernel, prior: np.ndarray, emissions: Emissions, users
) -> np.ndarray:
    """E-step of Baum-Welch: expected counts of every kernel non-zero (in the order of
    ``kernel.forward.tocoo()``), summed over ``users`` and ticks, given their reports."""
    n = kernel.n
    alphas = filtered_beliefs(kernel, prior, emissions, users)
    coo = kernel.forward.tocoo()
    src, dst, w = coo.row, coo.col, coo.data
    counts = np.zeros(len(w))
    beta = np.ones((n, len(users)))
    for t in range(len(emissions) - 1, 0, -1):
        lik = emissions.at(t, users)
        emit = beta if lik is None else lik * beta
        pred = kernel.transposed @ alphas[t - 1]
        norm = (pred * emit).sum(axis=0)
        ok = (norm > 0) & ~emissions.resets[t][users]  # a new pseudonym: no transition
        e = emit * np.where(ok, 1.0 / np.where(norm > 0, norm, 1.0), 0.0)
        a = alphas[t - 1]
        for start in range(0, len(users), _EM_USERS):
            cols = slice(start, start + _EM_USERS)
            counts += np.einsum("ku,ku->k", a[src, cols], e[dst, cols])
        beta = backward_step(kernel, beta, lik)
        beta[:, emissions.resets[t][users]] = 1.0 / n
    return counts * w


def kernel_from_counts(support: Kernel, counts: np.ndarray, pseudo_count: float) -> Kernel:
    """Row-normalised ``counts`` (on the support's non-zeros, COO order) plus ``pseudo_count``."""
    coo = support.forward.tocoo()
    t = sparse.csr_matrix((counts + pseudo_count, (coo.row, coo.col)), shape=coo.shape)
    sums = np.asarray(t.sum(axis=1)).ravel()
    return Kernel.of(sparse.diags(1.0 / sums) @ t)
