"""The optimal user strategy (Shokri et al. CCS 2012 / PETS 2015): the LP, its release, and
that the attack suite's ``bayes`` attack measures the adversary error the LP computes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, sparse

from mdpsim.attacks.base import Context, Observation, Release
from mdpsim.attacks.suite import AttackSuite
from mdpsim.errors import InputError
from mdpsim.mechanisms import make
from mdpsim.mechanisms.em import exponential_matrix
from mdpsim.mechanisms.lp.solver import directed_constraints
from mdpsim.mechanisms.lp.stackelberg import (
    UnconstrainedStackelberg,
    adversary_error_km,
    constant_optimum,
    metric_km,
    prior_cap_km,
    solve_stackelberg,
    solve_stackelberg_mdp,
)
from mdpsim.privacy import verify
from mdpsim.privacy.accounting import PureGP
from mdpsim.privacy.filters import charge_of


def test_equal_metrics_leave_the_adversary_exactly_q_up_to_the_prior_cap(walk_domain):
    # the probe: N = K = 60 road secrets, seed 11, both metrics road km
    domain = walk_domain(60, 11)
    cap = prior_cap_km(domain.prior, domain.dist_xx)
    assert cap == pytest.approx(0.7051, abs=1e-4)
    for q in (0.361, 0.602, 0.903):
        mech = UnconstrainedStackelberg(quality_km=q).fit(domain)
        assert mech.info_["adversary_error_km"] == pytest.approx(min(q, cap), abs=1e-9)
        assert mech.info_["lp_adversary_error_km"] == pytest.approx(min(q, cap), abs=1e-9)
        assert mech.info_["quality_loss_km"] <= q + 1e-9


def test_no_quality_loss_means_no_error_for_the_adversary(walk_domain):
    mech = UnconstrainedStackelberg(quality_km=0.0).fit(walk_domain(30, 2))
    assert mech.info_["adversary_error_km"] == pytest.approx(0.0, abs=1e-12)


def test_unconstrained_optimum_claims_nothing_and_no_filter_charges_it(walk_domain):
    mech = UnconstrainedStackelberg(quality_km=0.3).fit(walk_domain(30, 2))
    assert mech.guarantee.kind == "none" and mech.report_guarantee.kind == "none"
    assert "no mDP guarantee" in str(mech.guarantee)
    assert mech.info_["verified_epsilon"] is None
    assert mech.info_["measured_epsilon_per_km"] == np.inf  # the optimum has zeros
    with pytest.raises(InputError, match="cannot be charged"):
        charge_of(PureGP(1.0), mech.report_guarantee)


def test_mdp_optimum_is_verified_and_beats_em_at_em_quality(walk_domain):
    domain = walk_domain(40, 1)
    eps = 4.0
    em = exponential_matrix(domain.dist_xy, eps * (1 - 1e-3))  # feasible for the LP at eps(1-m)
    em_loss = float(domain.prior @ (em * domain.dist_xy).sum(axis=1))
    em_error = adversary_error_km(em, domain.prior, domain.dist_xx)
    mech = make("stackelberg", epsilon=eps, quality_km=em_loss).fit(domain)
    assert verify(mech.matrix_, domain.dist_xx, eps).passed
    assert mech.guarantee.kind == "pure" and mech.info_["verified_epsilon"] <= eps
    exact = adversary_error_km(mech.matrix_, domain.prior, domain.dist_xx)
    assert exact == pytest.approx(mech.info_["adversary_error_km"], rel=1e-12)
    assert exact >= em_error - 1e-6
    free = UnconstrainedStackelberg(quality_km=em_loss).fit(domain)
    assert exact <= free.info_["adversary_error_km"] + 1e-6  # constraints cost the user


@pytest.mark.parametrize(
    ("quality_metric", "adversary_metric", "q"),
    [("l2", "road", 0.4), ("road", "zero_one", 0.6), ("zero_one", "road", 0.9)],
)
def test_output_generation_matches_the_whole_lp(walk_domain, quality_metric, adversary_metric, q):
    """Against the whole LP (every output, every adversary and mDP row) by scipy's HiGHS."""
    domain = walk_domain(16, 5)
    eps = 2.0
    cost = metric_km(domain, quality_metric, outputs=True)
    D = metric_km(domain, adversary_metric, outputs=False)
    pairs = domain.constraint_pairs
    pair_dist = domain.dist_xx[pairs[:, 0], pairs[:, 1]]
    Z, sol = solve_stackelberg_mdp(
        domain.prior, cost, D, q, pairs=pairs, pair_dist_km=pair_dist, epsilon=eps
    )
    assert sol.adversary_error_km == pytest.approx(_whole_lp(domain, cost, D, q, eps), abs=1e-7)
    assert adversary_error_km(Z, domain.prior, D) == pytest.approx(sol.adversary_error_km, abs=1e-7)


@pytest.mark.parametrize(
    ("quality_metric", "adversary_metric"), [("road", "road"), ("road", "zero_one")]
)
def test_a_q_that_allows_one_output_for_all_is_solved_without_an_lp(
    walk_domain, quality_metric, adversary_metric
):
    domain = walk_domain(16, 5)
    cost = metric_km(domain, quality_metric, outputs=True)
    D = metric_km(domain, adversary_metric, outputs=False)
    least = float((domain.prior @ cost).min())  # L*: the best single output's loss
    assert constant_optimum(domain.prior, cost, D, least * (1 - 1e-6)) is None
    Z, sol = constant_optimum(domain.prior, cost, D, least)
    assert sol.adversary_error_km == pytest.approx(prior_cap_km(domain.prior, D), rel=1e-12)
    assert adversary_error_km(Z, domain.prior, D) == pytest.approx(sol.adversary_error_km)
    assert (Z.sum(axis=0) > 0).sum() == 1 and sol.quality_dual == 0.0
    whole = _whole_lp(domain, cost, D, least, 2.0)  # every row in, with eps-mDP rows
    assert sol.adversary_error_km == pytest.approx(whole, abs=1e-7)
    mech = make("stackelberg", epsilon=2.0, quality_km=least + 0.1).fit(domain)
    assert mech.info_["rounds"] == 0 and verify(mech.matrix_, domain.dist_xx, 2.0).passed


@pytest.mark.parametrize(
    ("quality_metric", "adversary_metric", "q"),
    [("road", "road", 0.3), ("l2", "road", 0.4), ("road", "zero_one", 0.2)],
)
def test_unconstrained_output_generation_matches_the_whole_lp(
    walk_domain, quality_metric, adversary_metric, q
):
    domain = walk_domain(16, 5)
    cost = metric_km(domain, quality_metric, outputs=True)
    D = metric_km(domain, adversary_metric, outputs=False)
    Z, sol = solve_stackelberg(domain.prior, cost, D, q)
    assert sol.mdp_rows == 0 and (Z.sum(axis=0) > 0).sum() < domain.n_y  # outputs generated
    assert sol.adversary_error_km == pytest.approx(_whole_lp(domain, cost, D, q, None), abs=1e-7)
    assert adversary_error_km(Z, domain.prior, D) == pytest.approx(sol.adversary_error_km, abs=1e-7)
    assert float(domain.prior @ (Z * cost).sum(axis=1)) <= q + 1e-7


def _whole_lp(domain, cost, D, q, eps) -> float:
    n, k = cost.shape
    pi = domain.prior
    nf = n * k  # f(x, y) at y * n + x, then z_y
    rows, ub = [], []
    for y in range(k):
        for e in range(n):
            row = np.zeros(nf + k)
            row[y * n : (y + 1) * n] = -pi * D[e]
            row[nf + y] = 1.0
            rows.append(row)
            ub.append(0.0)
    row = np.zeros(nf + k)
    row[:nf] = (pi[:, None] * cost).T.ravel()
    rows.append(row)
    ub.append(q)
    pairs = domain.constraint_pairs
    pair_dist = domain.dist_xx[pairs[:, 0], pairs[:, 1]]
    constraints = directed_constraints(pairs, pair_dist, eps) if eps is not None else ([], [], [])
    for a, b, g in zip(*constraints, strict=True):  # eps None: no mDP row
        for y in range(k):
            row = np.zeros(nf + k)
            row[y * n + a], row[y * n + b] = 1.0, -g
            rows.append(row)
            ub.append(0.0)
    eq = np.zeros((n, nf + k))
    for x in range(n):
        eq[x, x:nf:n] = 1.0
    res = optimize.linprog(
        -np.r_[np.zeros(nf), np.ones(k)],
        A_ub=sparse.csr_array(np.array(rows)),
        b_ub=ub,
        A_eq=eq,
        b_eq=np.ones(n),
        bounds=[(0, None)] * nf + [(None, None)] * k,
        method="highs",
    )
    assert res.status == 0, res.message
    return -res.fun


def test_bayes_attack_measures_the_exact_adversary_error(walk_domain):
    """Secrets drawn from the public prior; the attack's point estimates are scored."""
    domain = walk_domain(40, 3)
    mech = UnconstrainedStackelberg(quality_km=0.4).fit(domain)
    exact = mech.info_["adversary_error_km"]
    suite = AttackSuite.from_specs([{"name": "bayes"}])
    users, ticks = 200, 100
    suite.start(Context(domain=domain, n_users=users))
    suite.release(Release(tick=1, mechanism=mech))
    rng = np.random.default_rng(4)
    pseudonyms = np.arange(users)
    parts = []
    for t in range(ticks):
        secrets = rng.choice(domain.n_x, size=users, p=domain.prior)
        outputs = mech.sample_many(secrets, rng)
        obs = Observation(tick=t + 1, outputs=outputs, pseudonyms=pseudonyms)
        result = suite.observe(obs, secrets)
        parts += [s.values["guess_error_km"] for s in result.scores["bayes"]]
    errors = np.concatenate(parts)
    half = 3.29 * errors.std(ddof=1) / np.sqrt(len(errors))  # 99.9 % interval
    assert abs(errors.mean() - exact) <= half, (errors.mean(), exact, half)


def test_a_quality_bound_no_mdp_mechanism_meets_is_one_clear_error(walk_domain):
    with pytest.raises(InputError, match=r"quality_km=0.001: no .*/km-mDP mechanism"):
        make("stackelberg", epsilon=1.0, quality_km=0.001).fit(walk_domain(30, 2))


def test_bad_parameters_name_the_field(walk_domain):
    with pytest.raises(InputError, match="quality_metric"):
        make("stackelberg", epsilon=1.0, quality_km=0.5, quality_metric="manhattan")
    with pytest.raises(InputError, match="quality_km"):
        make("stackelberg", epsilon=1.0, quality_km=-1.0)
    with pytest.raises(InputError, match="needs a road domain"):
        UnconstrainedStackelberg(quality_km=0.5, adversary_metric="road").fit(
            walk_domain(30, 2, "l2")
        )
