"""The honest-but-curious server's attacks behind one contract, and their registry.

``make(name, **params)`` builds one, ``available()`` lists the names; the contract and the
scoring are in :mod:`sim.attacks.base`, running several together in :mod:`sim.attacks.suite`.
Each attack module registers itself with ``@register(name)`` when imported below.
"""

from sim.attacks import bayes, linkage, places, tracking, upload_stage  # noqa: F401
from sim.attacks.base import (
    METRICS,
    Attack,
    Context,
    LinkEstimate,
    LocationEstimate,
    Observation,
    PlacesEstimate,
    Release,
    Scores,
    available,
    make,
    register,
    score,
)
from sim.attacks.bayes import BayesAttack, posterior_leakage_per_output
from sim.attacks.suite import AttackSuite
from sim.attacks.upload import upload_location_estimate

__all__ = [
    "METRICS",
    "Attack",
    "AttackSuite",
    "BayesAttack",
    "Context",
    "LinkEstimate",
    "LocationEstimate",
    "Observation",
    "PlacesEstimate",
    "Release",
    "Scores",
    "available",
    "make",
    "posterior_leakage_per_output",
    "register",
    "score",
    "upload_location_estimate",
]
