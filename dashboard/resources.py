"""What the dashboard keeps across reruns: graphs, domains, roads, mechanisms (cache_resource).

A model lives in ``st.session_state`` (one per browser session); the heavy things it is built
from are shared between sessions and reruns here, keyed by the scenario fields they depend on.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from mdpsim import scenario as scenario_mod
from mdpsim.dashboard.geo import road_paths
from mdpsim.domain import Domain
from mdpsim.model import PrivacyModel
from mdpsim.network import load_network
from mdpsim.scenario import Scenario

REPO = Path(__file__).resolve().parent.parent
SCENARIO_DIR = REPO / "scenarios"


@st.cache_resource(show_spinner="Loading the road network ...")
def graph(source: str, network_type: str):
    """The projected road graph (shared, never mutated)."""
    return load_network(source, network_type=network_type)


@st.cache_resource(show_spinner="Drawing the roads ...")
def roads(source: str, network_type: str) -> list[list[list[float]]]:
    """The graph's roads as lon/lat polylines for the map."""
    return road_paths(graph(source, network_type))


@st.cache_resource(show_spinner="Placing the secrets and computing road distances ...")
def domain(
    source: str, network_type: str, *, n_points: int, n_outputs: int, metric: str, seed: int
) -> Domain:
    """The domain a model of this scenario builds (same arguments as ``PrivacyModel``)."""
    return Domain.from_network(
        graph(source, network_type),
        n_points=n_points,
        n_outputs=n_outputs or None,
        metric=metric,
        seed=seed,
    )


@st.cache_resource
def mechanisms() -> dict:
    """Fitted mechanisms shared by all models (see ``PrivacyModel(mechanism_cache=...)``)."""
    return {}


def build_model(scenario: Scenario) -> PrivacyModel:
    """A fresh model of ``scenario`` on the cached graph and domain."""
    net, dom = scenario.network, scenario.domain
    seed = scenario.scenario.seed
    return PrivacyModel(
        scenario,
        graph=graph(net.source, net.network_type),
        domain=domain(
            net.source,
            net.network_type,
            n_points=dom.n_points,
            n_outputs=dom.n_outputs,
            metric=dom.metric,
            seed=seed,
        ),
        mechanism_cache=mechanisms(),
    )


def scenario_files() -> dict[str, Path]:
    """The scenario files shipped in ``scenarios/``, by file stem."""
    return {p.stem: p for p in sorted(SCENARIO_DIR.glob("*.toml"))}


def load_scenario(name: str) -> Scenario:
    """A shipped scenario by file stem (raises InputError on a bad file)."""
    return scenario_mod.load(scenario_files()[name])
