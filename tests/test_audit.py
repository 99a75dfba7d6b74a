"""The black-box auditor catches planted bugs and raises no false alarm on correct mechanisms."""

from __future__ import annotations

import numpy as np
import pytest

from sim import planted
from sim.audit import (
    audit,
    clopper_pearson_lower,
    clopper_pearson_upper,
    likelihood_ratio_event,
    mechanism_sampler,
)
from sim.errors import InputError
from sim.mechanisms import available, make

EPS = 2.0  # per km
LINE_STEP_KM = 0.1
LINE_KM = np.arange(40) * LINE_STEP_KM
LINE_DIST = np.abs(LINE_KM[:, None] - LINE_KM[None, :])
GRID_KM = np.stack(np.meshgrid(np.arange(9.0), np.arange(9.0)), axis=-1).reshape(-1, 2)
GRID_DIST = np.linalg.norm(GRID_KM[:, None] - GRID_KM[None, :], axis=2)


def _audit(sample, dist, eps, seed=0):
    return audit(sample, dist, eps, n_samples=100_000, rng=np.random.default_rng(seed))


def test_correct_geometric_passes():
    result = _audit(planted.clamped_geometric(LINE_KM, LINE_STEP_KM, EPS), LINE_DIST, EPS)
    assert result.passed, result.lines()
    assert result.epsilon_lower_bound <= EPS


def test_geometric_with_1_2_eps_is_caught():
    buggy = planted.clamped_geometric(LINE_KM, LINE_STEP_KM, 1.2 * EPS)
    result = _audit(buggy, LINE_DIST, EPS)
    assert not result.passed
    assert EPS < result.epsilon_lower_bound <= 1.2 * EPS


def test_correct_planar_laplace_passes():
    result = _audit(planted.planar_laplace(GRID_KM, 0.5), GRID_DIST, 0.5)
    assert result.passed, result.lines()


def test_laplace_with_scale_eps_instead_of_one_over_eps_is_caught():
    buggy = planted.planar_laplace(GRID_KM, 0.5, scale_km=0.5)
    result = _audit(buggy, GRID_DIST, 0.5)
    assert not result.passed and result.epsilon_lower_bound > 0.5


def test_identity_is_caught():
    result = _audit(planted.identity, LINE_DIST, EPS)
    assert not result.passed and result.epsilon_lower_bound > 5 * EPS


def test_mechanism_raising_on_some_inputs_is_caught():
    inner = planted.clamped_geometric(LINE_KM, LINE_STEP_KM, EPS)
    result = _audit(planted.raising_on_odd(inner), LINE_DIST, EPS)
    assert not result.passed


@pytest.mark.slow
@pytest.mark.parametrize("name", available())
def test_every_registered_mechanism_passes(name, l2_domain_small):
    cls_params = getattr(type(make(name, epsilon=1.0)), "conformance_params", {})
    mech = make(name, epsilon=EPS, **cls_params).fit(l2_domain_small)
    dist = mech.domain_.dist_xx
    result = audit(mechanism_sampler(mech), dist, EPS, rng=np.random.default_rng(1))
    assert result.passed, result.lines()


def test_event_selection_prefers_outputs_likelier_under_x():
    rng = np.random.default_rng(0)
    a = rng.choice(3, 5000, p=[0.7, 0.2, 0.1])
    b = rng.choice(3, 5000, p=[0.1, 0.2, 0.7])
    assert likelihood_ratio_event(a, b) == (0,)


def test_clopper_pearson_bounds_bracket_the_estimate():
    lo, hi = clopper_pearson_lower(30, 100, 0.01), clopper_pearson_upper(30, 100, 0.01)
    assert 0.17 < lo < 0.3 < hi < 0.43
    assert clopper_pearson_lower(0, 100, 0.01) == 0.0 and clopper_pearson_upper(100, 100, 0.01) == 1


def test_bad_audit_parameters_are_refused():
    with pytest.raises(InputError, match="epsilon"):
        audit(planted.identity, LINE_DIST, -1.0)
    with pytest.raises(InputError, match="alpha"):
        audit(planted.identity, LINE_DIST, 1.0, alpha=2.0)


def test_cli_audit_passes_em_and_refuses_unknown_mechanisms(capsys):
    from sim.cli import main

    args = ["--source", "helsinki-test", "--n-points", "30", "--samples", "5000"]
    assert main(["audit", "em", *args]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["audit", "nonesuch", *args]) == 2
    assert "unknown mechanism" in capsys.readouterr().err
