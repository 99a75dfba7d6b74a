"""The compiled scorer of location estimates against the numpy formulas it replaced, bit for bit:
numpy's pairwise sums, every kind of estimate, the plug-in types it leaves to numpy, and the
tick's per-user columns built from the score tables."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.attacks import _kernels
from mdpsim.attacks.base import (
    LocationEstimate,
    Scores,
    TabulatedPosterior,
    Truth,
    _score_compiled,
    _score_location_numpy,
    attack_column,
)
from mdpsim.attacks.scores import TableRows
from mdpsim.attacks.suite import TickResult

LENGTHS = (0, 1, 7, 8, 9, 15, 16, 17, 127, 128, 129, 136, 255, 256, 257, 1000, 1031, 20_000)


def _values(rng, n: int, kind: int) -> np.ndarray:
    """Random float64 values of many magnitudes; kind 1 with NaNs and infinities, kind 2 with
    negative zeros (whose sum from numpy's identity is +0)."""
    v = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    if kind == 1:
        v[rng.random(n) < 0.3] = np.nan
        v[rng.random(n) < 0.01] = np.inf
    elif kind == 2:
        v[rng.random(n) < 0.7] = -0.0
    return v


def _bits(x) -> bytes:
    return np.asarray(x, dtype=np.float64).tobytes()


def test_finite_totals_are_numpys_sums_of_the_finite_values_bit_for_bit():
    rng = np.random.default_rng(11)
    for n in (*range(0, 1001), *LENGTHS):
        for kind in (0, 1, 2):
            row = _values(rng, n, kind)
            totals, counts = np.empty(1), np.empty(1, dtype=np.int64)
            _kernels.finite_totals(row[None, :], totals, counts)
            finite = row[~np.isnan(row)]
            assert _bits(totals[0]) == _bits(np.add.reduce(finite)), (n, kind)
            assert counts[0] == len(finite)


def test_finite_totals_of_a_table_are_its_rows_reduced_by_numpy():
    rng = np.random.default_rng(12)
    for n in LENGTHS:
        table = np.array([_values(rng, n, 0), _values(rng, n, 2), _values(rng, n, 0) * 1e9])
        totals, counts = np.empty(3), np.empty(3, dtype=np.int64)
        _kernels.finite_totals(table, totals, counts)
        assert _bits(totals) == _bits(np.add.reduce(table, axis=1)) and list(counts) == [n] * 3


def test_the_pairwise_sum_of_a_range_is_numpys_sum_of_that_slice():
    rng = np.random.default_rng(13)
    a = _values(rng, 3000, 0)
    for start, n in ((0, 0), (5, 1), (3, 129), (17, 1000), (1, 2999), (999, 2001)):
        assert _bits(_kernels.pairwise_sum(a, start, n)) == _bits(
            0.0 + np.add.reduce(a[start : start + n])
        )


def _truth(rng, n_users: int, n_x: int, eps) -> Truth:
    truth = Truth()
    truth.record(4, rng.integers(0, n_x, n_users), np.arange(n_users), eps)
    return truth


def _estimates(rng, domain, users: np.ndarray):
    """One location estimate of every kind the built-in attacks give (and a few more)."""
    r, n_x, n_y = len(users), domain.n_x, domain.n_y
    post64 = rng.random((r, n_x)) ** 6
    post64 /= post64.sum(axis=1, keepdims=True)
    post32 = post64.astype(np.float32)
    table = rng.random((n_y, n_x))
    table /= table.sum(axis=1, keepdims=True)
    index = rng.integers(0, n_y, r)
    tabulated = TabulatedPosterior(table, index, domain.dist_xx @ table.T)
    leak = rng.random(r) * 8.0
    leak[::4] = np.inf
    guess_x, guess_y = rng.integers(0, n_x, r), rng.integers(0, n_y, r)
    top = rng.integers(0, n_x, r)
    ent = rng.random(r) * 5
    return [
        LocationEstimate(4, users, guess_x, tabulated, leakage_per_km=leak, top=top,
                         entropy_bits=ent),  # bayes
        LocationEstimate(4, users, guess_x, post32, top=top, entropy_bits=ent),  # filter
        LocationEstimate(4, users, guess_x, post32),  # smoothing: top and entropy computed
        LocationEstimate(4, users, guess_x, post64, leakage_per_km=leak.astype(np.float32)),
        LocationEstimate(4, users, guess_x),  # viterbi
        LocationEstimate(4, users, guess_y, space="y"),  # upload
        LocationEstimate(4, users, guess_x, leakage_per_km=leak, entropy_bits=ent),
    ]  # fmt: skip


def _assert_same_scores(got: Scores, want: Scores) -> None:
    assert list(got.values) == list(want.values)
    for name in want.values:
        assert _bits(got.values[name]) == _bits(want.values[name]), name
    got_totals, want_totals = got.finite_totals(), want.finite_totals()
    assert [count for _, count in got_totals.values()] == [c for _, c in want_totals.values()]
    assert _bits([t for t, _ in got_totals.values()]) == _bits([t for t, _ in want_totals.values()])
    assert _bits(list(got.means().values())) == _bits(list(want.means().values()))
    n_slots = int(got.users.max(initial=-1)) + 3
    for (k, col), (k2, col2) in zip(
        got.columns(n_slots).items(), want.columns(n_slots).items(), strict=True
    ):
        assert k == k2 and _bits(col) == _bits(col2)
    assert got.guess is want.guess and got.space == want.space and got.tick == want.tick


@pytest.mark.parametrize("eps", [None, 3.0])
def test_compiled_scores_are_the_numpy_formulas_bit_for_bit(walk_domain, eps):
    domain = walk_domain(40, 1, n_outputs=12)
    rng = np.random.default_rng(14)
    for n_users in (0, 1, 7, 8, 9, 128, 129, 1000):
        truth = _truth(rng, n_users + 5, domain.n_x, eps)
        users = np.sort(rng.choice(n_users + 5, size=n_users, replace=False))
        secrets = truth.positions[4][users]
        for est in _estimates(rng, domain, users):
            got = _score_compiled(est, secrets, eps, domain)
            assert got is not None
            _assert_same_scores(got, _score_location_numpy(est, secrets, eps, domain))


def test_plug_in_types_are_scored_by_the_numpy_formulas(road_domain_small):
    rng = np.random.default_rng(15)
    users = np.arange(6)
    secrets = rng.integers(0, road_domain_small.n_x, 6)
    guess = rng.integers(0, road_domain_small.n_x, 6)
    post = np.full((6, road_domain_small.n_x), 1 / road_domain_small.n_x)
    for est in (
        LocationEstimate(4, users, guess.astype(np.int32)),
        LocationEstimate(4, users, guess, post, top=guess.astype(float)),
        LocationEstimate(
            4, users, guess, TabulatedPosterior(post, np.arange(6, dtype=np.int32), post.T)
        ),
    ):
        assert _score_compiled(est, secrets, None, road_domain_small) is None


def test_an_index_out_of_range_raises_as_numpys_gather(road_domain_small):
    n_x = road_domain_small.n_x
    post = np.full((3, n_x), 1 / n_x)
    est = LocationEstimate(
        4, np.arange(2), np.zeros(2, dtype=np.int64), TabulatedPosterior(post, np.array([0, 3]),
        np.ones((n_x, 3))), top=np.zeros(2, dtype=np.int64)
    )  # fmt: skip
    with pytest.raises(IndexError):
        _score_location_numpy(est, np.zeros(2, dtype=np.int64), None, road_domain_small)
    with pytest.raises(IndexError):
        _score_compiled(est, np.zeros(2, dtype=np.int64), None, road_domain_small)


def _reference_user_columns(result: TickResult, n_users: int) -> dict[str, np.ndarray]:
    """``TickResult.user_columns`` as it was: metric by metric, through ``columns``."""
    cols: dict[str, np.ndarray] = {}
    for label, scored in result.scores.items():
        for s in scored:
            if s.tick != result.tick:
                continue
            for metric, col in s.columns(n_users).items():
                key = attack_column(label, metric)
                if key in cols:
                    cols[key][s.users] = s.values[metric]
                else:
                    cols[key] = col
    return cols


def test_the_per_user_columns_of_a_tick_are_the_metric_by_metric_ones():
    rng = np.random.default_rng(16)

    def scores(tick: int, users: list[int], names: tuple[str, ...]) -> Scores:
        return Scores(tick, np.array(users), {name: rng.random(len(users)) for name in names})

    result = TickResult(
        tick=5,
        scores={
            "a": [scores(5, [0, 2], ("hit", "error_km")), scores(4, [1], ("hit", "error_km"))],
            "b": [scores(5, [1, 3], ("hit",)), scores(5, [0, 2], ("hit", "extra"))],
            "c": [Scores(5, np.array([4]), {"hit": np.ones(1, dtype=np.float32)})],  # no table
            "d": [],
        },
    )
    got, want = result.user_columns(6), _reference_user_columns(result, 6)
    assert list(got) == list(want)
    assert all(_bits(got[key]) == _bits(want[key]) for key in want)


def test_table_rows_read_as_the_dict_of_the_tables_rows():
    table = np.arange(6.0).reshape(3, 2)
    rows = TableRows(("a", "b", "c"), table)
    assert list(rows) == ["a", "b", "c"] and len(rows) == 3 and "b" in rows and "d" not in rows
    assert _bits(rows["b"]) == _bits(table[1]) and dict(rows).keys() == {"a", "b", "c"}
    with pytest.raises(KeyError):
        rows["d"]
    assert repr(rows) == repr(dict(rows))
