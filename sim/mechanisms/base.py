"""The mechanism contract (scikit-learn style) and the registry.

A mechanism stores its parameters in ``__init__`` (validated there), does its work in
``fit(domain)`` and keeps what it learned in attributes ending in ``_``:

* ``matrix_``: the N x K row-stochastic float64 matrix ``Z[i, k] = Pr[y_k | x_i]``;
* ``domain_``: the domain it was fitted on;
* ``info_``: solver status, timings (seconds) and sizes.

Subclasses implement ``_fit(domain) -> (matrix, info)``; the base class checks the matrix
(finite, non-negative, rows summing to 1 within 1e-9, then renormalised) and times the fit.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Self

import numpy as np

from sim.errors import InputError
from sim.sampling import sample_rows

ROW_SUM_TOL = 1e-9
_REGISTRY: dict[str, type[Mechanism]] = {}


@dataclass(frozen=True)
class Guarantee:
    """What a mechanism promises.

    ``kind="pure"``: eps-mDP, ``Z[i,k] <= exp(eps d(x_i,x_j)) Z[j,k]`` for all i, j, k.
    ``kind="pmdp"``: (eps, delta)-probabilistic mDP (DistA-LP's upload stage), certified with
    ``confidence`` by the Monte Carlo auditor.
    """

    kind: str
    epsilon_per_km: float
    delta: float = 0.0
    confidence: float | None = None
    note: str = ""

    def __str__(self) -> str:
        if self.kind == "pure":
            text = f"{self.epsilon_per_km:g}/km-mDP (pure)"
        else:
            conf = "" if self.confidence is None else f", confidence {self.confidence:.6g}"
            text = f"({self.epsilon_per_km:g}/km, {self.delta:g})-PmDP{conf}"
        return f"{text}; {self.note}" if self.note else text


def register(name: str):
    """Class decorator: make a mechanism available as ``make(name, ...)``."""

    def deco(cls: type[Mechanism]) -> type[Mechanism]:
        if name in _REGISTRY:
            raise ValueError(f"mechanism name {name!r} registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def available() -> list[str]:
    """Names of all registered mechanisms, in registration order."""
    return list(_REGISTRY)


def make(name: str, **params) -> Mechanism:
    """Construct a registered mechanism by name, e.g. ``make("lp", epsilon=4.0)``."""
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise InputError(
            f"unknown mechanism {name!r}; available: {', '.join(available())}"
        ) from None
    return cls(**params)


def check_epsilon(epsilon, name: str = "epsilon") -> float:
    """A privacy budget in 1/km: a finite number > 0."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
        raise InputError(f"{name}={epsilon!r} must be a number (per km)")
    value = float(epsilon)
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{name}={epsilon!r} must be finite and > 0 (per km)")
    return value


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """An integer parameter at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name}={value!r} must be an integer >= {minimum}")
    return int(value)


class Mechanism(ABC):
    """Base class of all location-privacy mechanisms over a finite domain."""

    name: ClassVar[str] = "?"

    def __init__(self, epsilon: float) -> None:
        self.epsilon = check_epsilon(epsilon)

    # --------------------------------------------------------------- the contract
    @abstractmethod
    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        """Build the N x K matrix for ``domain``; return it with an info dict."""

    @property
    def guarantee(self) -> Guarantee:
        """Pure eps-mDP unless a subclass says otherwise."""
        return Guarantee(kind="pure", epsilon_per_km=self.epsilon)

    def fit(self, domain) -> Self:
        """Build the mechanism for ``domain`` and return ``self``."""
        start = time.perf_counter()
        matrix, info = self._fit(domain)
        elapsed = time.perf_counter() - start
        self.matrix_ = _checked_matrix(matrix, domain, type(self).__name__)
        self.domain_ = domain
        self.info_ = {"fit_seconds": elapsed, "n_x": domain.n_x, "n_y": domain.n_y, **info}
        return self

    def sample(self, i: int, rng: np.random.Generator) -> int:
        """Index of one output drawn for secret ``i``."""
        return int(self.sample_many(np.array([i]), rng)[0])

    def sample_many(self, indices, rng: np.random.Generator) -> np.ndarray:
        """Output indices drawn independently for each secret index in ``indices``."""
        matrix = self._fitted_matrix()
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= len(matrix))):
            raise InputError(f"secret indices must lie in [0, {len(matrix)})")
        return sample_rows(matrix, idx, rng)

    def expected_loss(self, cost: np.ndarray | None = None) -> float:
        """``sum_i pi_i sum_k Z[i,k] c(x_i, y_k)`` in km (``c = dist_xy`` by default)."""
        matrix = self._fitted_matrix()
        c = self.domain_.dist_xy if cost is None else np.asarray(cost, dtype=float)
        return float(self.domain_.prior @ np.einsum("ik,ik->i", matrix, c))

    def get_params(self) -> dict:
        """Constructor parameters (public attributes not ending in ``_``)."""
        return {k: v for k, v in vars(self).items() if not k.endswith("_")}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    def _fitted_matrix(self) -> np.ndarray:
        try:
            return self.matrix_
        except AttributeError:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(domain)") from None


def _checked_matrix(matrix: np.ndarray, domain, who: str) -> np.ndarray:
    Z = np.array(matrix, dtype=np.float64, copy=True)
    if Z.shape != (domain.n_x, domain.n_y):
        raise RuntimeError(f"{who} produced a {Z.shape} matrix for a {domain.n_x}x{domain.n_y} domain")
    if not np.all(np.isfinite(Z)) or np.any(Z < 0):
        raise RuntimeError(f"{who} produced negative or non-finite probabilities")
    sums = Z.sum(axis=1)
    if np.any(np.abs(sums - 1.0) > ROW_SUM_TOL):
        worst = int(np.argmax(np.abs(sums - 1.0)))
        raise RuntimeError(f"{who}: row {worst} sums to {sums[worst]!r}, not 1")
    Z /= sums[:, None]
    Z.setflags(write=False)
    return Z
