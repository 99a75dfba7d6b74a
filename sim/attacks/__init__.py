"""The honest-but-curious server's attacks behind one contract, and their registry.

``make(name, **params)`` builds one, ``available()`` lists the names; the contract and the
scoring are in :mod:`mdpsim.attacks.base`, running several together in :mod:`mdpsim.attacks.suite`.
Each attack module registers itself with ``@register(name)`` when imported below.
"""

from mdpsim.attacks import (  # noqa: F401
    bayes,
    home_work,
    linkage,
    places,
    tracking,
    uniqueness,
    upload_stage,
)
from mdpsim.attacks.base import (
    _ATTACKS,
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
from mdpsim.attacks.bayes import BayesAttack, posterior_leakage_per_output
from mdpsim.attacks.suite import AttackSuite
from mdpsim.mechanisms.dista_lp.locate import upload_location_estimate

# After the built-ins: plug-ins by entry point (docs/plugins.md); a clash with a built-in warns.
_ATTACKS.open_to_plugins("mdpsim.attacks", Attack)

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
