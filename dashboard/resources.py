"""What the dashboard keeps across reruns: graphs, domains, roads, mechanisms (cache_resource).

A model lives in ``st.session_state`` (one per browser session); the heavy things it is built
from are shared between sessions and reruns here, keyed by the scenario fields they depend on.
"""

from __future__ import annotations

import os
from importlib.resources.abc import Traversable
from pathlib import Path

import pandas as pd
import streamlit as st

from mdpsim.dashboard import model_view
from mdpsim.dashboard.geo import road_paths
from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.simulation import scenario as scenario_mod
from mdpsim.simulation.model import PrivacyModel
from mdpsim.simulation.scenario import Scenario
from mdpsim.simulation.world import build_domain

#: Folders of scenario files the live page lists beside the packaged ones (os.pathsep-separated;
#: ``mdpsim dashboard --scenarios DIR`` sets it): a user's own scenarios, plug-ins and traces.
SCENARIOS_ENV = "MDPSIM_SCENARIOS"


@st.cache_resource(show_spinner="Loading the road network ...")
def graph(source: str, network_type: str):
    """The projected road graph (shared, never mutated)."""
    return load_network(source, network_type=network_type)


@st.cache_resource(show_spinner="Drawing the roads ...")
def roads(source: str, network_type: str) -> list[list[list[float]]]:
    """The graph's roads as lon/lat polylines for the map."""
    return road_paths(graph(source, network_type))


@st.cache_resource(
    show_spinner="Placing the secrets and computing road distances ...",
    hash_funcs={Scenario: lambda s: (s.network.model_dump_json(), s.domain.model_dump_json())},
)
def domain(scenario: Scenario, seed: int) -> Domain:
    """The domain a model of ``scenario`` builds with ``seed`` (keyed by [network], [domain])."""
    net = scenario.network
    return build_domain(scenario, graph(net.source, net.network_type), seed=seed)


@st.cache_resource(
    show_spinner="Solving the privacy-quality frontier ...",
    hash_funcs={Scenario: lambda s: (s.network.model_dump_json(), s.domain.model_dump_json())},
)
def frontier(scenario: Scenario, seed: int) -> tuple[pd.DataFrame, str]:
    """The frontier of the domain a model of ``scenario`` builds with ``seed``
    (:func:`~mdpsim.dashboard.model_view.frontier_curve`; solved once per domain)."""
    return model_view.frontier_curve(domain(scenario, seed))


@st.cache_resource
def mechanisms() -> dict:
    """Fitted mechanisms shared by all models (see ``PrivacyModel(mechanism_cache=...)``)."""
    return {}


def build_model(scenario: Scenario) -> PrivacyModel:
    """A fresh model of ``scenario`` on the cached graph and domain."""
    net = scenario.network
    return PrivacyModel(
        scenario,
        graph=graph(net.source, net.network_type),
        domain=domain(scenario, scenario.scenario.seed),
        mechanism_cache=mechanisms(),
    )


def scenario_files() -> dict[str, Traversable | Path]:
    """The scenarios shipped in the package (``mdpsim.scenarios``), then the ``*.toml`` files of
    the folders in ``$MDPSIM_SCENARIOS``, by file stem (a folder's file wins over a packaged
    one of the same stem)."""
    found: dict[str, Traversable | Path] = dict(scenario_mod.packaged())
    for folder in filter(None, os.environ.get(SCENARIOS_ENV, "").split(os.pathsep)):
        for path in sorted(Path(folder).expanduser().glob("*.toml")):
            found[path.stem] = path
    return found


def load_scenario(name: str) -> Scenario:
    """A shipped scenario by file stem (raises InputError on a bad file)."""
    return scenario_mod.load(scenario_files()[name])
