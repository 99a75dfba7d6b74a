"""The Bayes bound: for eps-mDP, posterior odds move at most exp(eps d) from the prior odds.

Checked for every registered mechanism through the attack contract (the attack's reported
leakage stays within the report guarantee and no report is flagged), directly on the posterior
odds of sampled secret pairs, and broken on purpose by a leaky fixture, which is flagged.
"""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.attacks import AttackSuite, Context, Observation, Release
from mdpsim.mechanisms import available, make
from mdpsim.mechanisms.base import Mechanism, mechanism_class
from mdpsim.privacy.sampling import sample_rows

EPS = 4.0


class Leaky(Mechanism):
    """Claims eps-mDP but releases the exponential mechanism at 3 eps (a test fixture).

    ``Mechanism.fit`` would refuse it (it verifies the pure report guarantee), so the fixture
    is "fitted" by hand: the attack must flag a leak that got past the release check."""

    def _fit(self, domain):
        raise AssertionError("the leaky fixture is never fitted through Mechanism.fit")

    def leak_on(self, domain) -> Leaky:
        self.matrix_ = make("em", epsilon=3 * self.epsilon).fit(domain).matrix_
        self.domain_ = domain
        self.info_ = {}
        return self


def _suite_on(mech, domain, outputs_per_row: int = 3) -> tuple[AttackSuite, np.ndarray]:
    """Every secret of the mechanism reports ``outputs_per_row`` times (one slot each): the
    suite, and the leakage of every report (per km)."""
    rows = np.repeat(np.arange(mech.domain_.n_x), outputs_per_row)  # row i is secret i
    suite = AttackSuite.from_specs([{"name": "bayes"}])
    suite.start(Context(domain=domain, n_users=len(rows)))
    suite.release(Release(tick=1, mechanism=mech))
    # drawn here, not by sample_many: that refuses a matrix fit did not certify (Leaky's)
    outputs = sample_rows(mech.matrix_, rows, np.random.default_rng(0))
    result = suite.observe(
        Observation(tick=1, outputs=outputs, pseudonyms=np.arange(len(rows))), rows
    )
    return suite, np.concatenate([s.values["leakage_per_km"] for s in result.scores["bayes"]])


def _mechanism(name: str, domain):
    mech = make(name, epsilon=EPS, **mechanism_class(name).conformance_params)
    return mech.fit(domain, users=np.array([0, 5, 17]))  # ignored unless it needs its users


@pytest.mark.parametrize("name", available())
def test_posterior_odds_respect_the_bound_for_every_mechanism(name, road_domain_small):
    mech = _mechanism(name, road_domain_small)
    pure = mech.report_guarantee.kind == "pure"
    # DistA-LP's released matrix is pure eps_pt-mDP on its users' neighbourhoods
    eps = mech.report_guarantee.epsilon_per_km if pure else mech.info_["epsilon_pt"]
    z, sub = mech.matrix_, mech.domain_
    post = sub.prior[:, None] * z
    rng = np.random.default_rng(1)
    i, j = rng.integers(sub.n_x, size=(2, 400))
    keep = i != j
    i, j = i[keep], j[keep]
    k = rng.integers(z.shape[1], size=len(i))
    # both zero or both positive: a positive against a zero would leak infinitely
    assert np.all((z[i, k] > 0) == (z[j, k] > 0))
    live = (z[i, k] > 0) & (z[j, k] > 0)
    i, j, k = i[live], j[live], k[live]
    # posterior odds over prior odds, in log space
    log_ratio = np.log(post[i, k] / post[j, k]) - np.log(sub.prior[i] / sub.prior[j])
    assert np.all(log_ratio <= eps * sub.dist_xx[i, j] * (1 + 1e-9) + 1e-12)
    suite, leaks = _suite_on(mech, road_domain_small)
    assert leaks.max() <= eps * (1 + 1e-9)
    if pure:  # the suite flags reports against the pure report guarantee
        assert suite.summary().iloc[0]["bound_violation"] == 0.0


def test_a_leaky_mechanism_breaks_the_bound_and_is_flagged(road_domain_small):
    mech = Leaky(epsilon=EPS).leak_on(road_domain_small)
    suite, leaks = _suite_on(mech, road_domain_small)
    summary = suite.summary().iloc[0]
    assert summary["bound_violation"] > 0.5  # most of its reports leak more than eps
    assert leaks.max() > EPS * 2
