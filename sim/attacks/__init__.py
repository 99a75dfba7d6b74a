"""The honest-but-curious server's inference attacks on reports and uploads."""

from sim.attacks.bayes import BayesAttack, posterior_leakage_per_output
from sim.attacks.tracking import TrackingAttack
from sim.attacks.upload import upload_location_estimate

__all__ = [
    "BayesAttack",
    "TrackingAttack",
    "posterior_leakage_per_output",
    "upload_location_estimate",
]
