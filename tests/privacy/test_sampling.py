"""The exact row sampler (sim/privacy/sampling.py): exact at CDF boundaries, zeros, tiny entries."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mdpsim.privacy.sampling import (
    _BITS,
    RowSampler,
    _ExactRow,
    _sample_block,
    _sample_row,
    sample_rows,
    ticks_of,
)


class _ZeroBits:
    """A stand-in generator whose extra random bits are all zero (U at the left end)."""

    def integers(self, low, high, size=None, dtype=np.int64):
        return 0 if size is None else np.zeros(size, dtype=dtype)


class _OneBits(_ZeroBits):
    """Extra random bits all one (U just below the right end of its dyadic interval)."""

    def integers(self, low, high, size=None, dtype=np.int64):
        return high - 1 if size is None else np.full(size, high - 1, dtype=dtype)


def test_probability_1e_300_is_reachable_and_zero_is_not():
    # cell 1 is [0.5, 0.5 + 1e-300) of the (exact) total; U = 0.5 exactly lands inside it
    tick = 2 ** (_BITS - 1)
    tiny = np.array([0.5, 1e-300, 0.5])
    zero = np.array([0.5, 0.0, 0.5])
    assert _ExactRow(tiny).draw(tick, _ZeroBits()) == 1
    assert _ExactRow(zero).draw(tick, _ZeroBits()) == 2
    assert _sample_row(tiny, np.array([tick]), _ZeroBits())[0] == 1
    assert _sample_row(zero, np.array([tick]), _ZeroBits())[0] == 2
    # U -> 0.5 from below: U * total crosses 0.5 only when total = 1 + 1e-300 exceeds 1
    assert _ExactRow(zero).draw(tick - 1, _OneBits()) == 0
    assert _ExactRow(tiny).draw(tick - 1, _OneBits()) == 1


def test_fast_path_agrees_with_exact_arithmetic_at_every_cdf_boundary():
    rng = np.random.default_rng(5)
    rows = [
        rng.dirichlet(np.full(30, 0.3)),
        np.array([1e-300, 0.25, 0.0, 1e-17, 0.25, 0.0, 0.5 - 1e-17, 5e-324]),
        np.array([1.0, 0.0, 0.0]),
        np.full(7, 1 / 7),
    ]
    for p in rows:
        cdf = np.cumsum(p) / p.sum()
        near = np.floor(cdf * 2.0**_BITS).astype(np.int64)
        ticks = np.unique(np.clip(np.concatenate([near - 1, near, near + 1]), 0, 2**_BITS - 1))
        ticks = np.concatenate([ticks, rng.integers(0, 2**_BITS, 200)])
        for t in ticks:
            fast = _sample_row(p, np.array([t]), np.random.default_rng(int(t) % 1000))
            exact = _ExactRow(p).draw(int(t), np.random.default_rng(int(t) % 1000))
            assert fast[0] == exact, (p, t)
            assert p[exact] > 0


def test_zero_entries_are_never_sampled():
    p = np.array([0.0, 0.3, 0.0, 0.0, 0.2, 0.0, 0.5, 0.0])
    matrix = np.vstack([p, p[::-1]])
    rows = np.repeat([0, 1], 50_000)
    draws = sample_rows(matrix, rows, np.random.default_rng(1))
    assert np.all(matrix[rows, draws] > 0)


def test_frequencies_match_the_row_chi_square():
    # False-alarm rate 1e-4 per run (fixed seed: reproducible).
    p = np.array([0.4, 0.25, 1e-12, 0.2, 0.1, 0.05 - 1e-12])
    n = 200_000
    draws = sample_rows(p[None, :], np.zeros(n, dtype=np.int64), np.random.default_rng(11))
    counts = np.bincount(draws, minlength=len(p))
    keep = p * n >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(p[keep], p[~keep].sum()) * n
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_unnormalised_rows_are_sampled_in_proportion():
    p = np.array([2.0, 6.0])  # exact sampler works on Z[i, k] / sum_k Z[i, k]
    draws = sample_rows(p[None, :], np.zeros(40_000, dtype=np.int64), np.random.default_rng(3))
    share = draws.mean()
    assert abs(share - 0.75) < 4 * np.sqrt(0.75 * 0.25 / 40_000)


def test_same_seed_same_draws_and_order_of_rows_is_kept():
    rng = np.random.default_rng(0)
    matrix = rng.dirichlet(np.ones(9), size=5)
    rows = np.array([4, 0, 4, 2, 2, 1, 0])
    a = sample_rows(matrix, rows, np.random.default_rng(42))
    b = sample_rows(matrix, rows, np.random.default_rng(42))
    np.testing.assert_array_equal(a, b)
    assert a.shape == rows.shape and a.dtype == np.int64
    assert sample_rows(matrix, np.array([], dtype=np.int64), rng).shape == (0,)


def test_row_summing_to_zero_raises():
    with pytest.raises(ValueError, match="sum to zero"):
        sample_rows(np.zeros((1, 3)), np.array([0]), np.random.default_rng(0))


def test_many_draws_of_one_row_match_the_general_path_byte_for_byte():
    # the single-row fast path (the auditor's access pattern) must not change any draw
    p = np.array([1e-300, 0.25, 0.0, 1e-17, 0.25, 0.0, 0.5 - 1e-17, 5e-324])
    matrix = np.vstack([np.full(8, 1 / 8), p])
    rows = np.ones(50_000, dtype=np.int64)
    fast = sample_rows(matrix, rows, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    ticks = rng.integers(0, 2**_BITS, size=len(rows), dtype=np.int64)
    from mdpsim.privacy.sampling import _sample_block

    assert np.array_equal(fast, _sample_block(matrix, rows, ticks, rng))


class _Ticks:
    """A generator that hands out the given 53-bit ticks, then zero extra bits."""

    def __init__(self, ticks) -> None:
        self.ticks = list(ticks)

    def integers(self, low, high, size=None, dtype=np.int64):
        if size is None:
            return 0
        out, self.ticks = np.array(self.ticks[:size], dtype=dtype), self.ticks[size:]
        return out


def test_the_row_sampler_draws_what_the_block_draws_at_every_cdf_boundary():
    # RowSampler's one-by-one path (a few rows per call) against sample_rows' block
    rng = np.random.default_rng(11)
    p = np.array([1e-300, 0.25, 0.0, 1e-17, 0.25, 0.0, 0.5 - 1e-17, 5e-324])
    matrix = np.vstack([rng.dirichlet(np.full(8, 0.3)), p, np.full(8, 1 / 8)])
    sampler = RowSampler(matrix)
    for row in range(len(matrix)):
        cdf = np.cumsum(matrix[row]) / matrix[row].sum()
        near = np.floor(cdf * 2.0**_BITS).astype(np.int64)
        ticks = np.clip(np.concatenate([near - 1, near, near + 1]), 0, 2**_BITS - 1)
        rows = np.full(len(ticks), row)
        for part in range(0, len(ticks), 3):  # three rows per call: the one-by-one path
            chunk = ticks[part : part + 3]
            mine = sampler.draw(rows[: len(chunk)], _Ticks(chunk))
            block = _sample_block(matrix, rows[: len(chunk)], chunk, _ZeroBits())
            assert np.array_equal(mine, block), (row, chunk)


@pytest.mark.parametrize("n_rows", [1, 2, 5, 16, 17, 200])
def test_the_row_sampler_gives_the_bytes_of_sample_rows(n_rows):
    rng = np.random.default_rng(n_rows)
    matrix = rng.dirichlet(np.full(40, 0.2), size=30)
    matrix[3, :20] = 0.0  # zeros, and a row with a tiny entry
    matrix[4, 7] = 1e-300
    sampler = RowSampler(matrix)
    for seed in range(30):
        rows = rng.integers(0, 30, n_rows)
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        assert np.array_equal(sampler.draw(rows, a), sample_rows(matrix, rows, b))
        assert a.integers(2**62) == b.integers(2**62)  # the streams moved alike


def test_the_row_sampler_refuses_a_row_summing_to_zero():
    with pytest.raises(ValueError, match="sum to zero"):
        RowSampler(np.zeros((2, 3))).draw(np.array([1]), np.random.default_rng(0))


def test_the_compiled_pass_draws_what_the_block_draws_at_every_cdf_boundary():
    # many distinct rows per call: RowSampler's compiled pass (privacy/_kernels.py) against
    # the numpy block it replaced, with ticks on both sides of every CDF boundary and the
    # exact slow path finishing the draws that land on one
    rng = np.random.default_rng(12)
    p = np.array([1e-300, 0.25, 0.0, 1e-17, 0.25, 0.0, 0.5 - 1e-17, 5e-324])
    matrix = np.vstack([rng.dirichlet(np.full(8, 0.3), size=3), p, np.full(8, 1 / 8)])
    matrix[2] *= 3.0  # an unnormalised row
    rows, ticks = [], []
    for row in range(len(matrix)):
        cdf = np.cumsum(matrix[row]) / matrix[row].sum()
        near = np.floor(cdf * 2.0**_BITS).astype(np.int64)
        edge = np.array([0, 1, 2**_BITS - 2, 2**_BITS - 1])
        both = np.clip(np.concatenate([near - 1, near, near + 1, edge]), 0, 2**_BITS - 1)
        rows += [row] * len(both)
        ticks += both.tolist()
    order = rng.permutation(len(rows))  # rows interleaved, as users' reports are
    rows, ticks = np.array(rows)[order], np.array(ticks, dtype=np.int64)[order]
    assert len(rows) > RowSampler.SCALAR_ROWS
    mine = RowSampler(matrix).draw(rows, _Ticks(ticks))
    assert np.array_equal(mine, _sample_block(matrix, rows, ticks, _ZeroBits()))


def test_the_compiled_pass_refuses_a_row_summing_to_zero():
    matrix = np.vstack([np.full(3, 1 / 3), np.zeros(3)])
    rows = np.array([0, 1] * 10)
    with pytest.raises(ValueError, match="sum to zero"):
        RowSampler(matrix).draw(rows, np.random.default_rng(0))


@pytest.mark.parametrize(
    "bits", [np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.SFC64,
             np.random.MT19937]
)  # fmt: skip
def test_ticks_of_are_the_integers_it_replaces(bits):
    # the raw 64-bit words shifted: the very numbers rng.integers draws, and as many draws
    for seed in range(5):
        a, b = np.random.Generator(bits(seed)), np.random.Generator(bits(seed))
        for n in (0, 1, 5, 17, 1000):
            mine = ticks_of(a, n)
            assert mine.dtype == np.int64
            assert np.array_equal(mine, b.integers(0, 2**_BITS, size=n, dtype=np.int64))
        assert a.integers(2**62) == b.integers(2**62)  # the streams moved alike
