"""The attack contract: registry, estimates, scoring, and the known answers of the attacks."""

from __future__ import annotations

import numpy as np
import pytest
from attack_driver import draw_world, run

from mdpsim.attacks import Attack, AttackSuite, Context, Observation, Release, available, hmm, make
from mdpsim.attacks.mobility_models import reach_kernel
from mdpsim.errors import InputError
from mdpsim.mechanisms import make as make_mechanism
from mdpsim.mechanisms.base import Mechanism
from mdpsim.privacy import PrivacyViolation


class Identity(Mechanism):
    """No privacy: report the secret itself (a test fixture, never registered).

    ``Mechanism.fit`` refuses it whatever it claims (it certifies every released matrix), so
    it is "fitted" by hand."""

    def __init__(self, epsilon: float = 1.0) -> None:
        super().__init__(epsilon)

    def _fit(self, domain):
        return np.eye(domain.n_x), {}  # the fixture domains have Y = X

    def fitted_by_hand(self, domain) -> Identity:
        self.matrix_, self.domain_, self.info_ = np.eye(domain.n_x), domain, {}
        return self


class Uniform(Mechanism):
    """Every output equally likely whatever the secret: perfect privacy, no utility."""

    def _fit(self, domain):
        return np.full((domain.n_x, domain.n_y), 1.0 / domain.n_y), {}


@pytest.fixture(scope="module")
def world(walk_domain):
    domain = walk_domain(60, 1)
    return draw_world(
        domain,
        n_users=40,
        ticks=12,
        seed=4,
        n_places=10,
        speed_mps=1.4,
        tick_seconds=60.0,
        dwell_ticks=(1, 4),
    )


def test_registry_lists_and_builds_attacks():
    assert {"bayes", "tracking"} <= set(available())
    assert isinstance(make("tracking", method="smooth", lag_ticks=2), Attack)
    with pytest.raises(InputError, match="unknown attack 'nope'"):
        make("nope")
    with pytest.raises(InputError, match="method='forward'"):
        make("tracking", method="forward")
    with pytest.raises(InputError, match="attack 'bayes'"):
        make("bayes", strength=3)
    for bad in (0, 1.5, True):
        with pytest.raises(InputError, match="threads="):
            make("tracking", threads=bad)
    assert make("tracking").threads is None  # the cores, resolved at start


def test_suite_needs_distinct_labels():
    with pytest.raises(InputError, match="used twice"):
        AttackSuite.from_specs([{"name": "bayes"}, {"name": "bayes"}])


def _specs():
    return [
        {"name": "bayes"},
        {"name": "tracking", "label": "filter"},
        {"name": "tracking", "label": "smooth", "method": "smooth", "lag_ticks": 2},
        {"name": "tracking", "label": "viterbi", "method": "viterbi"},
    ]


def test_identity_mechanism_gives_error_zero_and_hit_rate_one(world):
    with pytest.raises(PrivacyViolation):
        Identity().fit(world.domain)
    mech = Identity().fitted_by_hand(world.domain)
    summary = run(world, mech, _specs()).summary().set_index("attack")
    np.testing.assert_allclose(summary["error_km"], 0.0, atol=1e-12)
    np.testing.assert_allclose(summary["hit"], 1.0)


def test_uniform_mechanism_leaves_the_prior_only_guess(world):
    domain = world.domain
    mech = Uniform(epsilon=1.0).fit(domain)
    suite = run(world, mech, [{"name": "bayes"}])
    # the posterior is the prior: its expected error is the prior's distance to the truth
    truth = world.traces
    prior_error = (domain.prior @ domain.dist_xx[:, truth.ravel()]).mean()
    assert suite.summary()["error_km"].iloc[0] == pytest.approx(prior_error, rel=1e-9)
    best = int((domain.dist_xx @ domain.prior).argmin())  # the prior-only optimal guess
    assert suite.summary()["guess_error_km"].iloc[0] == pytest.approx(
        domain.dist_xx[best, truth.ravel()].mean(), rel=1e-9
    )


def test_smoothing_is_not_worse_than_filtering_on_average_over_seeds(walk_domain):
    domain = walk_domain(60, 1)
    mech = make_mechanism("em", epsilon=6.0).fit(domain)
    gaps = []
    for seed in range(4):
        w = draw_world(
            domain, n_users=40, ticks=12, seed=seed, n_places=10, speed_mps=1.4,
            tick_seconds=60.0, dwell_ticks=(1, 4),
        )  # fmt: skip
        s = run(w, mech, _specs()[1:3], grant_true_mobility=False).summary().set_index("attack")
        gaps.append(s.loc["filter", "error_km"] - s.loc["smooth", "error_km"])
    assert np.mean(gaps) > 0


def test_viterbi_trace_is_a_path_the_mobility_model_allows(world):
    mech = make_mechanism("em", epsilon=3.0).fit(world.domain)
    suite = run(world, mech, [{"name": "tracking", "method": "viterbi"}])
    trace = suite.attacks["tracking"].trace_
    kernel = reach_kernel(world.domain.dist_xx, world.mobility.reach_km)
    for t in range(1, len(trace)):
        assert kernel.allows(trace[t - 1], trace[t]).all()


def test_viterbi_finds_a_trace_at_least_as_likely_as_the_truth(world):
    domain = world.domain
    z = make_mechanism("em", epsilon=8.0).fit(domain).matrix_
    kernel = reach_kernel(domain.dist_xx, world.mobility.reach_km)
    rng = np.random.default_rng(0)
    em = hmm.Emissions()
    n_ticks, n_users = world.traces.shape
    for t in range(n_ticks):
        out = np.array([rng.choice(domain.n_y, p=z[x]) for x in world.traces[t]])
        em.add(out, np.ascontiguousarray(z.T), np.full(n_users, t == 0))
    trace = hmm.viterbi(kernel, domain.prior, em)

    def loglik(path, u):
        dense = kernel.forward.toarray()
        total = np.log(domain.prior[path[0]])
        total += np.sum(np.log(z[path, [em.outputs[t][u] for t in range(n_ticks)]]))
        return total + np.sum(np.log(dense[path[:-1], path[1:]]))

    for u in range(n_users):
        assert loglik(trace[:, u], u) >= loglik(world.traces[:, u], u) - 1e-9


def test_a_new_pseudonym_restarts_the_tracking_belief(world):
    domain = world.domain
    mech = make_mechanism("em", epsilon=4.0).fit(domain)
    attack = make("tracking")
    attack.start(Context(domain=domain, n_users=2, reach_km=world.mobility.reach_km))
    attack.release(Release(tick=1, mechanism=mech))
    outs = np.array([3, 3])
    attack.observe(Observation(tick=1, outputs=outs, pseudonyms=np.array([0, 1])))
    est = attack.observe(Observation(tick=2, outputs=outs, pseudonyms=np.array([0, 7])))[0]
    post = domain.prior * mech.matrix_[:, 3]
    np.testing.assert_allclose(est.posterior[1], post / post.sum(), rtol=1e-5)
    assert not np.allclose(est.posterior[0], est.posterior[1])


def test_the_float32_filter_is_the_float64_forward_filter(world, monkeypatch):
    """Row layout, user blocks, the scaled likelihood and the flush keep the filter's
    posteriors, top-1 and entropies those of hmm.filtered_beliefs (float64), to float32."""
    from mdpsim.attacks import tracking

    monkeypatch.setattr(tracking, "_USER_BLOCK", 16)  # three blocks of the 40 users
    domain, n_users = world.domain, world.traces.shape[1]
    mech = make_mechanism("em", epsilon=12.0).fit(domain)  # sharp: far beliefs underflow
    attack = make("tracking")
    attack.start(Context(domain=domain, n_users=n_users, reach_km=world.mobility.reach_km))
    attack.release(Release(tick=1, mechanism=mech))
    rng = np.random.default_rng(3)
    emissions, pseudonyms, estimates = hmm.Emissions(), np.arange(n_users), []
    for t, secrets in enumerate(world.traces):
        outputs = mech.sample_many(secrets, rng)
        outputs[rng.random(n_users) < 0.2] = -1  # silent slots
        resets = np.ones(n_users, bool) if t == 0 else rng.random(n_users) < 0.1
        pseudonyms = np.where(resets, pseudonyms + 1000, pseudonyms)
        emissions.add(outputs, mech.matrix_.T, resets)
        estimates += attack.observe(Observation(tick=t + 1, outputs=outputs, pseudonyms=pseudonyms))
    reference = hmm.filtered_beliefs(attack.kernel_, domain.prior, emissions, np.arange(n_users))
    for est, ref in zip(estimates, reference, strict=True):
        ref_rows = ref.T[est.users]
        np.testing.assert_allclose(est.posterior, ref_rows, atol=1e-5)
        best = ref_rows[np.arange(len(est.users)), est.top]
        assert np.all(best >= ref_rows.max(axis=1) - 1e-5)
        with np.errstate(divide="ignore", invalid="ignore"):
            ref_entropy = -np.nansum(ref_rows * np.log2(ref_rows), axis=1)
        np.testing.assert_allclose(est.entropy_bits, ref_entropy, rtol=1e-4, atol=1e-5)


def test_the_filters_likelihood_is_scaled_by_a_power_of_two():
    lik = np.array([[0.5, 1e-30, 0.0], [0.25, 3e-12, 1e-3]])
    scaled = hmm.scaled32(lik)
    shift = np.log2(scaled[0, 0] / 0.5)
    assert shift.is_integer() and shift > 0
    np.testing.assert_array_equal(scaled, np.ldexp(lik.astype(np.float32), int(shift)))
    assert 0.5 <= scaled[lik > 0].min() < 1.0


@pytest.mark.parametrize("method", ["filter", "smooth"])
def test_the_filter_is_the_same_bits_on_one_or_three_threads_and_any_parts(
    world, monkeypatch, method
):
    from mdpsim.attacks import tracking

    monkeypatch.setattr(tracking, "_USER_BLOCK", 16)
    domain, n_users = world.domain, world.traces.shape[1]
    mech = make_mechanism("em", epsilon=4.0).fit(domain)
    rng = np.random.default_rng(5)
    outputs = [mech.sample_many(secrets, rng) for secrets in world.traces]
    runs = []
    # (threads, users per part): one part; three; six parts on one thread; six on three
    for threads, part_users in ((1, 1024), (3, 1024), (1, 7), (3, 7)):
        monkeypatch.setattr(tracking, "PART_USERS", part_users)
        attack = make("tracking", method=method, lag_ticks=2, threads=threads)
        attack.start(Context(domain=domain, n_users=n_users, reach_km=world.mobility.reach_km))
        assert len(attack._parts) == max(threads, -(-n_users // part_users))
        attack.release(Release(tick=1, mechanism=mech))
        obs = [
            Observation(tick=t + 1, outputs=o, pseudonyms=np.arange(n_users))
            for t, o in enumerate(outputs)
        ]
        runs.append([e for o in obs for e in attack.observe(o)] + list(attack.finish()))
    assert len(runs[0]) == len(outputs)
    for other in runs[1:]:
        for one, that in zip(runs[0], other, strict=True):
            np.testing.assert_array_equal(one.posterior, that.posterior)
            np.testing.assert_array_equal(one.entropy_bits, that.entropy_bits)


@pytest.mark.parametrize("name", available())
def test_every_attack_rebuilds_from_its_params(name):
    attack = make(name)
    params = attack.get_params()
    assert "context" not in params
    assert make(name, **params).get_params() == params
    assert repr(attack).startswith(type(attack).__name__ + "(")
