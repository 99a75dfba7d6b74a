"""The contract of a DistA-LP upload scheme: its parameters, budgets, guarantee and uploads.

A scheme is one upload mode (``none``, ``location``, ``strict``, ``paper``; one module each).
It takes ``epsilon`` (the mechanism's total, per km) and its own keyword parameters, says how
``epsilon`` splits into the upload's and one report's budget, what each upload costs (its
guarantee) and runs the users' uploads and what the server reads from them: the weight of
each secret in the server's plan, the rows to plan on (``None``: the planner's own tiles of
X) and the server's guess of each user. :class:`~mdpsim.mechanisms.dista_lp.mechanism.DistALP`
composes a scheme with a planner (planner.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Self, TypeVar
from weakref import WeakKeyDictionary

import numpy as np

from mdpsim._core.component import Component
from mdpsim._core.validation import check_epsilon
from mdpsim.errors import InputError
from mdpsim.privacy.guarantees import PMDP, Audit, PureMDP

BYTES_PER_FLOAT = 8
T = TypeVar("T")


class CalibrationCache:
    """Noise calibrations by domain (held weakly) and key.

    A calibration depends on (domain, configuration, seed) only, public facts, and is the
    costliest step of a surrogate-mode fit; the simulation builds a new mechanism at every
    regeneration, so :class:`~mdpsim.mechanisms.dista_lp.mechanism.DistALP` keeps one cache
    for all its instances (``DistALP.calibrations``; ``clear()`` empties it).
    """

    def __init__(self) -> None:
        self._by_domain: WeakKeyDictionary = WeakKeyDictionary()

    def get(self, domain, key: tuple, make: Callable[[], T]) -> T:
        """The calibration stored under ``key`` for ``domain``, made by ``make()`` once."""
        per_domain = self._by_domain.setdefault(domain, {})
        if key not in per_domain:
            per_domain[key] = make()
        return per_domain[key]

    def clear(self) -> None:
        """Forget every calibration."""
        self._by_domain.clear()


@dataclass
class Uploaded:
    """What the server holds after the uploads of the distinct users (one per secret)."""

    weights: np.ndarray  # per secret of X, unnormalised: what the plan is weighted by
    guesses: np.ndarray  # the server's guess of each user, an output index
    blocks: list[np.ndarray] | None = None  # rows to plan on (None: the planner's tiles)
    audit: Audit | None = None  # how the upload's PmDP claim was checked (surrogate modes)
    info: dict = field(default_factory=dict)


@dataclass(kw_only=True, repr=False, eq=False)
class UploadScheme(Component, ABC):
    """One upload mode: keyword parameters (its fields), validated at construction.

    A scheme is built by the user without ``epsilon`` (``StrictUpload(delta=0.01)``, the
    ``upload=`` of :class:`~mdpsim.mechanisms.dista_lp.mechanism.DistALP`); the mechanism binds
    its own ``epsilon`` with :meth:`bind`, which checks what depends on it (the budget split).
    A scheme equals its mode's name (``StrictUpload() == "strict"``), so readers of the old
    string ``upload`` keep working.
    """

    mode: ClassVar[str] = "?"
    #: Planners that can plan on what this scheme uploads; the first is the default.
    planners: ClassVar[tuple[str, ...]] = ("blocks",)
    #: Whether the users upload (``False``: the fit has no users; ``True``: at least one).
    takes_uploads: ClassVar[bool] = True

    epsilon: float | None = None

    def __post_init__(self) -> None:
        if self.epsilon is not None:
            self.epsilon = check_epsilon(self.epsilon, owner="dista_lp")

    @classmethod
    def param_names(cls) -> list[str]:
        """The scheme's own parameters (``epsilon`` is the mechanism's, bound by it)."""
        return [n for n in super().param_names() if n != "epsilon"]

    @property
    def eps(self) -> float:
        """The bound ``epsilon`` (per km); a scheme not bound yet has no budgets."""
        if self.epsilon is None:
            raise InputError(f"upload scheme {self.mode!r} has no epsilon yet; give it to DistALP")
        return self.epsilon

    @property
    def scheme(self) -> str:
        """The mode's name (``"none"``, ``"location"``, ``"strict"``, ``"paper"``)."""
        return self.mode

    def bind(self, epsilon: float) -> Self:
        """A copy with the mechanism's ``epsilon``, every parameter checked against it."""
        return type(self)(epsilon=epsilon, **self.get_params())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return other == self.mode
        if isinstance(other, UploadScheme):
            return type(other) is type(self) and other.get_params() == self.get_params()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.mode)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    @abstractmethod
    def budgets(self) -> tuple[float, float]:
        """``(eps_upload, eps_pt)`` per km."""

    def check_domain_size(self, n_x: int, n_y: int) -> None:
        """Raise :class:`InputError` if a domain of ``n_x`` secrets and ``n_y`` outputs cannot
        take these parameters (``Mechanism.check_domain_size``: at fit and at load)."""

    @abstractmethod
    def guarantee(self, audit: Audit | None) -> PureMDP | PMDP | None:
        """What each upload costs (``audit``: the fitted audit record, ``None`` before)."""

    @abstractmethod
    def upload(
        self,
        domain,
        users: np.ndarray,
        rng: np.random.Generator,
        *,
        calibrations: CalibrationCache,
        margin: float,
    ) -> Uploaded:
        """Every distinct user's upload (``users``: their secrets, sorted, distinct) and
        what the server reads from them; ``calibrations`` keeps the public noise
        calibrations, ``margin`` is the LPs' (they run at ``eps_pt (1 - margin)``)."""
