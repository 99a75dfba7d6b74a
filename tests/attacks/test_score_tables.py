"""Scores read as one table and the filter's cached likelihood rows give the same bits as the
per-metric and per-release computations they replace (docs/attacks.md, Speed)."""

from __future__ import annotations

import numpy as np

from mdpsim.attacks import Release
from mdpsim.attacks.base import Scores
from mdpsim.attacks.tracking import _likelihood_tables
from mdpsim.mechanisms import make as make_mechanism


def _per_metric(values: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """Means and finite totals metric by metric, as the scorer computed them before."""
    means, totals = {}, {}
    for name, v in values.items():
        finite = v[~np.isnan(v)]
        totals[name] = (float(finite.sum()), len(finite))
        means[name] = float(finite.mean()) if len(finite) else float("nan")
    return means, totals


def test_a_score_table_gives_the_per_metric_means_totals_and_columns():
    rng = np.random.default_rng(3)
    for n in (0, 1, 5, 9, 1000):
        mixed = rng.standard_normal(n) * 1e3
        mixed[::3] = np.nan
        values = {
            "clean": rng.random(n),
            "mixed": mixed,
            "none": np.full(n, np.nan),
            "hit": (rng.random(n) > 0.5).astype(float),
        }
        users = np.sort(rng.choice(2 * n + 1, size=n, replace=False))
        s = Scores(tick=1, users=users, values=values)
        means, totals = _per_metric(values)
        assert s.finite_totals() == totals
        got, want = np.array(list(s.means().values())), np.array(list(means.values()))
        assert got.tobytes() == want.tobytes()
        for name, col in s.columns(2 * n + 1).items():
            expected = np.full(2 * n + 1, np.nan)
            expected[users] = values[name]
            assert col.tobytes() == expected.tobytes()


def test_float32_values_keep_their_own_mean():
    v = np.array([0.1, 0.2, 0.7], dtype=np.float32)
    s = Scores(tick=1, users=np.arange(3), values={"a": v, "b": np.ones(3)})
    assert s.means()["a"] == float(v.mean())
    assert s.finite_totals()["a"] == (float(v.astype(float).sum()), 3)


def test_the_filter_likelihood_rows_are_kept_per_mechanism_and_matrix(walk_domain):
    dom = walk_domain(30, 1)
    a = make_mechanism("em", epsilon=2.0).fit(dom)
    b = make_mechanism("em", epsilon=4.0).fit(dom)
    lik_a, rows_a = _likelihood_tables(Release(tick=1, mechanism=a))
    assert _likelihood_tables(Release(tick=5, mechanism=a))[1] is rows_a  # kept
    assert not np.array_equal(_likelihood_tables(Release(tick=1, mechanism=b))[1], rows_a)
    assert lik_a.tobytes() == np.ascontiguousarray(a.matrix_.T).tobytes()
    assert np.all(rows_a[-1] == 1.0) and rows_a.shape == (dom.n_y + 1, dom.n_x)
    a.matrix_ = a.matrix_.copy()  # a new matrix object: tabulated again
    assert _likelihood_tables(Release(tick=9, mechanism=a))[1] is not rows_a


def test_the_expected_error_in_blocks_of_rows_is_the_whole_gathers_bits(road_domain_small):
    from mdpsim.attacks.base import _SCORE_ROWS, _expected_error_km

    rng = np.random.default_rng(4)
    n_rows, n_x = 2 * _SCORE_ROWS + 3, road_domain_small.n_x  # two blocks and a remainder
    secrets = rng.integers(0, n_x, n_rows)
    for dtype, dist in (
        (np.float32, road_domain_small.dist_xx32),
        (float, road_domain_small.dist_xx),
    ):
        post = rng.random((n_rows, n_x)).astype(dtype)
        post /= post.sum(axis=1, keepdims=True)
        whole = np.einsum("ux,ux->u", post, dist[secrets].astype(dtype, copy=False)).astype(float)
        assert _expected_error_km(post, secrets, road_domain_small).tobytes() == whole.tobytes()


def test_a_certified_release_is_tabulated_once_whatever_view_it_hands_out(walk_domain):
    from mdpsim.attacks.bayes import _tabulated
    from mdpsim.mechanisms import fit_release

    dom = walk_domain(30, 1)
    mech = make_mechanism("em", epsilon=2.0)
    certified = fit_release(mech, dom)
    assert certified.matrix is not certified.matrix  # a fresh view each time
    first = Release(tick=1, mechanism=mech, certified=certified)
    again = Release(tick=7, mechanism=mech, certified=certified)  # an env's next episode
    assert _tabulated(again) is _tabulated(first)
    assert _likelihood_tables(again) is _likelihood_tables(first)
    other = fit_release(make_mechanism("em", epsilon=2.0), dom)  # equal bits, its own copy
    assert _tabulated(Release(tick=1, mechanism=mech, certified=other)) is not _tabulated(first)


def test_scores_of_rows_are_the_scores_of_their_dict():
    rng = np.random.default_rng(7)
    for n in (0, 1, 5, 300):
        rows = [rng.random(n), rng.random(n), np.full(n, np.nan), rng.random(n)]
        if n > 1:
            rows[3][::2] = np.nan  # a metric with some NaNs
        names = ("a", "b", "c", "d")
        users = np.arange(n) * 2
        built = Scores.of_rows(3, users, names, rows)
        plain = Scores(tick=3, users=users, values=dict(zip(names, rows, strict=True)))
        assert built.finite_totals() == plain.finite_totals()
        assert (
            np.array(list(built.means().values())).tobytes()
            == np.array(list(plain.means().values())).tobytes()
        )
        for (k, col), (k2, col2) in zip(
            built.columns(2 * n + 1).items(), plain.columns(2 * n + 1).items(), strict=True
        ):
            assert k == k2 and col.tobytes() == col2.tobytes()


def test_columns_of_an_estimate_of_every_user_are_the_scattered_columns():
    rng = np.random.default_rng(5)
    for n in (0, 1, 5, 9):
        table = rng.standard_normal((3, n))
        table[0, ::2] = np.nan
        for users in (np.arange(n), np.arange(n)[::-1].copy(), np.arange(n, dtype=np.int32)):
            s = Scores(tick=1, users=users, values=dict(zip("abc", table, strict=True)))
            want = np.full((3, n), np.nan)
            want[:, users] = table
            got = s.column_list(n)
            assert [c.dtype for c in got] == [np.dtype(np.float64)] * 3
            assert np.array(got).tobytes() == want.tobytes()
            got[0][:] = 7.0  # new arrays: the scores' own values are left as they were
            assert np.array(list(s.values.values())).tobytes() == table.tobytes()
