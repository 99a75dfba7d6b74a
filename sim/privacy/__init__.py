"""Privacy checks and accounting: the exact mDP verifier, accountants and filters.

The verifier imports no mechanism: it trusts only a matrix and the true distances.
The PmDP auditor and DistA-LP's budget split live in ``mdpsim.privacy.pmdp`` and
``mdpsim.privacy.split``.
"""

from mdpsim.privacy.accounting import (
    CGP,
    ApproxGP,
    PureGP,
    approx_gp_to_cgp_budget,
    cgp_to_approx_gp,
    gaussian_release,
    gp_to_cgp,
)
from mdpsim.privacy.filters import PopulationFilter, PrivacyFilter
from mdpsim.privacy.guarantees import (
    PMDP,
    Audit,
    Composition,
    NoGuarantee,
    PureMDP,
    certify,
    compose,
)
from mdpsim.privacy.verifier import PrivacyViolation, VerifyResult, verify

__all__ = [
    "CGP",
    "PMDP",
    "ApproxGP",
    "Audit",
    "Composition",
    "NoGuarantee",
    "PopulationFilter",
    "PrivacyFilter",
    "PrivacyViolation",
    "PureGP",
    "PureMDP",
    "VerifyResult",
    "approx_gp_to_cgp_budget",
    "certify",
    "cgp_to_approx_gp",
    "compose",
    "gaussian_release",
    "gp_to_cgp",
    "verify",
]
