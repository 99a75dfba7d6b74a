"""Privacy checks and accounting: the exact mDP verifier, PmDP auditing, accountants, filters.

The verifier imports no mechanism: it trusts only a matrix and the true distances.
"""

from sim.privacy.verify import PrivacyViolation, VerifyResult, verify

__all__ = ["PrivacyViolation", "VerifyResult", "verify"]

# Adaptive budgeting: geo-privacy notions, conversions and filters.
from sim.privacy.accounting import (  # noqa: E402
    CGP,
    ApproxGP,
    PureGP,
    approx_gp_to_cgp_budget,
    cgp_to_approx_gp,
    gaussian_release,
    gp_to_cgp,
)
from sim.privacy.filters import PopulationFilter, PrivacyFilter  # noqa: E402

__all__ += [
    "CGP",
    "ApproxGP",
    "PopulationFilter",
    "PrivacyFilter",
    "PureGP",
    "approx_gp_to_cgp_budget",
    "cgp_to_approx_gp",
    "gaussian_release",
    "gp_to_cgp",
]
