"""The auditor's view of a mechanism: a black-box sampler, and the counts of its draws.

A sampler is ``sample(i, n, rng) -> n outputs`` (integer output indices); an exception raised
by the mechanism is itself an output, ``ERROR``. A sampler may also offer
``sample.counts(i, n, rng)``, the counts of ``n`` draws over the outputs ``0..K-1`` in one
vector (:class:`MatrixSampler` draws them from a multinomial).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mdpsim.errors import InputError
from mdpsim.privacy.sampling import sample_rows

ERROR = np.iinfo(np.int64).min  # the output "the mechanism raised"
_CHUNK_DRAWS = 1 << 22  # draws asked of a sampler per call (bounds the memory of one call)
_BINCOUNT_LIMIT = 1 << 22  # outputs in [0, limit) are counted with bincount, others sorted

Sampler = Callable[[int, int, np.random.Generator], np.ndarray | Sequence[int]]


def mechanism_sampler(mechanism) -> Callable[[int, int, np.random.Generator], np.ndarray]:
    """The sampler of a fitted mechanism (anything with ``sample_many``), as the auditor sees
    it; of a :class:`~mdpsim.privacy.release.CertifiedRelease`, the draws a run makes from it
    (``mdpsim audit`` audits a Mechanism through the release ``fit_release`` returned)."""
    from mdpsim.privacy.release import CertifiedRelease

    if isinstance(mechanism, CertifiedRelease):
        return mechanism.sampler()

    def sample(i: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return mechanism.sample_many(np.full(n, i), rng)

    return sample


class MatrixSampler:
    """The exact sampler of a row-stochastic matrix, as a black box that can also give the
    counts of ``n`` draws at once (a multinomial over the row: the same distribution as ``n``
    draws, at the cost of one row)."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = np.asarray(matrix, dtype=float)

    def __call__(self, i: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample_rows(self.matrix, np.full(n, i), rng)

    def counts(self, i: int, n: int, rng: np.random.Generator) -> np.ndarray:
        """Counts of ``n`` draws of row ``i`` over the columns."""
        row = self.matrix[i]
        return rng.multinomial(n, row / row.sum())


def matrix_sampler(matrix: np.ndarray) -> MatrixSampler:
    """:class:`MatrixSampler` of ``matrix``."""
    return MatrixSampler(matrix)


def draw_counts(sample, i: int, n: int, rng: np.random.Generator) -> dict[int, int] | np.ndarray:
    """Counts of ``n`` draws for input ``i``: a dense vector over ``0..K-1`` from a counting
    sampler, else ``{output: count}`` from draws in chunks of at most ``_CHUNK_DRAWS``."""
    if hasattr(sample, "counts"):
        try:
            c = np.asarray(sample.counts(i, n, rng))
        except Exception:  # a refusal is an output, and a distinguishable one
            return {int(ERROR): n}
        if c.ndim != 1 or not np.issubdtype(c.dtype, np.integer) or int(c.sum()) != n:
            raise InputError(f"sampler.counts must return integer counts summing to {n}")
        return c.astype(np.int64)
    total: dict[int, int] = {}
    for start in range(0, n, _CHUNK_DRAWS):
        size = min(_CHUNK_DRAWS, n - start)
        values, c = _value_counts(_draw(sample, i, size, rng))
        for v, k in zip(values.tolist(), c.tolist(), strict=True):
            total[v] = total.get(v, 0) + k
    return total


def _draw(sample: Sampler, i: int, n: int, rng: np.random.Generator) -> np.ndarray:
    try:
        out = np.asarray(sample(i, n, rng))
    except Exception:  # a refusal is an output, and a distinguishable one
        return np.full(n, ERROR, dtype=np.int64)
    if out.shape != (n,) or not np.issubdtype(out.dtype, np.integer):
        raise InputError(f"sampler must return {n} integer outputs, got {out.dtype} {out.shape}")
    return out.astype(np.int64)


def _value_counts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(x) and x.min() >= 0 and x.max() < _BINCOUNT_LIMIT:
        c = np.bincount(x)
        values = np.flatnonzero(c)
        return values.astype(np.int64), c[values]
    return np.unique(x, return_counts=True)
