"""DistA-LP server side: conservative repairs, quality metrics, the registered mechanism."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CHEAP_STRICT

from mdpsim.errors import InputError
from mdpsim.mechanisms import make
from mdpsim.mechanisms.dista_lp import block_repair as server
from mdpsim.privacy.verifier import verify


def _noisy(block, rng, scale=0.05):
    return block + rng.normal(0.0, scale, size=block.shape)


def test_metric_closure_gives_a_metric_below_the_input(road_domain_small, rng):
    d_hat = _noisy(road_domain_small.dist_xx[:12, :12], rng)
    d = server.metric_closure(d_hat)
    assert np.all(d >= 0) and np.allclose(d, d.T) and np.all(np.diag(d) == 0)
    assert np.all(d <= np.maximum(np.minimum(d_hat, d_hat.T), 0) + 1e-15)
    assert np.all(d[:, None, :] <= d[:, :, None] + d[None, :, :] + 1e-12)  # d_ij <= d_ik + d_kj


def test_triangle_tightening_makes_wem_pairs_consistent(road_domain_small, rng):
    dx = server.metric_closure(_noisy(road_domain_small.dist_xx[:10, :10], rng))
    dy_hat = _noisy(road_domain_small.dist_xy[:10], rng)
    dy = server.triangle_tighten(dx, dy_hat)
    assert np.all(dy <= np.maximum(dy_hat, 0) + 1e-15)
    # B(i,k) <= dx(i,j) + B(j,k) for every i, j, k
    assert np.all(dy[:, None, :] <= dx[:, :, None] + dy[None, :, :] + 1e-12)


def test_gamma_repair_is_conservative_once_gamma_covers_the_overestimate(road_domain_small, rng):
    true = road_domain_small.dist_xx[:15, :15]
    d_hat = _noisy(true, rng)
    gamma = float(np.max(d_hat - true))
    assert np.all(server.gamma_repair(d_hat, gamma) <= true + 1e-15)
    assert server.violation_ratio(true, server.gamma_repair(d_hat, gamma)) == 0.0


def test_quality_metrics_on_known_values():
    a = np.array([[0.0, 3.0], [4.0, 0.0]])
    b = np.array([[0.0, 3.0], [5.0, 0.0]])
    assert server.relative_error(a, b) == pytest.approx(1 / 5)
    assert server.violation_ratio(a, b, exclude_diagonal=True) == pytest.approx(0.5)
    assert server.violation_ratio(a, b) == pytest.approx(0.25)


@pytest.mark.parametrize(
    "call",
    [
        lambda: server.gamma_repair(np.ones(2), -1.0),
        lambda: server.gamma_repair(np.ones(2), float("nan")),
        lambda: server.metric_closure(np.ones((2, 3))),
        lambda: server.relative_error(np.zeros((2, 2)), np.ones((2, 2))),
        lambda: server.repair_blocks({"dx": np.zeros((2, 2))}),
    ],
)
def test_server_helpers_reject_bad_input(call):
    with pytest.raises(InputError):
        call()


THREE_USERS = np.array([4, 19, 33])  # the users' secrets given to fit
SURROGATE = {**CHEAP_STRICT, "tile_size": 20, "sweeps": 1}


@pytest.fixture(scope="module")
def fitted(road_domain_small):
    return make("dista_lp", epsilon=4.0, upload="strict", seed=3, **SURROGATE).fit(
        road_domain_small, users=THREE_USERS
    )


@pytest.mark.slow
def test_matrix_has_a_row_for_every_secret_verified_over_all_of_x(fitted, road_domain_small):
    assert fitted.matrix_.shape == (road_domain_small.n_x, road_domain_small.n_y)
    assert fitted.domain_ is road_domain_small
    eps_pt = fitted.info_["epsilon_pt"]
    assert verify(fitted.matrix_, road_domain_small.dist_xx, eps_pt).passed  # every pair of X
    for blocks, own in zip(fitted.info_["neighbourhoods"], fitted.info_["own_blocks"], strict=True):
        local = road_domain_small.dist_xx[np.ix_(blocks, blocks)]
        assert verify(own, local, eps_pt).passed  # the paper's per-neighbourhood check


@pytest.mark.slow
def test_strict_guarantee_composes_upload_and_report(fitted):
    g, up, rep = fitted.guarantee, fitted.upload_guarantee, fitted.report_guarantee
    assert g.kind == "pmdp" and g.epsilon_per_km == pytest.approx(4.0)
    assert up.kind == "pmdp" and rep.kind == "pure"
    assert up.epsilon_per_km + rep.epsilon_per_km == pytest.approx(g.epsilon_per_km)
    assert g.delta == up.delta == pytest.approx(0.05) and up.confidence is not None


@pytest.mark.slow
def test_bytes_are_counted_per_user(fitted):
    assert len(fitted.info_["bytes_up"]) == 3 and min(fitted.info_["bytes_up"]) > 0
    assert fitted.info_["bytes_down"] == [8 * 8 * 40] * 3


@pytest.mark.slow
def test_same_seed_gives_same_matrix(fitted, road_domain_small):
    again = make("dista_lp", epsilon=4.0, upload="strict", seed=3, **SURROGATE)
    again.fit(road_domain_small, users=THREE_USERS)
    np.testing.assert_array_equal(again.matrix_, fitted.matrix_)


@pytest.mark.parametrize("upload", ["none", "location"])
def test_pure_modes_compose_exactly_and_verify_over_x(upload, road_domain_small):
    mech = make("dista_lp", epsilon=6.0, upload=upload)
    mech.fit(road_domain_small, users=THREE_USERS)
    g, up, rep = mech.guarantee, mech.upload_guarantee, mech.report_guarantee
    assert g.kind == rep.kind == "pure" and g.epsilon_per_km == pytest.approx(6.0)
    spent = rep.epsilon_per_km + (0.0 if up is None else up.epsilon_per_km)
    assert spent == pytest.approx(6.0) and (up is None) == (upload == "none")
    assert mech.matrix_.shape[0] == road_domain_small.n_x
    assert verify(mech.matrix_, road_domain_small.dist_xx, rep.epsilon_per_km).passed


def test_release_is_never_worse_than_the_em_for_the_planned_weights(road_domain_small):
    mech = make("dista_lp", epsilon=6.0, planner="blocks", tile_size=20, sweeps=1)
    mech.fit(road_domain_small, users=THREE_USERS)
    assert mech.info_["planner"] == "blocks"
    info = mech.info_
    assert info["planner_weighted_loss"] <= info["planner_em_weighted_loss"] * (1 + 1e-6)
    em = make("em", epsilon=6.0).fit(road_domain_small)
    assert mech.expected_loss() < em.expected_loss()


def test_the_lp_medoids_planner_releases_an_exact_matrix_over_x(road_domain_small):
    mech = make("dista_lp", epsilon=6.0, planner="lp_medoids")
    mech.fit(road_domain_small, users=THREE_USERS)
    assert mech.matrix_.shape[0] == road_domain_small.n_x
    assert verify(mech.matrix_, road_domain_small.dist_xx, 6.0).passed


@pytest.mark.parametrize(
    "upload, planner", [("none", "lp_medoids"), ("location", "lp_medoids"), ("paper", "blocks")]
)
def test_the_default_planner_is_the_best_measured_one_for_the_mode(
    upload, planner, road_domain_small
):
    own = {"n_neighbours": 8} if upload == "paper" else {}  # a surrogate-mode parameter
    mech = make("dista_lp", epsilon=6.0, upload=upload, **own)
    assert mech.get_params()["planner"] is None  # the parameter stays as given
    if upload != "paper":  # (paper fits are slow; its planner is resolved without fitting)
        mech.fit(road_domain_small, users=THREE_USERS[:2])
        assert mech.info_["planner"] == planner
    assert mech._planner() == planner


def test_the_matrix_does_not_depend_on_the_true_locations_without_uploads(road_domain_small):
    a = make("dista_lp", epsilon=6.0)
    b = make("dista_lp", epsilon=6.0)
    np.testing.assert_array_equal(
        a.fit(road_domain_small, users=np.array([0, 5])).matrix_,
        b.fit(road_domain_small, users=np.array([7, 30, 31])).matrix_,
    )


def test_fit_leaves_public_parameters_unchanged(road_domain_small):
    mech = make("dista_lp", epsilon=6.0, upload="location")
    before = mech.get_params()
    mech.fit(road_domain_small, users=THREE_USERS[:2])
    assert mech.get_params() == before


@pytest.mark.parametrize(
    "params, field",
    [
        ({"upload": "raw"}, "upload"),
        ({"upload": "location", "upload_share": 0.0}, "upload_share"),
        ({"upload": "location", "upload_share": 1.0}, "upload_share"),
        ({"upload": "location", "eps_pt": 1.0}, "eps_dx"),
        ({"upload": "none", "upload_share": 0.1}, "upload_share"),
        ({"upload": "strict", "upload_share": 0.1}, "upload_share"),
        ({"upload": "strict", "eps_dx": 1.0}, "eps_dx"),  # all four parts or none
        ({"upload": "strict", "eps_dx": 1.0, "eps_dy": 1.0, "eps_cy": 1.0, "eps_pt": 2.0}, "eps_"),
        ({"upload": "paper", "paper_tau_c": 0.1}, "paper_tau_c"),
        ({"upload": "paper", "paper_noise": "fidelity:0"}, "paper_noise"),
        ({"upload": "paper", "paper_noise": "laplace"}, "paper_noise"),
        ({"n_neighbours": 1}, "n_neighbours"),
        ({"upload": "strict", "family": "spline"}, "family"),
        ({"gap": 0.0}, "gap"),
        ({"margin": 0.9}, "margin"),
        ({"gamma_km": -1.0}, "gamma"),
        ({"planner": "blocks", "tile_size": 1}, "tile_size"),
        ({"tile_size": 20}, "tile_size applies to planner='blocks' only"),
        ({"upload": "location", "sweeps": 1}, "sweeps applies to planner='blocks' only"),
        ({"planner": "simplex"}, "planner"),
        ({"upload": "strict", "planner": "lp_medoids"}, "planner"),
    ],
)
def test_dista_lp_rejects_bad_parameters_naming_them(params, field):
    with pytest.raises(InputError, match=field):
        make("dista_lp", epsilon=4.0, **params)


@pytest.mark.parametrize(
    "users, match",
    [(None, "needs its users"), (np.array([[1]]), "1-D"), (np.array([40]), r"\[0, 40\)")],
)
def test_fit_refuses_missing_or_bad_users_naming_them(users, match, road_domain_small):
    with pytest.raises(InputError, match=match):
        make("dista_lp", epsilon=4.0, upload="location").fit(road_domain_small, users=users)


def test_uploading_modes_need_a_user(road_domain_small):
    with pytest.raises(InputError, match="at least one user"):
        make("dista_lp", epsilon=4.0, upload="location").fit(
            road_domain_small, users=np.array([], int)
        )


def test_no_upload_fits_without_users_and_ignores_them(road_domain_small):
    alone = make("dista_lp", epsilon=4.0, upload="none")
    assert not alone.takes_uploads
    assert make("dista_lp", epsilon=4.0, upload="location").takes_uploads
    alone.fit(road_domain_small)
    assert alone.uploads_ is None and len(alone.info_["users"]) == 0
    with_users = make("dista_lp", epsilon=4.0, upload="none")
    with_users.fit(road_domain_small, users=np.array([3, 7]), rng=np.random.default_rng(1))
    np.testing.assert_array_equal(alone.matrix_, with_users.matrix_)
    assert with_users.uploads_ is None  # nobody uploaded: nothing to attack


def test_users_sharing_a_secret_share_one_upload(road_domain_small):
    mech = make("dista_lp", epsilon=6.0, upload="location")
    mech.fit(road_domain_small, users=np.array([7, 3, 7, 12]))
    np.testing.assert_array_equal(mech.info_["users"], [3, 7, 12])
    np.testing.assert_array_equal(mech.uploads_.slot, [1, 0, 1, 2])
    drawn = make("dista_lp", epsilon=6.0, upload="location")
    users = np.array([3, 7])
    drawn.fit(road_domain_small, users=users, rng=np.random.default_rng(1))
    same_seed = int(np.random.default_rng(1).integers(2**31))
    again = make("dista_lp", epsilon=6.0, upload="location", seed=same_seed)
    again.fit(road_domain_small, users=users)
    np.testing.assert_array_equal(drawn.matrix_, again.matrix_)  # seed drawn from the rng
    assert drawn.get_params()["seed"] is None


def test_constructor_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        make("dista_lp", epsilon=4.0).__class__(4.0, "none")


def test_calibrations_are_one_explicit_cache_shared_by_every_instance(road_domain_small):
    from mdpsim.mechanisms.dista_lp.mechanism import CalibrationCache, DistALP

    cache, made = CalibrationCache(), []

    def make_one():
        made.append(1)
        return len(made)

    assert cache.get(road_domain_small, ("strict", 1), make_one) == 1
    assert cache.get(road_domain_small, ("strict", 1), make_one) == 1  # made once
    assert cache.get(road_domain_small, ("paper", 1), make_one) == 2
    cache.clear()
    assert cache.get(road_domain_small, ("strict", 1), make_one) == 3
    a, b = make("dista_lp", epsilon=4.0), make("dista_lp", epsilon=5.0)
    assert a.calibrations is b.calibrations is DistALP.calibrations


def test_the_parameters_are_the_mechanism_s_the_planner_s_and_each_scheme_s():
    from mdpsim.mechanisms.dista_lp.mechanism import DistALP
    from mdpsim.mechanisms.dista_lp.uploads import SCHEMES

    own = {"epsilon", "upload", "planner", "margin", "seed", "tile_size", "n_near", "sweeps"}
    schemes = {p for s in SCHEMES.values() for p in s.param_names()}
    assert set(DistALP.param_names()) == own | schemes
    assert SCHEMES["none"].param_names() == []  # epsilon is the mechanism's, bound by it
    assert SCHEMES["location"].param_names() == ["upload_share"]
    assert "family" in SCHEMES["strict"].param_names()
    assert "family" not in SCHEMES["paper"].param_names()
    assert {"paper_tau_c", "paper_noise"} <= set(SCHEMES["paper"].param_names())


@pytest.mark.parametrize(
    "upload, param",
    [
        ("none", {"delta": 0.01}),
        ("location", {"n_neighbours": 8}),
        ("strict", {"paper_noise": "lipschitz"}),
        ("paper", {"family": "svd"}),
        ("none", {"eps_pt": 1.0}),
    ],
)
def test_a_parameter_of_another_mode_is_one_line_naming_it(upload, param):
    (name,) = param
    line = rf"dista_lp: .*{name}.* applies to upload=.*not '{upload}'"
    with pytest.raises(InputError, match=line):
        make("dista_lp", epsilon=4.0, upload=upload, **param)


def test_a_new_upload_scheme_is_its_module_and_its_schemes_entry(road_domain_small, request):
    from dataclasses import dataclass

    from mdpsim.mechanisms.dista_lp import uploads
    from mdpsim.mechanisms.dista_lp.uploads.none import NoUpload

    @dataclass(kw_only=True, repr=False, eq=False)
    class NearFirst(NoUpload):
        """No upload; the server plans for the prior tilted towards secret 0 (public)."""

        mode = "near_first"

        def upload(self, domain, users, rng, *, calibrations, margin):
            sent = super().upload(domain, users, rng, calibrations=calibrations, margin=margin)
            sent.weights = domain.prior * np.exp(-domain.dist_xx[0])
            return sent

    uploads.SCHEMES.register("near_first")(NearFirst)
    request.addfinalizer(lambda: uploads.SCHEMES.remove("near_first"))
    mech = make("dista_lp", epsilon=6.0, upload="near_first").fit(
        road_domain_small, users=THREE_USERS
    )
    assert mech.info_["upload"] == "near_first" and mech.info_["planner"] == "lp_medoids"
    assert mech.upload_guarantee is None and mech.guarantee.epsilon_per_km == 6.0
    assert verify(mech.matrix_, road_domain_small.dist_xx, 6.0).passed
    plain = make("dista_lp", epsilon=6.0).fit(road_domain_small, users=THREE_USERS)
    assert not np.array_equal(mech.matrix_, plain.matrix_)  # planned for its own weights
