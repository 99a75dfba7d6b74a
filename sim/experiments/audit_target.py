"""What ``mdpsim audit`` audits: a registered mechanism, or ``MODULE:FACTORY`` (a callable
returning a mechanism, fitted or not, or a Mechanism subclass built with ``--epsilon``);
docs/reliability.md. Every mistake of the user's module is one InputError line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from mdpsim.errors import InputError, one_line


def audited_mechanism(spec: str, *, epsilon: float | None, domain: Callable[[], Any]):
    """The fitted mechanism ``spec`` names (a registered name or ``MODULE:FACTORY``) and a
    label for it (``{metric}`` where the domain's metric goes); fitted on ``domain()`` unless
    the factory fitted it."""
    from mdpsim.mechanisms import make

    if ":" not in spec:
        mech = make(spec, epsilon=4.0 if epsilon is None else epsilon)
    else:
        mech = from_factory(spec, epsilon)
        if hasattr(mech, "domain_"):  # fitted: audited on the domain it was fitted to
            return mech, f"{spec} (fitted by the factory)"
        if epsilon is None and not hasattr(mech, "epsilon"):
            raise InputError(f"mechanism={spec!r} has no .epsilon: pass --epsilon")
    return mech.fit(domain()), f"{spec} ({{metric}})"


def from_factory(spec: str, epsilon: float | None = None):
    """Call ``MODULE:FACTORY`` (imported from the current folder or the installed packages)
    and check that it returned something the auditor can sample; a Mechanism subclass is
    built with ``epsilon``."""
    import importlib
    import os

    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except Exception as exc:  # the user's module: any failure is a bad argument
        raise InputError(
            f"mechanism={spec!r}: cannot import it ({one_line(exc)}); use MODULE:FACTORY"
        ) from exc
    if not callable(factory):
        raise InputError(f"mechanism={spec!r}: {attr} is not callable; use MODULE:FACTORY")
    from mdpsim.mechanisms import Mechanism

    if isinstance(factory, type) and issubclass(factory, Mechanism):  # a class: its epsilon
        if epsilon is None:
            raise InputError(f"mechanism={spec!r} is a Mechanism class: pass --epsilon")
        from mdpsim._core.component import build

        return build(factory, {"epsilon": epsilon})
    try:
        mech = factory()
    except Exception as exc:
        raise InputError(f"mechanism={spec!r}: the factory raised {one_line(exc)}") from exc
    if not hasattr(mech, "sample_many") or not (hasattr(mech, "fit") or hasattr(mech, "domain_")):
        raise InputError(
            f"mechanism={spec!r}: the factory returned {type(mech).__name__}, not a mechanism "
            "(needs sample_many and fit, or a fitted domain_)"
        )
    return mech
