"""verify and Domain refuse distance matrices that are not a metric's (issue 29, item 6)."""

import numpy as np
import pytest

from mdpsim.errors import InputError
from mdpsim.geo.domain import Domain
from mdpsim.privacy.verifier import verify

UNIFORM = np.full((2, 2), 0.5)


def test_verify_refuses_an_asymmetric_distance_matrix():
    dist = np.array([[0.0, 1.0], [0.1, 0.0]])
    with pytest.raises(InputError, match=r"not symmetric: d\(0, 1\) = 1 km but d\(1, 0\) = 0.1"):
        verify(UNIFORM, dist, 1.0)
    with pytest.raises(InputError, match="not symmetric"):
        verify(UNIFORM, dist, 1.0, pairs=np.array([[0, 1]]))


def test_verify_refuses_a_non_zero_diagonal():
    with pytest.raises(InputError, match=r"dist\[1, 1\] = 0.5 km: a distance matrix needs a zero"):
        verify(UNIFORM, np.array([[0.0, 1.0], [1.0, 0.5]]), 1.0)
    with pytest.raises(InputError, match="zero diagonal"):
        verify(UNIFORM, np.array([[0.0, 1.0], [0.1, 0.5]]), 1.0, directed=True)


def test_verify_accepts_a_directed_metric_only_by_name_and_checks_each_direction():
    dist = np.array([[0.0, 1.0], [0.1, 0.0]])
    Z = np.array([[0.6, 0.4], [0.4, 0.6]])  # ln 1.5 = 0.405 both ways
    res = verify(Z, dist, 1.0, directed=True)
    assert not res.passed and res.worst[:2] == (1, 0)  # 1 -> 0 allows only 0.1
    assert verify(Z, dist, 5.0, directed=True).passed
    with pytest.raises(InputError, match="directed"):
        verify(Z, dist, 1.0, directed="yes")


def test_verify_tolerates_rounding_asymmetry():
    dist = np.array([[0.0, 1.0], [1.0 + 1e-13, 0.0]])
    assert verify(UNIFORM, dist, 1.0).passed


def _domain(dist_xx):
    xy = np.zeros((2, 2))
    return Domain(
        x_xy=xy,
        y_xy=xy,
        dist_xx=dist_xx,
        dist_xy=dist_xx,
        prior=np.full(2, 0.5),
        metric="l2",
        y_in_x=np.arange(2),
    )


def test_domain_refuses_an_asymmetric_or_non_zero_diagonal_matrix():
    with pytest.raises(InputError, match=r"dist_xx is not symmetric.*Domain's metrics"):
        _domain(np.array([[0.0, 1.0], [0.1, 0.0]]))
    with pytest.raises(InputError, match=r"dist_xx\[0, 0\] = 2 km"):
        _domain(np.array([[2.0, 1.0], [1.0, 0.0]]))
    assert _domain(np.array([[0.0, 1.0], [1.0, 0.0]])).n_x == 2


def test_every_built_domain_passes_its_own_check(helsinki_test_walk):
    for metric in ("road", "l1", "linf"):
        dom = Domain.from_network(helsinki_test_walk, n_points=30, metric=metric)
        assert dom.restrict(np.arange(0, 30, 2)).n_x == 15
