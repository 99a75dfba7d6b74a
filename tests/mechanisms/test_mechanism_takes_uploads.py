"""A mechanism that takes its users' uploads runs everywhere with no edit outside this file.

``NearUploads`` (test only): each user uploads one location drawn from the EM over X at
``eps_up`` (pure eps_up-mDP); the report matrix is the EM at ``eps - eps_up`` over the outputs
nearest the uploaded locations (an EM normalised over any public output set is pure mDP, and
the set is a function of the uploads only). It declares ``takes_uploads = True`` and is run, by
name, through the model (``mdpsim run``'s path), the attack harness (``mdpsim attack``'s
path, the upload attack included) and the env.
"""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.env import parallel_env
from mdpsim.experiments import harness
from mdpsim.mechanisms import base
from mdpsim.mechanisms.base import Mechanism, Uploads
from mdpsim.privacy.guarantees import PureMDP
from mdpsim.privacy.sampling import sample_rows
from mdpsim.simulation.model import PrivacyModel

NAME = "test_near_uploads"
SHARE = 0.25


class NearUploads(Mechanism):
    """EM over the outputs nearest the users' EM-noised uploads."""

    takes_uploads = True  # a class attribute will do; dista_lp's is a property

    def __init__(self, epsilon: float, *, seed: int | None = None) -> None:
        super().__init__(epsilon)
        self.seed = seed

    @property
    def upload_guarantee(self) -> PureMDP:
        return PureMDP(SHARE * self.epsilon)

    @property
    def report_guarantee(self) -> PureMDP:
        return PureMDP((1 - SHARE) * self.epsilon)

    def _fit_users(self, domain, users, rng):
        rng = np.random.default_rng(self.seed) if rng is None else rng
        eps_up = SHARE * self.epsilon
        em_x = np.exp(-0.5 * eps_up * domain.dist_xx)
        released = sample_rows(em_x / em_x.sum(axis=1, keepdims=True), users, rng)
        guesses = np.argmin(domain.dist_xy[released], axis=1)  # what the server learns
        keep = np.zeros(domain.n_y, dtype=bool)
        keep[guesses] = True
        weights = np.where(keep, np.exp(-0.5 * (1 - SHARE) * self.epsilon * domain.dist_xy), 0)
        info = {"released_locations": released, "upload_guess": guesses}
        matrix = weights / weights.sum(axis=1, keepdims=True)
        return matrix, info, Uploads(slot=np.arange(len(users), dtype=np.int64))


@pytest.fixture
def registered(monkeypatch):
    """``NearUploads`` registered under NAME for this test only."""
    monkeypatch.setattr(NearUploads, "name", NAME, raising=False)
    monkeypatch.setitem(base._MECHANISMS._classes, NAME, NearUploads)
    return NearUploads


@pytest.fixture(scope="module")
def world(make_scenario):
    """Five users reporting from the test mechanism, its uploads attacked."""
    return make_scenario.but(
        scenario={"name": "takes-uploads", "seed": 4, "ticks": 3},
        domain={"n_points": 40},
        users={"count": 5},
        strategies={"budget": {"name": "cgp", "rho_per_km2": 1e6}},
        mechanism={"name": NAME},
        queries={"every_ticks": 0},
        attacks={"run": ["bayes", "upload"]},
    )


def test_fit_without_users_is_refused(registered, road_domain_small):
    with pytest.raises(base.InputError, match="needs its users"):
        NearUploads(4.0).fit(road_domain_small)


def test_the_model_fits_it_on_the_active_users_and_charges_their_uploads(registered, world):
    model = PrivacyModel(world())
    mech = model.server.mechanism
    assert isinstance(mech, NearUploads) and mech.uploads_ is not None
    assert len(mech.uploads_.slot) == model.population.n_users
    assert mech.info_["verified_epsilon"] <= 0.75 * 6.0 * (1 + 1e-9)
    spent = model.filters.spent_by_component()["upload"]
    np.testing.assert_allclose(spent, (SHARE * 6.0) ** 2 / 2, rtol=1e-9)
    log = model.run(3)
    assert len(log.ticks) == 3
    assert np.isfinite(log.ticks[0]["upload_error_km"])  # the upload attack scored the uploads


def test_the_attack_harness_runs_it_with_its_uploads(registered, world):
    scenario = world()
    summary, _ = harness.evaluate(scenario, harness.plan_of(scenario), ticks=2)
    assert set(summary["mechanism"]) == {NAME}
    assert {"bayes", "upload"} <= set(summary["attack"])


def test_the_env_runs_it(registered, world):
    env = parallel_env(world())
    env.reset(seed=3)
    for _ in range(2):
        env.step(env.strategy_actions())
    assert isinstance(env.unwrapped.model.server.mechanism, NearUploads)
