"""The exact mDP verifier: known smallest epsilons, planted leaks, zeros, chunking, pairs mode."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import sparse

from mdpsim.errors import InputError, PluginError
from mdpsim.mechanisms.base import Mechanism
from mdpsim.mechanisms.em import exponential_matrix
from mdpsim.privacy import PrivacyViolation, verify
from mdpsim.privacy.guarantees import PMDP, Audit, Guarantee, PureMDP, compose


def _line(n: int, step_km: float = 0.1) -> np.ndarray:
    pos = np.arange(n) * step_km
    return np.abs(pos[:, None] - pos[None, :])


def test_two_point_matrix_has_the_hand_computed_smallest_epsilon():
    Z = np.array([[0.8, 0.2], [0.4, 0.6]])
    dist = np.array([[0.0, 0.5], [0.5, 0.0]])
    expected = max(math.log(0.8 / 0.4), math.log(0.6 / 0.2)) / 0.5  # ln 3 / 0.5
    r = verify(Z, dist, 3.0)
    assert r.smallest_epsilon == pytest.approx(expected, rel=1e-12)
    assert r.worst == (1, 0, 1)
    assert r.passed and r.n_violations == 0 and r.n_constraints == 2 * 1 * 2


def test_budget_just_below_smallest_epsilon_fails_and_just_above_passes():
    Z = np.array([[0.8, 0.2], [0.4, 0.6]])
    dist = np.array([[0.0, 0.5], [0.5, 0.0]])
    eps_min = math.log(3.0) / 0.5
    assert verify(Z, dist, eps_min * (1 + 1e-12)).passed
    low = verify(Z, dist, eps_min * (1 - 1e-6))
    assert not low.passed
    assert low.n_violations == 1 and low.violation_ratio == pytest.approx(1 / 4)


def test_relative_tolerance_is_relative_not_absolute():
    # A leak of 1e-6 in log space on a 1 m pair is a 1e-3 relative breach: must be caught,
    # although it is far below the 0.01 absolute slack some peers use.
    dist = _line(2, 0.001)
    eps = 1.0
    ratio = math.exp(eps * 0.001 + 1e-6)
    Z = np.array([[0.5 * ratio, 1 - 0.5 * ratio], [0.5, 0.5]])
    r = verify(Z, dist, eps)
    assert not r.passed and r.worst in [(0, 1, 0), (1, 0, 1)]
    assert r.smallest_epsilon > eps * (1 + 9e-4)


def test_planted_violation_is_found_and_counted_exactly():
    dist = _line(6)
    Z = exponential_matrix(dist, 4.0)
    assert verify(Z, dist, 4.0).passed
    bad = Z.copy()
    bad[2, 5] *= 2.0  # row 2 gains mass on output 5 against every other row
    bad[2] /= bad[2].sum()
    r = verify(bad, dist, 4.0)
    assert not r.passed
    assert r.worst[0] == 2 or r.worst[1] == 2
    brute = _brute_force(bad, dist, 4.0)
    assert r.n_violations == brute[1]
    assert r.smallest_epsilon == pytest.approx(brute[0], rel=1e-12)


def test_positive_over_zero_is_an_infinite_loss():
    Z = np.array([[1.0, 0.0], [0.5, 0.5]])
    dist = _line(2)
    r = verify(Z, dist, 10.0)
    assert math.isinf(r.smallest_epsilon)
    assert r.worst == (1, 0, 1)
    assert r.n_violations == 1


def test_zero_over_zero_is_skipped_but_counted():
    Z = np.array([[0.7, 0.3, 0.0], [0.6, 0.4, 0.0]])
    dist = _line(2, 1.0)
    r = verify(Z, dist, 1.0)
    assert r.passed and r.n_constraints == 2 * 3
    assert r.smallest_epsilon == pytest.approx(math.log(0.4 / 0.3), rel=1e-12)


def test_tiny_entries_are_compared_in_log_space():
    Z = np.array([[1.0 - 1e-300, 1e-300], [1.0 - 4e-300, 4e-300]])
    dist = _line(2, 1.0)
    r = verify(Z, dist, 2.0)
    assert r.smallest_epsilon == pytest.approx(math.log(4.0), rel=1e-9)
    assert r.worst == (1, 0, 1)


def test_zero_distance_demands_equal_rows():
    dist = np.zeros((2, 2))
    assert verify(np.array([[0.5, 0.5], [0.5, 0.5]]), dist, 1.0).passed
    r = verify(np.array([[0.5, 0.5], [0.5 + 1e-12, 0.5 - 1e-12]]), dist, 1.0)
    assert not r.passed and math.isinf(r.smallest_epsilon)


def test_chunked_sweep_equals_one_block_and_brute_force():
    rng = np.random.default_rng(3)
    pts = rng.uniform(0, 2.0, size=(37, 2))
    dist = np.hypot(*(pts[:, None, :] - pts[None, :, :]).transpose(2, 0, 1))
    Z = rng.dirichlet(np.ones(11), size=37)
    Z[5, 3] = 0.0
    Z[5] /= Z[5].sum()
    Z[9, :] = Z[8, :]
    whole = verify(Z, dist, 2.0, chunk_rows=1000)
    for rows in (1, 4, 13):
        part = verify(Z, dist, 2.0, chunk_rows=rows)
        assert part.smallest_epsilon == whole.smallest_epsilon
        assert part.n_violations == whole.n_violations and part.worst == whole.worst
    best, count = _brute_force(Z, dist, 2.0)
    assert whole.n_violations == count
    assert whole.smallest_epsilon == best


def test_pairs_mode_equals_full_check_on_a_road_domain(road_domain_small):
    d = road_domain_small
    Z = exponential_matrix(d.dist_xy, 4.0)
    full = verify(Z, d.dist_xx, 4.0)
    paired = verify(Z, d.dist_xx, 4.0, pairs=d.constraint_pairs)
    assert paired.smallest_epsilon == pytest.approx(full.smallest_epsilon, rel=1e-9)
    assert paired.n_constraints == 2 * len(d.constraint_pairs) * d.n_y
    # a leak planted on a non-edge pair is seen through the chain of edges as well
    bad = Z.copy()
    bad[0] *= np.exp(np.linspace(0, 0.5, d.n_y))
    bad[0] /= bad[0].sum()
    full_bad = verify(bad, d.dist_xx, 4.0)
    paired_bad = verify(bad, d.dist_xx, 4.0, pairs=d.constraint_pairs)
    assert not full_bad.passed and not paired_bad.passed
    assert paired_bad.smallest_epsilon == pytest.approx(full_bad.smallest_epsilon, rel=1e-9)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0},
        {"epsilon": float("nan")},
        {"epsilon": float("inf")},
        {"epsilon": -1.0},
        {"rtol": -1e-9},
        {"chunk_rows": 0},
        {"pairs": np.array([[0, 0]])},
        {"pairs": np.array([[0, 7]])},
        {"pairs": np.array([0.0, 1.0])},
    ],
)
def test_bad_arguments_raise_input_error(kwargs):
    Z = np.full((3, 2), 0.5)
    args = {"epsilon": 1.0, **kwargs}
    eps = args.pop("epsilon")
    with pytest.raises(InputError):
        verify(Z, _line(3), eps, **args)


@pytest.mark.parametrize(
    "Z, dist",
    [
        (np.array([[0.5, -0.1]]), np.zeros((1, 1))),
        (np.array([[np.nan, 1.0]]), np.zeros((1, 1))),
        (np.full((2, 2), 0.5), np.zeros((3, 3))),
        (np.full((2, 2), 0.5), np.array([[0.0, -1.0], [-1.0, 0.0]])),
    ],
)
def test_bad_matrix_or_distances_raise_input_error(Z, dist):
    with pytest.raises(InputError):
        verify(Z, dist, 1.0)


@pytest.mark.parametrize(
    "Z, match",
    [
        (np.array([[1.0, 1.0], [1.0, 1.0]]), "row 0 sums to 2"),  # ratios all 1: would pass
        (np.zeros((2, 2)), "row 0 sums to 0"),
        (np.array([[0.5, 0.5], [0.5, 0.5 + 2e-9]]), "row 1 sums to"),
        (np.array([[0.5, 0.5], [0.25, 0.25]]), "row 1 sums to 0.5"),
    ],
)
def test_rows_that_are_not_distributions_are_refused(Z, match):
    with pytest.raises(InputError, match=match):
        verify(Z, _line(2), 100.0)


def test_ratio_only_check_of_a_matrix_that_is_not_a_mechanism():
    Z = np.array([[2.0, 1.0], [1.0, 1.0]])  # rows sum to 3 and 2
    dist = _line(2, 1.0)
    r = verify(Z, dist, 1.0, stochastic=False)
    assert r.passed and r.smallest_epsilon == pytest.approx(math.log(2.0), rel=1e-12)
    assert not verify(Z, dist, 0.5, stochastic=False).passed
    with pytest.raises(InputError, match="stochastic"):
        verify(Z, dist, 1.0, stochastic=1)


def test_row_sums_within_the_stated_tolerance_are_accepted():
    Z = np.array([[0.5, 0.5 + 0.9e-9], [0.5, 0.5 - 0.9e-9]])
    assert verify(Z, _line(2, 1.0), 1.0).passed


@pytest.mark.parametrize(
    "Z, match",
    [
        (sparse.csr_array(np.full((2, 2), 0.5)), "sparse.*toarray"),
        (sparse.csr_matrix(np.full((2, 2), 0.5)), "sparse.*toarray"),
        ([[0.5, 0.5], [1.0]], "rectangular"),
        ([["0.5", "0.5"], ["0.5", "0.5"]], "real numbers"),
        ([[0.5, None], [0.5, 0.5]], "real numbers"),
        (np.full((2, 2), 0.5 + 0j), "real numbers"),
        (np.array([[0.5, np.inf], [0.5, 0.5]]), "finite"),
        (np.full(2, 0.5), "N x K"),
    ],
)
def test_malformed_matrices_raise_input_error_not_numpy_errors(Z, match):
    with pytest.raises(InputError, match=match):
        verify(Z, _line(2), 1.0)


@pytest.mark.parametrize(
    "dist, match",
    [
        (sparse.csr_array(_line(2)), "sparse"),
        ([[0.0, 0.1], [0.1]], "rectangular"),
        ([["0", "0.1"], ["0.1", "0"]], "real numbers"),
        (np.array([[0.0, np.nan], [0.1, 0.0]]), "finite"),
        (np.array([[0.0, np.inf], [0.1, 0.0]]), "finite"),
        (_line(3), "2 x 2"),
        (np.zeros(4), "2 x 2"),
    ],
)
def test_malformed_distances_raise_input_error(dist, match):
    with pytest.raises(InputError, match=match):
        verify(np.full((2, 2), 0.5), dist, 1.0)


@pytest.mark.parametrize("pairs", [[[0, 1], [1]], sparse.csr_array(np.array([[0, 1]]))])
def test_malformed_pairs_raise_input_error(pairs):
    with pytest.raises(InputError, match="pairs"):
        verify(np.full((2, 2), 0.5), _line(2), 1.0, pairs=pairs)


def test_non_numeric_rtol_raises_input_error():
    with pytest.raises(InputError, match="rtol"):
        verify(np.full((2, 2), 0.5), _line(2), 1.0, rtol="1e-9")


def _brute_force(Z: np.ndarray, dist: np.ndarray, eps: float) -> tuple[float, int]:
    """Triple loop in Python: the reference (smallest epsilon, violations)."""
    n, k = Z.shape
    best, count = 0.0, 0
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            for c in range(k):
                a, b = Z[i, c], Z[j, c]
                if a == 0:
                    continue
                loss = math.inf if b == 0 else math.log(a) - math.log(b)
                if loss > eps * dist[i, j] * (1 + 1e-9):
                    count += 1
                if loss > 0:
                    best = max(best, math.inf if dist[i, j] == 0 else loss / dist[i, j])
    return best, count


class _Fixed(Mechanism):
    """An unregistered mechanism releasing a given matrix."""

    def __init__(self, epsilon: float, *, matrix: np.ndarray) -> None:
        super().__init__(epsilon)
        self.matrix = matrix

    def _fit(self, domain):
        return self.matrix, {}


def test_fit_fails_closed_on_a_leaky_matrix(l2_domain_small):
    d = l2_domain_small
    Z = exponential_matrix(d.dist_xy, 4.0)
    assert _Fixed(4.0, matrix=Z).fit(d).info_["verified_epsilon"] <= 4.0
    with pytest.raises(PrivacyViolation, match="not 3/km-mDP"):
        _Fixed(3.0, matrix=Z).fit(d)  # EM at 4/km is not 3/km-mDP on this domain


class _TwoStage(_Fixed):
    """Uploads (PmDP) plus reports drawn from the matrix at half the budget."""

    @property
    def upload_guarantee(self) -> PMDP:
        return PMDP(self.epsilon / 2, 1e-4, Audit(0.99, "a fixture"))

    @property
    def guarantee(self) -> Guarantee:
        return compose(self.upload_guarantee, self.report_guarantee)

    @property
    def report_guarantee(self) -> PureMDP:
        return PureMDP(self.epsilon / 2)


def test_fit_verifies_the_report_guarantee_when_the_whole_is_not_pure(l2_domain_small):
    d = l2_domain_small
    ok = _TwoStage(8.0, matrix=exponential_matrix(d.dist_xy, 4.0)).fit(d)
    assert ok.info_["verified_epsilon"] <= 4.0
    with pytest.raises(PrivacyViolation, match="not 3/km-mDP"):
        _TwoStage(6.0, matrix=exponential_matrix(d.dist_xy, 4.0)).fit(d)


def test_fit_refuses_a_matrix_over_part_of_the_domain(road_domain_small):
    d = road_domain_small
    sub = d.restrict(np.arange(0, d.n_x, 2))
    with pytest.raises(
        PluginError, match=r"test_verify:_Fixed: the fit produced a .* matrix for a"
    ):
        _Fixed(4.0, matrix=exponential_matrix(sub.dist_xy, 4.0)).fit(d)
    mech = _Fixed(4.0, matrix=exponential_matrix(d.dist_xy, 4.0)).fit(d)
    assert mech.domain_ is d and mech.matrix_.shape == (d.n_x, d.n_y)
