"""Surrogate families: round trips, the alternating fit, and the biased release."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.errors import InputError
from mdpsim.mechanisms.dista_lp.surrogates import FAMILIES, fit_blocks, make_surrogate
from mdpsim.mechanisms.dista_lp.user import UploadConfig, block_release, local_blocks, public_scales


def _rel_err(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def blocks(road_domain_small):
    return local_blocks(road_domain_small, 7, n_neighbours=12).as_dict()


@pytest.fixture(scope="module")
def scales(road_domain_small):
    return public_scales(road_domain_small)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_surface_of_the_family_round_trips(family, rng):
    sur = make_surrogate(family, 12, 30, rank=3)
    lo, hi = sur.bounds(5.0)
    truth = {
        "gaussian": np.array([0.4, 0.6, 0.3, 0.5, 2.0, 0.5]),
        "polynomial": np.r_[1.5, 0.4, -0.3, 0.2, 0.1, -0.2, 0.05, 0.0, 0.1, -0.05],
        "rbf": np.r_[rng.uniform(0.2, 1.0, 16), 0.35, 0.3],
    }
    if family == "svd":
        block = rng.uniform(0, 1, (12, 3)) @ rng.uniform(0, 1, (3, 30))
    else:
        block = sur.evaluate(np.clip(truth[family], lo, hi))
    theta = sur.fit(block, scale=5.0)
    assert theta.shape == (sur.n_params,)
    assert np.all((theta >= lo) & (theta <= hi))
    assert _rel_err(sur.evaluate(theta), block) < 0.02


@pytest.mark.parametrize(("family", "tol"), [("svd", 0.15), ("gaussian", 0.7),
                                              ("polynomial", 0.7), ("rbf", 0.7)])  # fmt: skip
def test_real_blocks_fit_with_the_alternating_scheme(family, tol, blocks, scales, rng):
    sur = {t: make_surrogate(family, 12, a.shape[1], rank=5) for t, a in blocks.items()}
    res = fit_blocks(blocks, sur, scales, rng=rng, n_swap_iter=4)
    assert sorted(res.perm) == list(range(12))
    assert all(b <= a * (1 + 1e-12) for a, b in zip(res.losses, res.losses[1:], strict=False))
    for t, a in blocks.items():
        permuted = a[np.ix_(res.perm, res.perm)] if t == "dx" else a[res.perm]
        assert _rel_err(sur[t].evaluate(res.thetas[t]), permuted) < tol
    if family == "svd":
        assert res.n_swaps == 0 and len(res.losses) == 1  # permutation-invariant loss


def test_svd_loss_does_not_depend_on_the_permutation(blocks, scales):
    sur = {t: make_surrogate("svd", 12, a.shape[1], rank=3) for t, a in blocks.items()}
    losses = {
        fit_blocks(blocks, sur, scales, rng=np.random.default_rng(s), n_swap_iter=0).losses[0]
        for s in range(3)
    }
    assert max(losses) - min(losses) < 1e-9 * max(losses)


@pytest.mark.parametrize("family", FAMILIES)
def test_release_with_a_huge_budget_tends_to_the_noise_free_fit(family, blocks, scales, rng):
    cfg = UploadConfig(4.0, family=family, rank=5, n_neighbours=12)
    a = blocks["dy"]
    sur = make_surrogate(family, 12, a.shape[1], rank=5)
    theta = sur.fit(a, scale=scales["dy"])
    rel = block_release(sur, "dy", scales["dy"], np.full(sur.n_params, 1e-9), cfg)
    z = rel.sample(theta, rng)
    assert np.allclose(sur.evaluate(z), sur.evaluate(theta), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("noise", ["shifted", "onesided"])
def test_noise_biases_distances_down_and_losses_up(family, noise, blocks, scales, rng):
    cfg = UploadConfig(4.0, family=family, rank=5, n_neighbours=12, noise=noise)
    for t, sign in (("dy", -1.0), ("cy", 1.0)):
        sur = make_surrogate(family, 12, blocks[t].shape[1], rank=5)
        theta = sur.fit(blocks[t], scale=scales[t])
        b = 0.01 * (np.abs(theta) + scales[t] * 1e-3)
        rel = block_release(sur, t, scales[t], b, cfg)
        z = rel.sample(np.repeat(theta[None], 4000, axis=0), rng)
        diff = (z - theta)[:, sur.level_mask] * sign  # > 0 means the biased direction
        assert np.mean(diff) > 0
        # The biased coordinates land on the wrong side rarely (never for one-sided noise).
        wrong = np.mean(diff < 0)
        assert wrong <= (0.0 if noise == "onesided" else 0.06)
        # Symmetric coordinates stay unbiased (mean within 5 standard errors of 0).
        free = (z - theta)[:, ~sur.level_mask]
        if free.size:
            clipped = np.any((z == rel.lo) | (z == rel.hi), axis=0)[~sur.level_mask]
            f = free[:, ~clipped]
            se = f.std(axis=0) / np.sqrt(len(f)) + 1e-15
            assert np.all(np.abs(f.mean(axis=0)) < 5 * se + 1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"family": "svd", "rank": 0}, "rank"), ({"family": "svd", "rank": 13}, "rank"),
     ({"family": "wavelet"}, "family")],
)  # fmt: skip
def test_bad_surrogate_parameters_are_rejected(kwargs, match):
    with pytest.raises(InputError, match=match):
        make_surrogate(n_rows=12, n_cols=12, **kwargs)


def test_a_new_family_is_one_class_registered_by_name(request, blocks, scales, rng):
    from dataclasses import dataclass

    from mdpsim.mechanisms.dista_lp import surrogates

    @dataclass(frozen=True)
    class Flat(surrogates.Surrogate):
        """One level everywhere (test only)."""

        n_params = 1
        level_mask = np.ones(1, dtype=bool)

        def bounds(self, scale):
            return np.zeros(1), np.full(1, float(scale))

        def evaluate(self, theta):
            return np.full((self.n_rows, self.n_cols), float(theta[0]))

        def fit(self, block, *, scale, start=None):
            return np.clip([float(np.median(block))], *self.bounds(scale))

    surrogates.register_family("flat")(Flat)
    request.addfinalizer(lambda: surrogates.SURROGATES.remove("flat"))
    sur = {t: make_surrogate("flat", 12, a.shape[1]) for t, a in blocks.items()}
    res = fit_blocks(blocks, sur, scales, rng=rng, n_swap_iter=2)
    assert isinstance(sur["dy"], Flat) and res.thetas["dy"].shape == (1,)
    assert sorted(res.perm) == list(range(12))


def test_a_rank_beyond_the_neighbourhood_is_refused_by_the_family_that_has_one():
    from mdpsim.mechanisms import make

    with pytest.raises(InputError, match="rank=9 must be <= n_neighbours=4"):
        make("dista_lp", epsilon=4.0, upload="strict", family="svd", rank=9, n_neighbours=4)
    make("dista_lp", epsilon=4.0, upload="strict", family="gaussian", rank=9, n_neighbours=4)
