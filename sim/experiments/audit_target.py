"""What ``mdpsim audit`` audits: a registered mechanism, or ``MODULE:FACTORY`` (a callable
returning a mechanism, fitted or not, or a Mechanism subclass built with ``--epsilon``);
docs/reliability.md. Every mistake of the user's module is one InputError line.

A :class:`~mdpsim.mechanisms.Mechanism` is audited on the path a run draws its reports on:
fitted through :func:`~mdpsim.mechanisms.fit_release` (one fitted by the factory is fitted
again on its ``domain_``, from one user at each secret if it takes uploads), and sampled
through the :class:`~mdpsim.privacy.release.CertifiedRelease` it returned, never through the
instance. Anything else is a black box: its own ``sample_many`` is audited."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mdpsim.errors import InputError, one_line
from mdpsim.privacy.release import CertifiedRelease


@dataclass(frozen=True, eq=False)
class AuditedRelease:
    """A mechanism as the run releases it: the auditor draws from ``release`` (what
    ``mechanism_sampler`` and ``sample_many`` use), on ``domain_``, at the claimed
    ``epsilon``."""

    mechanism: Any
    release: CertifiedRelease
    domain_: Any
    epsilon: float | None

    def sample_many(self, indices, rng: np.random.Generator) -> np.ndarray:
        """Draws from the release (the certified copy), one per secret index."""
        return self.release.draw(indices, rng)


def audited_mechanism(spec: str, *, epsilon: float | None, domain: Callable[[], Any]):
    """The fitted mechanism ``spec`` names (a registered name or ``MODULE:FACTORY``) and a
    label for it (``{metric}`` where the domain's metric goes); fitted on ``domain()`` unless
    the factory fitted it. A Mechanism comes back as an :class:`AuditedRelease`."""
    from mdpsim.mechanisms import Mechanism, make

    if ":" not in spec:
        mech = make(spec, epsilon=4.0 if epsilon is None else epsilon)
    else:
        mech = from_factory(spec, epsilon)
        fitted = hasattr(mech, "domain_")
        if fitted and not issubclass(type(mech), Mechanism):  # a black box, on its domain
            return mech, f"{spec} (fitted by the factory)"
        if fitted:  # fitted again on that domain, as a run fits it
            return _released(mech, mech.domain_), f"{spec} (fitted by the factory)"
        if epsilon is None and not hasattr(mech, "epsilon"):
            raise InputError(f"mechanism={spec!r} has no .epsilon: pass --epsilon")
    if not issubclass(type(mech), Mechanism):
        return mech.fit(domain()), f"{spec} ({{metric}})"
    return _released(mech, domain()), f"{spec} ({{metric}})"


def _released(mech, domain) -> AuditedRelease:
    """``mech`` fitted through fit_release on ``domain``: what its reports are drawn from."""
    from mdpsim.mechanisms import fit_release

    users = np.arange(domain.n_x) if mech.takes_uploads else None
    release = fit_release(mech, domain, users=users)
    return AuditedRelease(mech, release, domain, getattr(mech, "epsilon", None))


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
