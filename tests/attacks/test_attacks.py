"""The server's attacks: Bayesian single-report, tracking, upload-stage, posterior leakage."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.attacks import (
    BayesAttack,
    Context,
    Observation,
    Release,
    make,
    upload_location_estimate,
)
from mdpsim.attacks.bayes import posterior_leakage_per_output
from mdpsim.mechanisms import make as make_mechanism


def _attack(domain, eps):
    mech = make_mechanism("em", epsilon=eps).fit(domain)
    return mech, BayesAttack.fit(mech.matrix_, domain.prior, domain.dist_xx)


def _prior_only_error(domain) -> float:
    return float((domain.dist_xx @ domain.prior).min())


def test_huge_epsilon_lets_the_attack_hit_almost_always(road_domain_small):
    _, attack = _attack(road_domain_small, 300.0)
    truth = np.arange(road_domain_small.n_x)
    assert np.mean(attack.map_estimate[road_domain_small.y_in_x] == truth) > 0.97


def test_tiny_epsilon_leaves_only_the_prior(road_domain_small):
    _, attack = _attack(road_domain_small, 1e-3)
    e0 = _prior_only_error(road_domain_small)
    assert np.allclose(attack.expected_error_km, e0, rtol=1e-2)


def test_expected_error_decreases_as_epsilon_grows(road_domain_small, rng):
    errors = []
    for eps in (0.5, 2.0, 8.0, 32.0):
        mech, attack = _attack(road_domain_small, eps)
        z = mech.matrix_
        # the adversary's expected error averaged over the prior and the mechanism
        errors.append(float(road_domain_small.prior @ (z @ attack.expected_error_km)))
    assert all(a > b for a, b in zip(errors, errors[1:], strict=False))


@pytest.mark.parametrize("eps", [0.5, 4.0, 10.0])
def test_posterior_leakage_of_every_output_stays_within_epsilon(road_domain_small, eps):
    mech, attack = _attack(road_domain_small, eps)
    assert np.all(attack.leakage_per_km <= eps * (1 + 1e-9))
    assert attack.leakage_per_km.max() > 0.5 * eps  # EM's leakage is near eps/2..eps, not 0


def test_leakage_check_can_fail_and_pairs_mode_is_exact(road_domain_small):
    z = make_mechanism("em", epsilon=4.0).fit(road_domain_small).matrix_.copy()
    z[0] *= 3.0  # breaks mDP near secret 0 (rows need not sum to 1 for the check)
    full = posterior_leakage_per_output(z, road_domain_small.dist_xx)
    fast = posterior_leakage_per_output(
        z, road_domain_small.dist_xx, pairs=road_domain_small.constraint_pairs
    )
    assert full.max() > 4.0
    np.testing.assert_allclose(fast, full, rtol=1e-12)


def test_zero_against_positive_leaks_infinitely():
    z = np.array([[1.0, 0.0], [0.5, 0.5]])
    leak = posterior_leakage_per_output(z, np.array([[0.0, 1.0], [1.0, 0.0]]))
    assert np.isinf(leak[1]) and leak[0] == pytest.approx(np.log(2))


def test_tracking_filter_of_a_still_user_beats_one_report(road_domain_small):
    rng = np.random.default_rng(0)
    mech = make_mechanism("em", epsilon=8.0).fit(road_domain_small)
    n_users, ticks = 200, 8
    truth = rng.integers(road_domain_small.n_x, size=n_users)
    track = make("tracking")
    track.start(Context(domain=road_domain_small, n_users=n_users, reach_km=0.0))
    track.release(Release(tick=1, mechanism=mech))
    _, bayes = _attack(road_domain_small, 8.0)
    single = []
    for t in range(ticks):
        outs = mech.sample_many(truth, rng)
        (est,) = track.observe(Observation(tick=t + 1, outputs=outs, pseudonyms=np.arange(n_users)))
        single.append(np.mean(bayes.map_estimate[outs] == truth))
    assert np.mean(est.guess == truth) > np.mean(single) + 0.15


def test_a_new_tracking_method_is_one_class_registered_by_name(road_domain_small, request):
    from mdpsim.attacks import tracking

    class EveryOther(tracking.Method):
        """The filter's estimate at every other tick (test only)."""

        def at_tick(self, attack, t, rows, top, entropy):
            return [attack._estimate(t, rows, top=top, entropy=entropy)] if t % 2 == 0 else []

    tracking.tracking_method("every_other")(EveryOther)
    request.addfinalizer(lambda: tracking.TRACKING_METHODS.remove("every_other"))
    rng = np.random.default_rng(1)
    mech = make_mechanism("em", epsilon=8.0).fit(road_domain_small)
    track = make("tracking", method="every_other")
    track.start(Context(domain=road_domain_small, n_users=5, reach_km=0.0))
    track.release(Release(tick=1, mechanism=mech))
    truth = rng.integers(road_domain_small.n_x, size=5)
    given = []
    for t in range(1, 5):
        obs = Observation(tick=t, outputs=mech.sample_many(truth, rng), pseudonyms=np.arange(5))
        given.append([e.tick for e in track.observe(obs)])
    assert given == [[1], [], [3], []] and track.finish() == []


def test_upload_attack_finds_the_closest_output():
    dy = np.array([[3.0, 1.0, 2.0], [2.5, 0.5, 3.0]])
    assert upload_location_estimate(dy) == 1
    with pytest.raises(ValueError):
        upload_location_estimate(np.empty((0, 3)))


def test_bayes_scores_from_its_risk_table_match_the_posterior_rows(road_domain_small, rng):
    from mdpsim.attacks.base import LocationEstimate, TabulatedPosterior, Truth, score

    domain = road_domain_small
    mech = make_mechanism("em", epsilon=4.0).fit(domain)
    bayes = make("bayes")
    bayes.release(Release(tick=1, mechanism=mech))
    truth_secrets = rng.integers(0, domain.n_x, size=40)
    outputs = mech.sample_many(truth_secrets, rng)
    obs = Observation(tick=1, outputs=outputs, pseudonyms=np.arange(40))
    (est,) = bayes.observe(obs)
    assert isinstance(est.posterior, TabulatedPosterior)
    truth = Truth()
    truth.record(1, truth_secrets, obs.pseudonyms, 4.0)
    tabulated = score(est, truth, domain).values
    rows = LocationEstimate(tick=1, users=est.users, guess=est.guess, posterior=est.posterior.rows)
    explicit = score(rows, truth, domain).values
    for metric in ("error_km", "hit", "entropy_bits"):
        np.testing.assert_allclose(tabulated[metric], explicit[metric], rtol=1e-12, atol=1e-12)
    assert tabulated["error_km"].std() > 0
