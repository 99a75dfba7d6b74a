"""Every charge comes from the guarantee the mechanism states (conformance over the registry).

For each registered mechanism, a model on a 40-point road domain charges each report what the
mechanism's ``report_guarantee`` implies (pure eps: ``eps^2 / 2`` in a CGP budget, ``eps`` in a
pure GP budget) and each upload what ``upload_guarantee`` implies (PmDP: ``eps^2 / 2`` plus its
delta, summed apart). The expected values are computed here from the guarantee, not by the
code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CHEAP_STRICT

from mdpsim.mechanisms import available
from mdpsim.mechanisms.base import mechanism_class
from mdpsim.simulation.model import PrivacyModel

EPS = 4.0


def _model(make_scenario, name: str, domain, graph, budget: dict, **extra) -> PrivacyModel:
    params = {**mechanism_class(name).conformance_params, **extra}
    s = make_scenario(
        scenario={"name": "charges", "seed": 2, "ticks": 2},
        network=None,
        domain={"n_points": domain.n_x},
        users={"count": 6},
        mechanism={"name": name, "epsilon_per_km": EPS, "params": params},
        queries={"every_ticks": 0},
        attacks={"run": ["bayes"]},
        strategies={"budget": budget},
    )
    return PrivacyModel(s, graph=graph, domain=domain)


# DistA-LP's upload modes state different upload guarantees (none, pure, PmDP)
STRICT = {"upload": "strict", **CHEAP_STRICT, "tile_size": 20, "sweeps": 1}
UPLOADS = {"location": {"upload": "location"}}
CASES = [
    *(pytest.param(name, {}, id=name) for name in available()),
    pytest.param("dista_lp", UPLOADS["location"], id="dista_lp-location"),
    pytest.param("dista_lp", STRICT, id="dista_lp-strict", marks=pytest.mark.slow),  # audit: 15 s
]


@pytest.mark.parametrize(("name", "extra"), CASES)
def test_each_report_and_upload_is_charged_what_its_guarantee_implies(
    name, extra, road_domain_small, helsinki_walk, make_scenario
):
    budget = {"name": "cgp", "rho_per_km2": 1e6}
    model = _model(make_scenario, name, road_domain_small, helsinki_walk, budget, **extra)
    mech = model.server.mechanism
    report = mech.report_guarantee
    assert report.kind == "pure"
    expected_report = report.epsilon_per_km**2 / 2
    upload = mech.upload_guarantee
    spent0 = model.filters.spent_by_component()
    if upload is None:
        assert "upload" not in spent0
    else:
        uploaded = spent0["upload"] > 0
        assert uploaded.any()
        np.testing.assert_allclose(
            spent0["upload"][uploaded], upload.epsilon_per_km**2 / 2, rtol=1e-9
        )
        delta = upload.delta if upload.kind == "pmdp" else 0.0
        np.testing.assert_allclose(model.filters.delta_spent[uploaded], delta, rtol=1e-12)
    model.step()
    users = model.last_reports.users
    assert len(users) > 0
    per_report = model.filters.spent_by_component()["reports"][users]
    np.testing.assert_allclose(per_report, expected_report, rtol=1e-9)
    assert model.log.ticks[-1]["report_epsilon_per_km"] == report.epsilon_per_km


@pytest.mark.slow
def test_naive_interp_is_charged_its_certified_budget_not_the_nominal_eps(
    road_domain_small, helsinki_walk, make_scenario
):
    budget = {"name": "pure_gp", "epsilon_per_km": 1e6}
    s = make_scenario(
        scenario={"name": "naive", "seed": 1, "ticks": 1},
        network=None,
        users={"count": 6},
        mechanism={"name": "interp", "epsilon_per_km": EPS, "params": {"naive": True}},
        queries={"every_ticks": 0},
        strategies={"budget": budget},
    )
    model = PrivacyModel(s, graph=helsinki_walk, domain=road_domain_small)
    stated = model.server.mechanism.report_guarantee.epsilon_per_km
    assert stated > EPS  # naive anchors are weaker than the nominal budget
    model.step()
    users = model.last_reports.users
    np.testing.assert_allclose(model.filters.spent[users], stated, rtol=1e-12)
