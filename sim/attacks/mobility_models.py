"""The adversary's mobility models: one-tick transition kernels over the secrets.

* ``reach``: uniform over the secrets within the road reach of one tick (public: roads, speed);
* ``public``: transition counts of a public population's traces on that support;
* ``true``: the real users' own transitions, only when the scenario hands them over;
* ``learned``: estimated from the users' reports by EM (:func:`learn_kernel`), as the
  Location Privacy Meter learns mobility profiles from obfuscated traces; the tracking attack
  runs it incrementally, block by block, so a step's cost does not grow with the run.

Counted kernels keep the reach kernel's support (moves the roads allow in one tick) and add a
pseudo-count on each allowed move, so a move never seen is unlikely, not impossible.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

import numpy as np
from scipy import sparse

from mdpsim.attacks.hmm import Emissions, Kernel, expected_transitions, kernel_from_counts

MODELS = ("reach", "public", "learned", "true")
#: Per domain, its reach kernels by reach (the bytes of ``reach_km``), dropped with the domain.
_REACH_KERNELS: WeakKeyDictionary = WeakKeyDictionary()
_NOT_A_KERNEL = "a transition kernel must be square with non-negative rows summing to 1"


def reach_kernel(dist_xx: np.ndarray, reach_km) -> Kernel:
    """Uniform over ``{x : d(x', x) <= reach_km[x']}`` (staying put included).

    Built directly as CSR in one compiled pass (``_kernels.reach_csr``), in the entry order
    scipy's ``diags(1 / degree) @ t`` left (columns descending within a row; the transpose
    ascending): the filter's float32 products sum in that order. Small matrices pay mostly
    scipy's conversions otherwise."""
    from mdpsim.attacks import _kernels  # on first use: import mdpsim loads no numba

    reach = np.broadcast_to(np.asarray(reach_km, dtype=float), (len(dist_xx),))
    if dist_xx.shape[0] != dist_xx.shape[1]:
        raise ValueError(_NOT_A_KERNEL)
    arrays = _kernels.reach_csr(
        np.ascontiguousarray(dist_xx, dtype=float), np.ascontiguousarray(reach)
    )
    if not np.diff(arrays[2]).min(initial=1) > 0:
        raise ValueError(_NOT_A_KERNEL)
    return Kernel(
        forward=sparse.csr_matrix(arrays[:3], shape=dist_xx.shape),
        transposed=sparse.csr_matrix(arrays[3:], shape=dist_xx.shape),
    )


def domain_reach_kernel(domain, reach_km) -> Kernel:
    """:func:`reach_kernel` over ``domain``'s secrets, built once per domain and reach (every
    environment reset on one domain starts a tracking attack; kernels are never mutated)."""
    reach = np.asarray(reach_km, dtype=float)
    kernels = _REACH_KERNELS.setdefault(domain, {})
    key = (reach.shape, reach.tobytes())
    if key not in kernels:
        kernels[key] = reach_kernel(domain.dist_xx, reach)
    return kernels[key]


def transition_counts(support: Kernel, traces: np.ndarray) -> np.ndarray:
    """Counts of the moves ``traces[t-1, m] -> traces[t, m]`` on the support (COO order);
    moves outside the support are not counted."""
    traces = np.asarray(traces, dtype=np.int64)
    a, b = traces[:-1].ravel(), traces[1:].ravel()
    coo = support.forward.tocoo()
    index = sparse.csr_matrix(
        (np.arange(1, len(coo.data) + 1), (coo.row, coo.col)), shape=coo.shape
    )
    slot = np.asarray(index[a, b]).ravel() - 1
    slot = slot[slot >= 0]
    return np.bincount(slot, minlength=len(coo.data)).astype(float)


def counted_kernel(support: Kernel, traces: np.ndarray, pseudo_count: float) -> Kernel:
    """The support's moves weighted by how often ``traces`` make them (+ ``pseudo_count``)."""
    return kernel_from_counts(support, transition_counts(support, traces), pseudo_count)


def learn_kernel(
    support: Kernel,
    prior: np.ndarray,
    emissions: Emissions,
    users: np.ndarray,
    *,
    iterations: int,
    pseudo_count: float,
    start: Kernel | None = None,
    carried: np.ndarray | None = None,
) -> tuple[Kernel, np.ndarray]:
    """Baum-Welch on the reports of ``users``: EM iterations from ``start`` (default: the
    support), each re-estimating the kernel from the expected transition counts plus
    ``carried`` (the frozen expected counts of earlier blocks: incremental EM, whose cost is
    the block's, not the run's). Returns the kernel and the total counts it was made from
    (support's COO order), to carry into the next block."""
    kernel = support if start is None else start
    base = np.zeros(support.forward.nnz) if carried is None else carried
    total = base
    for _ in range(iterations):
        total = base + expected_transitions(kernel, prior, emissions, users)
        kernel = kernel_from_counts(support, total, pseudo_count)
    return kernel, total


def weighted_tv(a: Kernel, b: Kernel, weights: np.ndarray) -> float:
    """Total-variation distance between the rows of two kernels, averaged with ``weights``."""
    diff = abs(a.forward - b.forward)
    tv = 0.5 * np.asarray(diff.sum(axis=1)).ravel()
    w = np.asarray(weights, dtype=float)
    return float(tv @ w / w.sum())
