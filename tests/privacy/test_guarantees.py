"""Guarantees as types: certify by type, fail closed in fit, charge only these types.

The no-privacy fixture (its ``_fit`` releases the nearest-output matrix) is refused by
``Mechanism.fit`` whatever it claims for its reports: pure, PmDP or a composition.
"""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.agents.strategies.budget import BUDGET_POLICIES
from mdpsim.errors import InputError, PluginError
from mdpsim.mechanisms import make
from mdpsim.mechanisms.base import Mechanism
from mdpsim.privacy import CGP, PureGP
from mdpsim.privacy.filters import charge_of
from mdpsim.privacy.guarantees import (
    PMDP,
    Audit,
    Composition,
    NoGuarantee,
    PureMDP,
    certify,
    check_guarantee,
    compose,
)
from mdpsim.privacy.verifier import PrivacyViolation

AUDITED = Audit(0.99, "Clopper-Pearson", n_samples=4000, n_records=20)


class Nearest(Mechanism):
    """No privacy at all: every secret reports its nearest output. Claims ``claim``."""

    def __init__(self, epsilon: float, *, claim=None) -> None:
        super().__init__(epsilon)
        self.claim = claim

    @property
    def report_guarantee(self):
        return self.claim

    def _fit(self, domain):
        Z = np.zeros((domain.n_x, domain.n_y))
        Z[np.arange(domain.n_x), np.argmin(domain.dist_xy, axis=1)] = 1.0
        return Z, {}


CLAIMS = {
    "pure": PureMDP(4.0),
    "pmdp": PMDP(4.0, 1e-4, AUDITED),
    "pmdp-unaudited": PMDP(4.0, 1e-4),
    "pure+pure": compose(PureMDP(1.0), PureMDP(3.0)),
    "pmdp+pure": compose(PMDP(1.0, 1e-4, AUDITED), PureMDP(3.0)),
}


@pytest.mark.parametrize("claim", CLAIMS.values(), ids=CLAIMS.keys())
def test_the_no_privacy_mechanism_is_refused_whatever_it_claims(claim, road_domain_small):
    with pytest.raises(PrivacyViolation):
        Nearest(4.0, claim=claim).fit(road_domain_small)


@pytest.mark.parametrize("claim", [None, "pure", {"kind": "pure", "epsilon_per_km": 4.0}])
def test_a_claim_that_is_not_a_guarantee_type_is_refused(claim, road_domain_small):
    with pytest.raises(TypeError, match="not a guarantee"):
        check_guarantee(claim)  # what mdpsim's own mechanisms meet
    # Nearest is defined outside mdpsim, a plug-in: its claim is one line naming it
    with pytest.raises(PluginError, match="Nearest: report_guarantee returned .*, not a guarantee"):
        Nearest(4.0, claim=claim).fit(road_domain_small)


def test_certify_is_exact_for_pure_and_refuses_pmdp(road_domain_small):
    em = make("em", epsilon=4.0).fit(road_domain_small)
    assert certify(PureMDP(4.0), em.matrix_, road_domain_small) <= 4.0 * (1 + 1e-9)
    assert certify(compose(PureMDP(1.0), PureMDP(3.0)), em.matrix_, road_domain_small) <= 4.0
    with pytest.raises(PrivacyViolation, match="not 3/km-mDP"):
        certify(PureMDP(3.0), em.matrix_, road_domain_small)
    with pytest.raises(PrivacyViolation, match="cannot be certified exactly"):
        certify(PMDP(4.0, 1e-4, AUDITED), em.matrix_, road_domain_small)


def test_composition_adds_up_and_reads_well():
    g = compose(PMDP(0.9, 0.05, AUDITED), PureMDP(3.1), labels=("upload", "report"))
    assert isinstance(g, Composition) and g.kind == "pmdp"
    assert g.epsilon_per_km == pytest.approx(4.0) and g.delta == pytest.approx(0.05)
    assert g.confidence == pytest.approx(0.99)
    text = str(g)
    assert text.startswith("(4/km, 0.05)-PmDP, confidence 0.99; sequential composition: ")
    assert "upload [(0.9/km, 0.05)-PmDP, confidence 0.99]" in text
    assert "report [3.1/km-mDP (pure)]" in text
    assert str(PureMDP(7.0)) == "7/km-mDP (pure)"
    assert compose(PureMDP(2.0)) == PureMDP(2.0)
    assert str(AUDITED) == "confidence 0.99 (Clopper-Pearson; 4000 samples, 20 records)"
    with pytest.raises(TypeError):
        Composition((PureMDP(1.0), "pure"))  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [{"epsilon_per_km": -1.0}, {"epsilon_per_km": float("nan")}])
def test_bad_guarantee_values_are_refused(bad):
    with pytest.raises(InputError, match="epsilon_per_km"):
        PureMDP(**bad)
    with pytest.raises(InputError, match="delta"):
        PMDP(1.0, 0.0)


def test_charges_dispatch_on_the_type():
    cgp, pure = CGP(100.0), PureGP(20.0)
    assert charge_of(cgp, PureMDP(4.0)).cost == pytest.approx(8.0)
    assert charge_of(pure, PureMDP(4.0)).cost == pytest.approx(4.0)
    pm = charge_of(cgp, PMDP(4.0, 1e-4, AUDITED))
    assert (pm.cost, pm.delta) == (pytest.approx(8.0), pytest.approx(1e-4))
    both = charge_of(cgp, compose(PMDP(1.0, 1e-4, AUDITED), PureMDP(3.0)))
    assert both.cost == pytest.approx(0.5 + 4.5) and both.delta == pytest.approx(1e-4)
    with pytest.raises(InputError, match="pure GP budget cannot charge"):
        charge_of(pure, PMDP(4.0, 1e-4, AUDITED))
    with pytest.raises(InputError, match="not been audited"):
        charge_of(cgp, PMDP(4.0, 1e-4))  # an unfitted mechanism's claim
    with pytest.raises(TypeError, match="not a guarantee"):
        charge_of(cgp, {"kind": "pure", "epsilon_per_km": 4.0})  # type: ignore[arg-type]


def test_budget_policies_accept_only_guarantee_types():
    policy = BUDGET_POLICIES.make("cgp")
    assert policy.charge(PureMDP(2.0)).cost == pytest.approx(2.0)
    with pytest.raises(TypeError, match="not a guarantee"):
        policy.charge(4.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        policy.check(report="pure", upload=None, queries=False)
    assert check_guarantee(PureMDP(1.0)) == PureMDP(1.0)


def test_a_matrix_that_claims_nothing_is_fitted_for_reading_and_never_charged(road_domain_small):
    mech = Nearest(4.0, claim=NoGuarantee(note="a reference")).fit(road_domain_small)
    assert mech.info_["verified_epsilon"] is None and str(mech.report_guarantee).startswith("no")
    for name in ("cgp", "pure_gp", "renewing"):
        with pytest.raises(InputError, match="cannot be charged"):
            BUDGET_POLICIES.make(name).check(
                report=mech.report_guarantee, upload=None, queries=False
            )
