"""Location-privacy mechanisms behind one interface, and their registry.

``make(name, epsilon=..., **params)`` builds one; ``available()`` lists the names.
Each mechanism module registers itself with ``@register(name)`` when imported below.
"""

from mdpsim.mechanisms import (  # noqa: F401
    copt,
    em,
    interp,
    laplace,
    panda,
    rmp,
)
from mdpsim.mechanisms.base import (
    _MECHANISMS,
    Guarantee,
    Mechanism,
    available,
    fit_release,
    make,
    mechanism_class,
    register,
)
from mdpsim.mechanisms.dista_lp import mechanism as _dista_lp  # noqa: F401
from mdpsim.mechanisms.lp import lp_a, medoids, optimal, stackelberg  # noqa: F401

# After the built-ins: plug-ins by entry point (docs/plugins.md); a clash with a built-in warns.
_MECHANISMS.open_to_plugins("mdpsim.mechanisms", Mechanism)

__all__ = [
    "Guarantee",
    "Mechanism",
    "available",
    "fit_release",
    "make",
    "mechanism_class",
    "register",
]
