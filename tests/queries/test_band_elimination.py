"""PIE-NI's compiled rounds against the numpy rounds they replace: the same bits, the same draws."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.queries import elimination as el


def _triple(kind: str, rng: np.random.Generator, n: int, point: np.ndarray):
    """A triple whose ``phi`` the compiled rounds take (a distance to a point, or 1-D)."""
    xy = rng.uniform(-2, 2, (n, 2))
    if kind == "point":
        return el.PointPrivatization(xy, el.distance_to(point), rng=rng)
    return el.DistancePrivatization(el.distance_to(point)(xy) - 1.0, rng=rng)


def _numpy_rounds(triple, rho, nu_low, nu_high, c, scheme):
    """PIE-NI by the numpy rounds (``_eliminate`` with the band's rule)."""
    split, lam = el._start(triple, rho, c, scheme, 0.05)

    def settle(est, h):
        return est - h > nu_high, est + h < nu_low

    return el._eliminate(triple, split, lam, settle, keep_above=0)


@pytest.mark.parametrize("seed", range(40))
def test_compiled_band_rounds_are_the_numpy_rounds(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    kind = ("point", "distance")[seed % 2]
    n, c = int(rng.integers(1, 60)), int(rng.integers(1, 9))
    scheme = ("even", "doubling")[seed % 3 == 0]
    if seed % 5 == 0:  # few draws a batch: rounds one at a time, and leftovers carried on
        monkeypatch.setattr(el, "TRIAL_DRAWS", int(rng.integers(1, 3 * n)))
    rho = rng.choice([0.0, 0.3, 2.0, 40.0], n) * rng.uniform(0.5, 2.0, n)
    rho *= 1000.0 if seed % 7 == 0 else 1.0  # most settle early: the rounds stop before c
    point = rng.uniform(-1, 1, 2)
    nu_low, nu_high = (-np.inf, 1.2) if seed % 4 == 0 else sorted(rng.uniform(-0.5, 1.5, 2))
    runs = []
    for compiled in (True, False):
        stream = np.random.default_rng([seed, 1])
        triple = _triple(kind, np.random.default_rng([seed, 2]), n, point)
        triple._rng = stream
        if compiled:
            got = el.pie_ni(
                triple, rho, nu_low=nu_low, nu_high=nu_high, c=c, scheme=scheme, beta0=0.05
            )
        else:
            got = _numpy_rounds(triple, rho, nu_low, nu_high, c, scheme)
        runs.append((got, triple, stream.random()))
    (a, ta, na), (b, tb, nb) = runs
    for field in ("s0", "s1", "active", "rounds", "spent"):
        assert getattr(a, field).tobytes() == getattr(b, field).tobytes(), field
    assert a.iterations == b.iterations
    assert ta.weighted_sum.tobytes() == tb.weighted_sum.tobytes()
    assert ta.rho_total.tobytes() == tb.rho_total.tobytes()
    assert na == nb  # the stream is where the numpy rounds leave it


@pytest.mark.parametrize("seed", range(10))
def test_the_combined_release_is_the_quotient_it_was(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    triple = _triple(("point", "distance")[seed % 2], rng, n, rng.uniform(-1, 1, 2))
    users = np.arange(n)
    for rho in (0.3, 2.0, 40.0):
        triple.release(users, np.full(n, rho) * rng.uniform(0.5, 2, n))
    for picked in (users, np.sort(rng.choice(n, n // 2, replace=False)), rng.random(n) < 0.5):
        want = triple.weighted_sum[picked] / triple.rho_total[picked, None]
        assert triple.mean(picked).tobytes() == want.tobytes()
