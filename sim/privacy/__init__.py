"""Privacy checks and accounting: the exact mDP verifier, PmDP auditing, accountants, filters.

The verifier imports no mechanism: it trusts only a matrix and the true distances.
"""

from sim.privacy.verify import PrivacyViolation, VerifyResult, verify

__all__ = ["PrivacyViolation", "VerifyResult", "verify"]
