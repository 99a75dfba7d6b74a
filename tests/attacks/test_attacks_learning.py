"""The adversary learns the mobility model from the users' reports (EM): it approaches the true
chain as the observation period grows."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.attacks import hmm
from mdpsim.attacks.mobility_models import (
    counted_kernel,
    kernel_from_counts,
    learn_kernel,
    reach_kernel,
    weighted_tv,
)
from mdpsim.mechanisms import make

#: Stated tolerance: after 150 ticks of 100 users reporting at eps 20/km on 40 secrets, the
#: learned kernel's rows are within 0.08 total variation of the truth (visit-weighted); the
#: uniform reach kernel it starts from is ~0.3 away.
TOLERANCE_TV = 0.08


def _chain(domain, rng):
    support = reach_kernel(domain.dist_xx, 0.25)
    weights = rng.gamma(0.5, size=support.forward.nnz) * 10
    return support, kernel_from_counts(support, weights, 0.0)


def _walk(kernel, domain, n_ticks, n_users, rng):
    dense = kernel.forward.toarray().cumsum(axis=1)
    x = rng.choice(domain.n_x, size=n_users, p=domain.prior)
    out = [x]
    for _ in range(n_ticks - 1):
        x = np.minimum((dense[x] < rng.random(n_users)[:, None]).sum(axis=1), domain.n_x - 1)
        out.append(x)
    return np.stack(out)


def _reports(z, trace, rng):
    em = hmm.Emissions()
    z_t = np.ascontiguousarray(z.T)
    for t, secrets in enumerate(trace):
        cum = z[secrets].cumsum(axis=1)
        outs = (cum < rng.random(len(secrets))[:, None]).sum(axis=1)
        em.add(outs, z_t, np.full(len(secrets), t == 0))
    return em


def test_learned_kernel_approaches_the_true_chain(road_domain_small):
    domain = road_domain_small
    rng = np.random.default_rng(0)
    support, truth = _chain(domain, rng)
    z = make("em", epsilon=20.0).fit(domain).matrix_
    errors = {}
    for n_ticks in (10, 150):
        trace = _walk(truth, domain, n_ticks, 100, rng)
        learned, _ = learn_kernel(
            support, domain.prior, _reports(z, trace, rng), np.arange(100),
            iterations=30, pseudo_count=0.01,
        )  # fmt: skip
        weights = np.bincount(trace.ravel(), minlength=domain.n_x)
        errors[n_ticks] = (
            weighted_tv(learned, truth, weights),
            weighted_tv(support, truth, weights),
        )
    short, long = errors[10][0], errors[150][0]
    assert long < short
    assert long <= TOLERANCE_TV < errors[150][1]


def test_counted_kernel_of_the_true_walks_is_the_empirical_chain(road_domain_small):
    rng = np.random.default_rng(1)
    support, truth = _chain(road_domain_small, rng)
    trace = _walk(truth, road_domain_small, 400, 200, rng)
    counted = counted_kernel(support, trace, 1e-9)
    weights = np.bincount(trace.ravel(), minlength=road_domain_small.n_x)
    assert weighted_tv(counted, truth, weights) < 0.05


def test_em_counts_sum_to_the_number_of_transitions(road_domain_small):
    rng = np.random.default_rng(2)
    support, truth = _chain(road_domain_small, rng)
    trace = _walk(truth, road_domain_small, 12, 30, rng)
    z = make("em", epsilon=2.0).fit(road_domain_small).matrix_
    counts = hmm.expected_transitions(
        support, road_domain_small.prior, _reports(z, trace, rng), np.arange(30)
    )
    assert counts.sum() == pytest.approx(11 * 30, rel=1e-9)


def _scipy_reach_kernel(dist_xx, reach_km):
    """:func:`reach_kernel`'s former construction, through scipy's conversions."""
    from scipy import sparse

    reach = np.broadcast_to(np.asarray(reach_km, dtype=float), (len(dist_xx),))
    rows, cols = np.nonzero(dist_xx <= reach[:, None])
    t = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=dist_xx.shape)
    degree = np.asarray(t.sum(axis=1)).ravel()
    return hmm.Kernel.of(sparse.diags(1.0 / degree) @ t)


@pytest.mark.parametrize("n", [1, 2, 80, 300])
def test_reach_kernel_stores_scipys_entries_in_scipys_order(n):
    rng = np.random.default_rng(n)
    xy = rng.uniform(0.0, 1.0, (n, 2))
    dist = np.linalg.norm(xy[:, None] - xy[None], axis=2)
    for reach in (0.0, 0.2, rng.uniform(0.0, 0.5, n), 5.0):
        got, want = reach_kernel(dist, reach), _scipy_reach_kernel(dist, reach)
        for a, b in ((got.forward, want.forward), (got.transposed, want.transposed)):
            assert a.shape == b.shape
            for part in ("data", "indices", "indptr"):
                x, y = getattr(a, part), getattr(b, part)
                assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.parametrize("n", [1, 2, 80, 300])
def test_float32_kernels_are_scipys_astype(n):
    rng = np.random.default_rng(n)
    xy = rng.uniform(0.0, 1.0, (n, 2))
    kernel = reach_kernel(np.linalg.norm(xy[:, None] - xy[None], axis=2), 0.3)
    got = kernel.float32
    for mine, theirs in zip(got, (kernel.transposed, kernel.forward), strict=True):
        want = theirs.astype(np.float32)
        assert mine.dtype == want.dtype and mine.shape == want.shape
        for part in ("data", "indices", "indptr"):
            a, b = getattr(mine, part), getattr(want, part)
            assert a.dtype == b.dtype and np.array_equal(a, b)
            assert not np.shares_memory(a, getattr(theirs, part))


@pytest.mark.parametrize(
    "dist, reach",
    [(np.zeros((3, 4)), 1.0), (np.ones((3, 3)), 0.5), (np.zeros((2, 2)), np.array([0.0, np.nan]))],
)
def test_reach_kernel_refuses_a_row_without_moves_or_a_non_square_matrix(dist, reach):
    with pytest.raises(ValueError, match="must be square"):
        reach_kernel(dist, reach)
